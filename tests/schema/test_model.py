"""The model API and its Arrow layout, on the example of docs/schema.md."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import giod.schema
from giod.errors import NotFound, SchemaError
from giod.schema import (
    TAG_CONTAINER,
    CollectionDef,
    FieldDef,
    RelationDef,
    Schema,
    TypeDef,
    schema_from_arrow_metadata,
)
from giod.schema.arrow import CONTAINER_KEY, SCHEMA_KEY
from giod.schema.definitions import DTYPES, widens

EXAMPLE = """\
schema_version: 1
name: cms_like
description: "free text"
types:
  TrackerHit:
    description: "a silicon hit"
    fields:
      x: float32
      layer: uint8
      cov: float32[6]
      rot: float32[3][3]
      e: {type: float32, default: 0.0, aliases: [energy], doc: "deposited energy, GeV"}
  Track:
    fields: {pt: float32, eta: float32, phi: float32, charge: int8}
    relations:
      hits: {to: hits, many: true}
      seed: {to: hits}
collections:
  hits: TrackerHit
  tracks: {type: Track, doc: "reconstructed tracks"}
containers:
  raw.tracker: [hits]
  reco: [tracks]
tags:
  njets: int32
  ht: {type: float32, default: 0, doc: "scalar sum of jet pt"}
