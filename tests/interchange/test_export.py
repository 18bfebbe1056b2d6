"""write_root / write_parquet: round trips through uproot and pyarrow, and refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import uproot
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from giod.errors import DataError, SchemaError, StorageError
from giod.interchange import TreeLayout, inspect_tree, iterate_events, write_parquet, write_root
from giod.interchange.export import encode
from giod.schema import Schema, schema_from_arrow_metadata
from tests.schema.strategies import events_for, schemas

TAGS = ["run", "luminosityBlock", "event", "MET_pt"]
FIELDS = {"pt", "eta", "phi", "mass", "charge", "pdgId", "jetId"}


def _read_back(path: Path) -> tuple[TreeLayout, ak.Array]:
    layout = inspect_tree(path)
    chunks = list(iterate_events(path, layout))
    return layout, (ak.concatenate(chunks) if chunks else ak.Array([]))


def _closed_subset(schema_dict: dict[str, Any], roots: list[str]) -> dict[str, Any]:
    """Part of an imported NanoAOD schema: ``roots`` and every collection they link to,
    with all their relations but only a few fields (uproot's mktree slows down with
    the square of the number of branches)."""
    types = schema_dict["types"]
    keep: set[str] = set()
    todo = list(roots)
    while todo:
        coll = todo.pop()
        if coll not in keep:
            keep.add(coll)
            todo.extend(r["to"] for r in types[coll].get("relations", {}).values())
    small = {
        c: {**types[c], "fields": {f: d for f, d in types[c]["fields"].items() if f in FIELDS or "Idx" in f}}
        for c in sorted(keep)
    }
    return {
        "schema_version": 1,
        "name": "events",  # what inspect_tree calls a tree named Events
        "types": small,
        "collections": {c: c for c in sorted(keep)},
        "tags": {t: schema_dict["tags"][t] for t in TAGS},
    }


@pytest.fixture(scope="module")
def ttbar_subset(ttbar_layout: TreeLayout, ttbar_events: ak.Array) -> tuple[Schema, ak.Array]:
    schema = Schema.from_dict(_closed_subset(ttbar_layout.schema_dict, ["Jet", "Muon"]))
    columns = {}
    for coll in schema.collections:
        tdef = schema.collection_type(coll)
        columns[coll] = ttbar_events[coll, [*tdef.fields, *tdef.relations]]
    events = ak.zip({**columns, **{t: ttbar_events[t] for t in TAGS}}, depth_limit=1)
    return schema, events


@pytest.mark.rootdata
def test_nanoaod_round_trip(tmp_path: Path, ttbar_subset: tuple[Schema, ak.Array]) -> None:
    schema, events = ttbar_subset
    assert any(schema.collection_type(c).relations for c in schema.collections)
    path = tmp_path / "subset.root"
    write_root(path, [events[:120], events[120:]], schema)

    layout, back = _read_back(path)
    assert layout.embedded and layout.schema == schema
    assert ak.array_equal(back, events, equal_nan=True, check_parameters=False)
    assert back.Jet.layout.content.parameter("__record__") == "Jet"  # records named by type

    # plain NanoAOD for anyone with uproot: counters, X_field, X_targetIdxN
    with uproot.open(path) as f:
        tree = f["Events"]
        assert tree.num_entries == len(events)
        assert ak.array_equal(tree["nJet"].array(), ak.num(events.Jet), dtype_exact=False)
        assert ak.array_equal(tree["Jet_pt"].array(), events.Jet.pt)
        assert ak.array_equal(tree["Jet_muonIdx1"].array(), events.Jet.muon1)
        assert ak.array_equal(tree["Muon_jetIdx"].array(), events.Muon.jet)


@pytest.mark.rootdata
def test_nanoaod_round_trip_by_branch_names_alone(tmp_path: Path, ttbar_subset: tuple[Schema, ak.Array]) -> None:
    schema, events = ttbar_subset
    path = tmp_path / "plain.root"
    write_root(path, events, schema, embed_schema=False)
    with uproot.open(path) as f:
        assert "giod_schema" not in f
    layout, back = _read_back(path)
    assert not layout.embedded
    assert layout.schema == schema
    assert ak.array_equal(back, events, equal_nan=True, check_parameters=False)


@pytest.mark.rootdata
def test_flat_tree_round_trips(tmp_path: Path, hzz: Path) -> None:
    layout = inspect_tree(hzz)
    chunks = list(iterate_events(hzz, layout, step_size=700))
    events = ak.concatenate(chunks)
    for embed in (True, False):
        path = tmp_path / f"hzz-{embed}.root"
        write_root(path, iter(chunks), layout.schema, embed_schema=embed)
        again, back = _read_back(path)
        assert again.embedded is embed
        assert again.schema == layout.schema
        assert ak.array_equal(back, events)

    parquet = tmp_path / "hzz.parquet"
    write_parquet(parquet, iter(chunks), layout)
    table = pq.read_table(parquet)
    assert table.num_rows == len(events)
    assert ak.array_equal(ak.from_arrow(table), events, check_parameters=False)


@pytest.mark.rootdata
def test_parquet_is_plain_arrow(tmp_path: Path, ttbar_subset: tuple[Schema, ak.Array]) -> None:
    schema, events = ttbar_subset
    path = tmp_path / "subset.parquet"
    write_parquet(path, [events[:50], events[50:]], schema)
    pfile = pq.ParquetFile(path)
    assert pfile.metadata.num_row_groups == 2
    table = pfile.read()
    assert table.column_names == [*schema.collections, *schema.tags]
    for name in schema.collections:
        assert table.schema.field(name).type == schema.arrow_type(name)
    assert not any(isinstance(f.type, pa.ExtensionType) for f in table.schema)
    assert schema_from_arrow_metadata(table.schema) == schema
    assert ak.array_equal(ak.from_arrow(table), events, equal_nan=True, check_parameters=False)


def _as_awkward(events: list[dict[str, Any]], schema: Schema) -> ak.Array:
    fields = [pa.field(c, schema.arrow_type(c), nullable=False) for c in schema.collections]
    fields += [pa.field(t, pa.from_numpy_dtype(np.dtype(f.dtype)), nullable=False) for t, f in schema.tags.items()]
    return ak.from_arrow(pa.Table.from_pylist(events, schema=pa.schema(fields)))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_models_round_trip(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    schema = data.draw(schemas())
    try:
        encode(schema)
    except SchemaError:  # random names that would share a branch, e.g. tag "na" and counter of "a"
        assume(False)
    events = data.draw(events_for(schema, data.draw(st.integers(1, 4))))
    array = _as_awkward(events, schema)
    tmp = tmp_path_factory.mktemp("random")

    write_root(tmp / "e.root", array, schema)
    layout, back = _read_back(tmp / "e.root")
    assert layout.schema == schema
    assert back.tolist() == events

    write_parquet(tmp / "e.parquet", array, schema)
    assert ak.from_arrow(pq.read_table(tmp / "e.parquet")).tolist() == events


def _small_schema() -> Schema:
    return Schema.from_dict(
        {
            "schema_version": 1,
            "name": "small",
            "types": {
                "Hit": {"fields": {"e": "float32", "pos": "float32[3]"}},
                "Track": {
                    "fields": {"pt": "float32"},
                    "relations": {"hits": {"to": "hits", "many": True}, "seed": {"to": "hits"}},
                },
            },
            "collections": {"hits": "Hit", "tracks": "Track"},
            "tags": {"ntracks": "int32"},
        }
    )


def _small_events() -> ak.Array:
    return ak.Array(
        [
            {
                "hits": [{"e": 1.0, "pos": [1, 2, 3]}, {"e": 2.0, "pos": [4, 5, 6]}],
                "tracks": [{"pt": 5.0, "hits": [1, 0], "seed": 1}, {"pt": 6.0, "hits": [], "seed": -1}],
                "ntracks": 2,
            },
            {"hits": [], "tracks": [], "ntracks": 0},
        ]
    )


def test_one_to_many_and_fixed_arrays_encoding(tmp_path: Path) -> None:
    schema, events = _small_schema(), _small_events()
    path = tmp_path / "small.root"
    write_root(path, events, schema)
    with uproot.open(path) as f:
        tree = f["Events"]
        assert tree["hits_pos_2"].array().tolist() == [[3, 6], []]
        assert tree["tracks_hits_n"].array().tolist() == [[2, 0], []]
        assert tree["tracks_hits_idx"].array().tolist() == [[1, 0], []]
        assert tree["tracks_hitsIdx_seed"].array().tolist() == [[1, -1], []]
        # the tag ntracks keeps its name; the counter of tracks moves aside
        assert tree["ntracks"].array().tolist() == [2, 0]
        assert tree["ntracks_"].array().tolist() == [2, 0]
    layout, back = _read_back(path)
    assert layout.mapping["tracks_hits_idx"] == ("tracks", "hits")
    assert back.tolist() == events.tolist()

    # by branch names alone: the one-to-one relation survives; the rest is plain columns
    write_root(path, events, schema, embed_schema=False)
    layout, back = _read_back(path)
    tracks = layout.schema.collection_type("tracks")
    assert {n: r.target for n, r in tracks.relations.items()} == {"seed": "hits"}
    assert set(tracks.fields) == {"pt", "hits_n", "hitsIdx_seed"}  # the indices as written, beside the relation
    assert set(layout.schema.collection_type("hits").fields) == {"e", "pos_0", "pos_1", "pos_2"}
    assert back.tracks_hits.idx.tolist() == [[1, 0], []]
    assert back.ntracks.tolist() == [2, 0]


def test_nothing_to_write_gives_empty_files(tmp_path: Path) -> None:
    schema = _small_schema()
    write_root(tmp_path / "empty.root", [], schema)
    layout, back = _read_back(tmp_path / "empty.root")
    assert layout.n_entries == 0 and layout.schema == schema and len(back) == 0
    write_parquet(tmp_path / "empty.parquet", [], schema)
    table = pq.read_table(tmp_path / "empty.parquet")
    assert table.num_rows == 0 and table.column_names == ["hits", "tracks", "ntracks"]


def test_refusals_leave_no_file(tmp_path: Path) -> None:
    schema, events = _small_schema(), _small_events()
    no_tag = events[["hits", "tracks"]]
    float_tag = ak.with_field(events, np.array([2.5, 0.0]), "ntracks")
    cases = [
        (no_tag, DataError, "no tag 'ntracks'"),
        (float_tag, DataError, "float64 values cannot be stored as int32"),
    ]
    for bad, error, message in cases:
        for write, name in ((write_root, "bad.root"), (write_parquet, "bad.parquet")):
            with pytest.raises(error, match=message):
                write(tmp_path / name, [events, bad], schema)
            assert list(tmp_path.iterdir()) == []  # neither the file nor a temporary

    with pytest.raises(StorageError, match="does not exist"):
        write_root(tmp_path / "no" / "such" / "dir.root", events, schema)
    with pytest.raises(SchemaError, match="expected a Schema"):
        write_root(tmp_path / "x.root", events, "not a schema")


def test_models_whose_branches_would_collide_are_refused(tmp_path: Path) -> None:
    schema = Schema.from_dict(
        {
            "schema_version": 1,
            "name": "clash",
            "types": {
                "Muon": {"fields": {"pt": "float32"}},
                # a float field cannot hold the indices (an integer field of that name would)
                "Jet": {"fields": {"muonIdx1": "float32"}, "relations": {"muon1": {"to": "Muon"}}},
            },
            "collections": {"Muon": "Muon", "Jet": "Jet"},
        }
    )
    clash = "'Jet_muonIdx1' would hold both Jet.muonIdx1 and Jet.muon1"
    with pytest.raises(SchemaError, match=clash):
        write_root(tmp_path / "clash.root", [], schema)
    assert not (tmp_path / "clash.root").exists()
