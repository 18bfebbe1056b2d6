"""Hypothesis strategies for random valid data models and events that fit them.

Other test suites import these for storage round trips::

    from tests.schema.strategies import events_for, schemas

    @given(st.data())
    def test_roundtrip(data):
        schema = data.draw(schemas())
        events = data.draw(events_for(schema, 5))
        table = pa.Table.from_pylist(events, schema=schema.arrow_schema(container))

An event is a dict ``{collection: [object, ...], tag: value, ...}``; an
object is a dict ``{field: value, relation: index or [indices]}``. Relation
indices point into the target collection of the same event (-1 for "no
object" in a one-to-one relation). Float values are exactly representable in
their dtype and never NaN, so that values compare equal after a round trip.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from giod.schema import DTYPES, FieldDef, Schema

__all__ = ["events_for", "schemas", "value_for"]

_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True).filter(
    lambda n: not n.endswith("_index")
)
_TYPE_NAMES = st.from_regex(r"[A-Z][A-Za-z0-9]{0,7}", fullmatch=True)
_CONTAINER_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,5}(\.[a-z0-9_]{1,5})?", fullmatch=True).filter(
    lambda n: n != "tag"
)
_DOCS = st.text(
    st.characters(categories=("L", "N", "P", "Zs", "Sm", "Sc"), max_codepoint=0x3FF), max_size=20
)
_SHAPES = st.one_of(
    st.just(()),
    st.tuples(st.integers(1, 4)),
    st.tuples(st.integers(1, 3), st.integers(1, 3)),
)


def value_for(dtype: str) -> st.SearchStrategy[Any]:
    """Scalar values of ``dtype`` that survive Arrow and Parquet unchanged."""
    if dtype == "bool":
        return st.booleans()
    if dtype.startswith("float"):
        return st.floats(allow_nan=False, width=32 if dtype == "float32" else 64)
    info = np.iinfo(dtype)
    return st.integers(int(info.min), int(info.max))


def _array_of(strategy: st.SearchStrategy[Any], shape: tuple[int, ...]) -> st.SearchStrategy[Any]:
    for size in reversed(shape):
        strategy = st.lists(strategy, min_size=size, max_size=size)
    return strategy


@st.composite
def _field_spec(draw: st.DrawFn, *, scalar: bool) -> Any:
    dtype = draw(st.sampled_from(DTYPES))
    shape = () if scalar else draw(_SHAPES)
    type_text = dtype + "".join(f"[{n}]" for n in shape)
    if draw(st.booleans()):
        return type_text
    spec: dict[str, Any] = {"type": type_text}
    if draw(st.booleans()):
        spec["default"] = draw(value_for(dtype))
    if draw(st.booleans()):
        spec["doc"] = draw(_DOCS)
    return spec


@st.composite
def schemas(
    draw: st.DrawFn, max_types: int = 3, max_collections: int = 4, max_tags: int = 3
) -> Schema:
    """Random valid models: several types, relations between collections, containers, tags."""
    type_names = draw(st.lists(_TYPE_NAMES, min_size=1, max_size=max_types, unique=True))
    coll_names = draw(st.lists(_NAMES, min_size=1, max_size=max_collections, unique=True))
    tag_names = draw(
        st.lists(_NAMES.filter(lambda n: n not in coll_names), max_size=max_tags, unique=True)
    )
    types: dict[str, Any] = {}
    for type_name in type_names:
        members = draw(st.lists(_NAMES, min_size=1, max_size=6, unique=True))
        n_fields = draw(st.integers(0, len(members)))
        fields = {m: draw(_field_spec(scalar=False)) for m in members[:n_fields]}
        relations = {
            m: {"to": draw(st.sampled_from(coll_names)), "many": draw(st.booleans())}
            for m in members[n_fields:]
        }
        for name, spec in fields.items():
            alias = name + "_v0"
            if isinstance(spec, dict) and alias not in members and draw(st.booleans()):
                spec["aliases"] = [alias]
        body: dict[str, Any] = {"fields": fields}
        if relations:
            body["relations"] = relations
        if draw(st.booleans()):
            body["description"] = draw(_DOCS)
        types[type_name] = body
    collections: dict[str, Any] = {}
    for name in coll_names:
        type_name = draw(st.sampled_from(type_names))
        collections[name] = (
            {"type": type_name, "doc": draw(_DOCS)} if draw(st.booleans()) else type_name
        )
    model: dict[str, Any] = {"schema_version": 1, "name": "random_model", "types": types}
    model["collections"] = collections
    if draw(st.booleans()):
        container_names = draw(st.lists(_CONTAINER_NAMES, min_size=1, max_size=3, unique=True))
        containers: dict[str, list[str]] = {}
        for name in coll_names:
            containers.setdefault(draw(st.sampled_from(container_names)), []).append(name)
        model["containers"] = containers
    if tag_names:
        model["tags"] = {name: draw(_field_spec(scalar=True)) for name in tag_names}
    if draw(st.booleans()):
        model["description"] = draw(_DOCS)
    return Schema.from_dict(model)


def _field_values(field: FieldDef) -> st.SearchStrategy[Any]:
    return _array_of(value_for(field.dtype), field.shape)


@st.composite
def _event(draw: st.DrawFn, schema: Schema, max_objects: int) -> dict[str, Any]:
    sizes = {name: draw(st.integers(0, max_objects)) for name in schema.collections}
    event: dict[str, Any] = {}
    for name in schema.collections:
        type_def = schema.collection_type(name)
        objects = []
        for _ in range(sizes[name]):
            obj = {f.name: draw(_field_values(f)) for f in type_def.fields.values()}
            for rel in type_def.relations.values():
                size = sizes[rel.target]
                if rel.many:
                    index = st.integers(0, size - 1) if size else st.nothing()
                    obj[rel.name] = draw(st.lists(index, max_size=3 if size else 0))
                else:
                    obj[rel.name] = draw(st.integers(-1, size - 1))
            objects.append(obj)
        event[name] = objects
    for tag in schema.tags.values():
        event[tag.name] = draw(value_for(tag.dtype))
    return event


def events_for(
    schema: Schema, n_events: int, max_objects: int = 4
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Lists of exactly ``n_events`` events valid for ``schema``."""
    event = _event(schema, max_objects)
    return st.lists(event, min_size=n_events, max_size=n_events)