"""


@pytest.fixture
def schema() -> Schema:
    return Schema.from_yaml(EXAMPLE)


def item(t: pa.DataType) -> pa.Field:
    return pa.field("item", t, nullable=False)


def test_parts(schema: Schema) -> None:
    assert (schema.name, schema.description, schema.format_version) == ("cms_like", "free text", 1)
    hit = schema.types["TrackerHit"]
    assert list(hit.fields) == ["x", "layer", "cov", "rot", "e"]
    assert hit.fields["cov"] == FieldDef("cov", "float32", (6,))
    assert hit.fields["rot"].shape == (3, 3)
    assert hit.fields["e"] == FieldDef(
        "e", "float32", (), 0.0, ("energy",), "deposited energy, GeV"
    )
    assert schema.types["Track"].relations == {
        "hits": RelationDef("hits", "hits", True),
        "seed": RelationDef("seed", "hits", False),
    }
    assert schema.collections["tracks"] == CollectionDef(
        "tracks", "Track", "reco", "reconstructed tracks"
    )
    assert schema.tags["ht"].default == 0.0 and isinstance(schema.tags["ht"].default, float)
    assert schema.containers == {"raw.tracker": ("hits",), "reco": ("tracks",), TAG_CONTAINER: ()}


def test_lookups(schema: Schema) -> None:
    assert schema.collection_type("tracks") is schema.types["Track"]
    assert schema.container_of("hits") == "raw.tracker"
    with pytest.raises(NotFound, match="no collection 'jets'"):
        schema.container_of("jets")
    with pytest.raises(NotFound, match="no collection 'jets'"):
        schema.arrow_type("jets")
    with pytest.raises(NotFound, match="no container 'raw'"):
        schema.arrow_schema("raw")


def test_default_container() -> None:
    schema = Schema.from_yaml(
        "schema_version: 1\nname: m\ntypes: {Hit: {fields: {x: float32}}}\n"
        "collections: {b: Hit, a: Hit}\n"
    )
    assert schema.containers == {"events": ("a", "b")}
    assert schema.arrow_schema("events").names == ["a", "b"]
    with pytest.raises(NotFound):
        schema.arrow_schema(TAG_CONTAINER)


def test_arrow_types_follow_the_mapping(schema: Schema) -> None:
    hit = pa.struct(
        [
            pa.field("x", pa.float32(), nullable=False),
            pa.field("layer", pa.uint8(), nullable=False),
            pa.field("cov", pa.list_(item(pa.float32()), 6), nullable=False),
            pa.field("rot", pa.list_(item(pa.list_(item(pa.float32()), 3)), 3), nullable=False),
            pa.field("e", pa.float32(), nullable=False, metadata={"doc": "deposited energy, GeV"}),
        ]
    )
    track = pa.struct(
        [
            *(pa.field(n, pa.float32(), nullable=False) for n in ("pt", "eta", "phi")),
            pa.field("charge", pa.int8(), nullable=False),
            pa.field("hits", pa.list_(item(pa.int32())), nullable=False),
            pa.field("seed", pa.int32(), nullable=False),
        ]
    )
    for name, struct in (("hits", hit), ("tracks", track)):
        expected = pa.list_(item(struct))
        assert schema.arrow_type(name).equals(expected, check_metadata=True)
    reco = schema.arrow_schema("reco")
    assert reco.names == ["tracks"] and not reco.field("tracks").nullable
    assert reco.field("tracks").metadata == {b"doc": b"reconstructed tracks"}  # a collection's doc
    tags = schema.arrow_schema(TAG_CONTAINER)
    assert [(f.name, f.type, f.nullable) for f in tags] == [
        ("njets", pa.int32(), False),
        ("ht", pa.float32(), False),
    ]
    assert tags.field("ht").metadata == {b"doc": b"scalar sum of jet pt"}


def test_arrow_metadata_describes_the_model(schema: Schema) -> None:
    arrow_schema = schema.arrow_schema("raw.tracker")
    assert arrow_schema.metadata[SCHEMA_KEY] == schema.to_yaml().encode()
    assert arrow_schema.metadata[CONTAINER_KEY] == b"raw.tracker"
    assert schema_from_arrow_metadata(arrow_schema) == schema
    assert schema_from_arrow_metadata(pa.schema([("x", pa.int8())])) is None
    broken = pa.schema([("x", pa.int8())], metadata={SCHEMA_KEY: b"name: [unclosed\n"})
    with pytest.raises(SchemaError) as info:
        schema_from_arrow_metadata(broken)
    assert info.value.source == "<arrow metadata>"


def test_events_fit_the_arrow_layout(schema: Schema) -> None:
    events = [
        {
            "hits": [{"x": 1.5, "layer": 2, "cov": [0.0] * 6, "rot": [[1, 0, 0]] * 3, "e": 3.0}],
            "tracks": [{"pt": 1, "eta": 0, "phi": 0, "charge": 1, "hits": [0], "seed": -1}],
            "njets": 1,
            "ht": 2.0,
        }
    ]
    for container in schema.containers:
        table = pa.Table.from_pylist(events, schema=schema.arrow_schema(container))
        assert table.num_rows == 1
    hits = pa.Table.from_pylist(events, schema=schema.arrow_schema("raw.tracker"))
    assert hits.column("hits").to_pylist()[0][0]["rot"] == [[1.0, 0.0, 0.0]] * 3


def test_equality_and_fingerprint(schema: Schema) -> None:
    same = Schema.from_yaml(schema.to_yaml())
    assert same == schema and hash(same) == hash(schema)
    assert same.fingerprint == schema.fingerprint and len(schema.fingerprint) == 64
    reordered = Schema.from_yaml(
        EXAMPLE.replace("x: float32\n      layer: uint8", "layer: uint8\n      x: float32")
    )
    # Field order is the column order, so it is part of the model's identity.
    assert reordered != schema and reordered.fingerprint != schema.fingerprint
    # Whether types and collections are listed in another order does not matter.
    swapped = EXAMPLE.replace("  hits: TrackerHit\n", "").replace(
        '  tracks: {type: Track, doc: "reconstructed tracks"}\n',
        '  tracks: {type: Track, doc: "reconstructed tracks"}\n  hits: TrackerHit\n',
    )
    assert Schema.from_yaml(swapped) == schema
    assert schema != "cms_like"


def test_to_dict_is_canonical(schema: Schema) -> None:
    d = schema.to_dict()
    assert list(d) == [
        "schema_version",
        "name",
        "description",
        "types",
        "collections",
        "containers",
        "tags",
    ]
    assert list(d["types"]) == ["Track", "TrackerHit"]
    assert d["types"]["TrackerHit"]["fields"]["cov"] == "float32[6]"
    assert d["types"]["Track"]["relations"]["seed"] == {"to": "hits", "many": False}
    assert d["containers"] == {"raw.tracker": ["hits"], "reco": ["tracks"]}
    assert d["tags"]["ht"] == {"type": "float32", "default": 0.0, "doc": "scalar sum of jet pt"}


def test_from_yaml_reads_paths(tmp_path: Path, schema: Schema) -> None:
    path = tmp_path / "model.yaml"
    path.write_text(EXAMPLE)
    assert Schema.from_yaml(path) == schema
    assert Schema.from_yaml(str(path)) == schema
    assert Schema.from_text(EXAMPLE, source="example") == schema


def test_constructor_validates_its_parts(schema: Schema) -> None:
    bad = dict(schema.collections)
    bad["tracks"] = CollectionDef("tracks", "Trak", "reco")
    with pytest.raises(SchemaError, match="type 'Trak' is not defined"):
        Schema(name="cms_like", types=schema.types, collections=bad)
    types = {"Hit": TypeDef("Hit", {"x": FieldDef("x", "float32")}, {})}
    built = Schema(
        name="m", types=types, collections={"hits": CollectionDef("hits", "Hit", "events")}
    )
    assert built.containers == {"events": ("hits",)}


def test_fixed_array_defaults() -> None:
    schema = Schema.from_yaml(
        "schema_version: 1\nname: m\ntypes:\n  Hit:\n    fields:\n"
        "      a: {type: 'float32[2]', default: 1}\n"
        "      b: {type: 'int8[2][2]', default: [[1, 2], [3, 4]]}\n"
        "collections: {hits: Hit}\n"
    )
    fields = schema.types["Hit"].fields
    assert fields["a"].default == 1.0
    assert fields["b"].default == ((1, 2), (3, 4))
    assert Schema.from_yaml(schema.to_yaml()) == schema


def test_public_names_are_sorted_and_complete() -> None:
    names = giod.schema.__all__
    # isort order, as ruff keeps it: CONSTANTS, then Classes, then functions.
    assert names == sorted(names, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
    public = {n for n in vars(giod.schema) if not n.startswith("_")}
    modules = {"adapt", "arrow", "changes", "definitions", "evolution", "model", "parse", "precision", "yamlsource"}
    assert public - modules == set(names)


def exactly_representable(old: str, new: str) -> bool:
    """Brute-force oracle for the widening table: do the extreme values survive?"""
    if old == new or "bool" in (old, new):
        return False
    if old.startswith("float"):
        return np.dtype(new).itemsize > np.dtype(old).itemsize and new.startswith("float")
    info = np.iinfo(old)
    for value in (int(info.min), int(info.max)):
        if new.startswith("float"):
            if int(np.array(value, dtype=new).item()) != value:
                return False
        else:
            new_info = np.iinfo(new)
            if not int(new_info.min) <= value <= int(new_info.max):
                return False
    return True


@pytest.mark.parametrize("old,new", list(itertools.product(DTYPES, DTYPES)))
def test_widening_table(old: str, new: str) -> None:
    assert widens(old, new) == exactly_representable(old, new)


def test_widening_table_spot_checks() -> None:
    assert widens("int32", "float64") and not widens("int64", "float64")
    assert widens("uint16", "int32") and not widens("uint32", "int32")
    assert widens("int16", "float32") and not widens("int32", "float32")
    assert not widens("float64", "float32") and not widens("bool", "int8")
