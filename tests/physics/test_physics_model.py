"""The physics data model (model.yaml) and the events that the generator and simulation make."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.errors import DataError
from giod.physics.layout import build_collection, collection_fields, model_text, stable_order, tag_dtypes
from giod.schema import Schema

RAW = {"truth": ["mcparticles"], "raw.tracker": ["tracker_hits"], "raw.calo": ["calo_cells"]}


@pytest.fixture(scope="module")
def schema() -> Schema:
    return Schema.from_text(model_text(), source="model.yaml")


def test_model_declares_the_full_chain(schema: Schema) -> None:
    assert set(schema.containers) >= {"truth", "raw.tracker", "raw.calo", "reco", "tag"}
    assert set(schema.containers["reco"]) == {"tracks", "clusters", "jets"}
    assert collection_fields("tracks")["hits"] is None  # one-to-many
    assert collection_fields("tracker_hits")["particle"] == np.dtype(np.int32)
    assert {"run", "event", "njets", "ht", "met", "lead_jet_pt", "mjj", "ntracks"} <= set(tag_dtypes())


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Arrow types equal up to nullability of their fields."""
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return [f.name for f in a] == [f.name for f in b] and all(
            _same_type(fa.type, fb.type) for fa, fb in zip(a, b)
        )
    if pa.types.is_list(a) or pa.types.is_large_list(a):
        return (pa.types.is_list(b) or pa.types.is_large_list(b)) and _same_type(a.value_type, b.value_type)
    return a == b


def _check_conforms(events: ak.Array, schema: Schema, containers: dict[str, list[str]]) -> None:
    for container, collections in containers.items():
        expected = schema.arrow_schema(container)
        table = ak.to_arrow_table(events[collections], extensionarray=False)
        assert table.schema.names == expected.names
        for name in expected.names:
            assert _same_type(table.schema.field(name).type, expected.field(name).type), (container, name)
    tags = schema.arrow_schema("tag")
    for name in ("run", "event"):
        assert ak.to_arrow(events[name], extensionarray=False).type == tags.field(name).type


def test_generated_events_conform(generated: ak.Array, schema: Schema) -> None:
    assert set(generated.fields) == {"mcparticles", "run", "event"}
    _check_conforms(generated, schema, {"truth": ["mcparticles"]})


def test_simulated_events_conform(simulated: ak.Array, schema: Schema) -> None:
    assert set(simulated.fields) == {"mcparticles", "tracker_hits", "calo_cells", "run", "event"}
    _check_conforms(simulated, schema, RAW)


def test_simulated_events_go_through_the_writer_conversion(simulated: ak.Array, schema: Schema) -> None:
    columns = pytest.importorskip("giod.columns", reason="the federation's column conversion is absent")
    tables = columns.to_tables(simulated, schema, ("truth", "raw.tracker", "raw.calo"))
    assert tables["raw.calo"].num_rows == len(simulated)
    assert tables["truth"].column("mcparticles").type == schema.arrow_schema("truth").field("mcparticles").type


def test_build_collection_refuses_wrong_columns() -> None:
    with pytest.raises(DataError, match="missing fields"):
        build_collection("tracker_hits", {"x": np.zeros(1)}, np.array([1]))
    fields = {name: np.zeros(2) for name in collection_fields("tracker_hits")}
    with pytest.raises(DataError, match="the counts say 3"):
        build_collection("tracker_hits", fields, np.array([1, 2]))
    with pytest.raises(DataError, match="no collection"):
        build_collection("muons", {}, np.array([0]))


def test_one_to_many_relations_build() -> None:
    fields = {name: np.arange(3) for name, dtype in collection_fields("tracks").items() if dtype is not None}
    fields["hits"] = (np.array([2, 0, 1]), np.array([5, 7, 9]))
    tracks = build_collection("tracks", fields, np.array([1, 2]))
    assert tracks.hits.tolist() == [[[5, 7]], [[], [9]]]
    assert str(ak.type(tracks.hits)) == "2 * var * var * int32"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**40), max_size=200))
def test_stable_order_is_a_stable_argsort(keys: list[int]) -> None:
    key = np.array(keys, dtype=np.int64)
    assert np.array_equal(stable_order(key), np.argsort(key, kind="stable"))
