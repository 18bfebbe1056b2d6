"""Property tests on random valid models and random events that fit them."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.schema import TAG_CONTAINER, Schema, schema_from_arrow_metadata
from giod.schema.arrow import CONTAINER_KEY
from tests.schema.strategies import events_for, schemas

FAST = settings(max_examples=20, deadline=None)


@FAST
@given(schemas())
def test_yaml_round_trip(schema: Schema) -> None:
    text = schema.to_yaml()
    again = Schema.from_yaml(text)
    assert again == schema
    assert again.fingerprint == schema.fingerprint
    assert again.to_yaml() == text
    assert Schema.from_dict(schema.to_dict()) == schema


@FAST
@given(schemas())
def test_constructor_accepts_the_parts_of_a_valid_model(schema: Schema) -> None:
    rebuilt = Schema(
        name=schema.name,
        description=schema.description,
        types=schema.types,
        collections=schema.collections,
        tags=schema.tags,
    )
    assert rebuilt == schema


@FAST
@given(schemas())
def test_arrow_schemas_are_valid(schema: Schema) -> None:
    assert set(schema.containers) == {c.container for c in schema.collections.values()} | (
        {TAG_CONTAINER} if schema.tags else set()
    )
    for container, members in schema.containers.items():
        arrow_schema = schema.arrow_schema(container)
        assert all(not f.nullable for f in arrow_schema)
        assert arrow_schema.metadata[CONTAINER_KEY] == container.encode()
        assert schema_from_arrow_metadata(arrow_schema) == schema
        if container == TAG_CONTAINER:
            assert arrow_schema.names == list(schema.tags)
            continue
        assert arrow_schema.names == sorted(members)
        for name in members:
            column_type = arrow_schema.field(name).type
            assert column_type == schema.arrow_type(name)
            type_def = schema.collection_type(name)
            struct = column_type.value_type
            assert [struct.field(i).name for i in range(struct.num_fields)] == [
                *type_def.fields,
                *type_def.relations,
            ]
            assert all(not struct.field(i).nullable for i in range(struct.num_fields))
        # An empty table of this layout must be constructible.
        assert arrow_schema.empty_table().num_rows == 0


def _parquet_round_trip(table: pa.Table) -> pa.Table:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=3)
    sink.seek(0)
    return pq.read_table(sink)


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_random_events_round_trip_through_parquet(data: st.DataObject) -> None:
    schema = data.draw(schemas())
    n_events = data.draw(st.integers(0, 5))
    events: list[dict[str, Any]] = data.draw(events_for(schema, n_events))
    for container, members in schema.containers.items():
        table = pa.Table.from_pylist(events, schema=schema.arrow_schema(container))
        back = schema.adapt_table(_parquet_round_trip(table), container, schema)
        assert back.schema.equals(schema.arrow_schema(container), check_metadata=True)
        assert schema_from_arrow_metadata(back.schema) == schema
        names = list(schema.tags) if container == TAG_CONTAINER else list(members)
        assert back.to_pylist() == [{n: event[n] for n in names} for event in events]
