"""inspect_tree: what each branch of a ROOT tree becomes, and what bad input raises."""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import numpy as np
import pytest
import uproot

from giod.errors import (
    ConfigError,
    GiodError,
    IntegrityError,
    NotFound,
    SchemaError,
    StorageError,
)
from giod.interchange import TreeLayout, inspect_tree, iterate_events
from tests.interchange.conftest import RawTree, write_tree


def _branches(path: Path, tree: str) -> dict[str, str | None]:
    with uproot.open(path) as f:
        return {b.name: (b.count_branch.name if b.count_branch is not None else None) for b in f[tree].branches}


@pytest.mark.rootdata
def test_nanoaod_collections_relations_and_tags(ttbar_layout: TreeLayout, ttbar_raw: RawTree) -> None:
    layout = ttbar_layout
    assert layout.n_entries == ttbar_raw.num_entries
    assert layout.tree_name == "Events" and layout.kind == "TTree" and not layout.embedded
    schema = layout.schema
    for coll in ("Jet", "Muon", "Electron", "Photon", "Tau", "GenPart"):
        assert {"pt", "eta", "phi", "mass"} <= set(schema.collection_type(coll).fields), coll
    jet = schema.collection_type("Jet")
    assert {r: (d.target, d.many) for r, d in jet.relations.items() if r.startswith("muon")} == {
        "muon1": ("Muon", False),
        "muon2": ("Muon", False),
    }
    assert schema.collection_type("Electron").relations["genPart"].target == "GenPart"
    assert schema.collection_type("Muon").relations["jet"].target == "Jet"
    assert schema.collection_type("GenPart").relations["genPartMother"].target == "GenPart"
    assert schema.collection_type("Muon").relations["fsrPhoton"].target == "FsrPhoton"
    # a counted branch named like its collection becomes the field "value"
    assert set(schema.collection_type("LHEPdfWeight").fields) == {"value"}

    assert layout.mapping["Jet_pt"] == ("Jet", "pt")
    # an index branch is read twice: as the field it is (values as they are) and as the relation
    assert layout.mapping["Jet_muonIdx1"] == ("Jet", "muonIdx1")
    assert layout.collections["Jet"].members["muon1"].keys == ("Jet_muonIdx1",)
    assert jet.fields["muonIdx1"].dtype == "int32"
    assert layout.mapping["MET_pt"] == "MET_pt"
    assert schema.tags["run"].dtype == "uint32" and schema.tags["event"].dtype == "uint64"
    assert "luminosityBlock" in schema.tags
    counters = {c for c in ttbar_raw.counters.values() if c is not None}
    assert "nJet" in counters and not counters & set(schema.tags)
    # every branch is accounted for: read, counted, or skipped with a reason
    assert set(ttbar_raw.counters) == set(layout.mapping) | counters | set(layout.skipped)
    assert all(layout.skipped.values())


@pytest.mark.rootdata
def test_flat_tree_with_uppercase_counters(hzz: Path) -> None:
    layout = inspect_tree(hzz)
    assert layout.tree_name == "events"  # the file's only tree, whatever its name
    schema = layout.schema
    assert set(schema.collections) == {"Jet", "Muon", "Electron", "Photon"}
    assert set(schema.collection_type("Jet").fields) == {"Px", "Py", "Pz", "E", "btag", "ID"}
    assert schema.collection_type("Jet").fields["ID"].dtype == "bool"
    assert layout.mapping["Muon_Charge"] == ("Muon", "Charge")
    assert "NJet" not in schema.tags and schema.tags["MET_px"].dtype == "float32"
    branches = _branches(hzz, "events")
    counters = {c for c in branches.values() if c is not None}
    assert set(branches) == set(layout.mapping) | counters | set(layout.skipped)


@pytest.mark.rootdata
def test_tree_without_collections_gives_tags(zmumu: Path) -> None:
    layout = inspect_tree(zmumu)
    assert layout.schema_dict["types"] == {}
    tags = layout.schema_dict["tags"]
    assert tags["px1"] == "float64" and tags["Q1"] == "int32" and tags["Run"] == "int32"
    assert tags["Type"] == "string" and not layout.skipped  # a char* branch: one string per event
    assert set(_branches(zmumu, "events")) == set(tags)


def test_relation_naming_rules(tmp_path: Path) -> None:
    ints = lambda rows: ak.values_astype(ak.Array(rows), np.int32)
    path = write_tree(
        tmp_path / "t.root",
        {
            "Events": {
                "Hit": ak.zip({"e": ak.Array([[1.0, 2.0], [3.0]])}),
                "Track": ak.zip(
                    {
                        "pt": ak.Array([[1.5], [2.5]]),
                        "hitsIdx": ints([[1], [0]]),  # plural target: relation "hits" -> Hit
                        "hitIdx_seed": ints([[0], [0]]),  # giod's spelling: relation "seed" to Hit
                        "vertexIdx": ints([[0], [0]]),  # no Vertex collection: stays a plain field
                        "e": ints([[0], [0]]),
                    }
                ),
                "Jet": ak.zip({"pt": ak.Array([[1.0], []]), "hitIdxF": ak.Array([[1.0], []])}),
                "weights": np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32),  # fixed-size scalar
            }
        },
    )
    layout = inspect_tree(path)
    track = layout.schema.collection_type("Track")
    assert {n: r.target for n, r in track.relations.items()} == {"hits": "Hit", "seed": "Hit"}
    assert set(track.fields) == {"pt", "vertexIdx", "e", "hitsIdx", "hitIdx_seed"}
    assert layout.schema.collection_type("Jet").fields["hitIdxF"].dtype == "float64"  # not an index
    assert "fixed-size" in layout.skipped["weights"]


def test_rntuple(tmp_path: Path) -> None:
    events = ak.zip(
        {
            "Jet": ak.zip(
                {
                    "pt": ak.values_astype(ak.Array([[1.0, 2.0], [], [3.0]]), np.float32),
                    "muonIdx": ak.values_astype(ak.Array([[0, 5], [], [-1]]), np.int32),
                }
            ),
            "Muon": ak.zip({"pt": ak.Array([[1.0], [], [3.0, 4.0]])}),
            "met": np.array([1.0, 2.0, 3.0], dtype=np.float32),
        },
        depth_limit=1,
    )
    path = tmp_path / "r.root"
    with uproot.recreate(path) as f:
        f.mkrntuple("Events", events)
    layout = inspect_tree(path)
    assert layout.kind == "RNTuple" and layout.n_entries == 3
    assert layout.schema.collection_type("Jet").relations["muon"].target == "Muon"
    assert layout.mapping["Jet.pt"] == ("Jet", "pt") and layout.mapping["met"] == "met"


def test_tree_choice(tmp_path: Path) -> None:
    two = write_tree(tmp_path / "two.root", {"a": {"x": np.arange(3)}, "b": {"y": np.arange(4)}})
    with pytest.raises(ConfigError, match="several trees"):
        inspect_tree(two)
    assert inspect_tree(two, tree="b").n_entries == 4
    with pytest.raises(NotFound, match=r"no tree 'c' \(trees: a, b\)"):
        inspect_tree(two, tree="c")


def test_bad_input(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a ROOT file at all\n")
    no_tree = tmp_path / "histogram.root"
    with uproot.recreate(no_tree) as f:
        f["h"] = np.histogram(np.arange(10.0))
        f["note"] = "a string, no tree"
    whole = write_tree(tmp_path / "whole.root", {"Events": {"x": np.arange(10_000.0)}})
    truncated = tmp_path / "truncated.root"
    truncated.write_bytes(whole.read_bytes()[:300])  # the header survives, the directory does not

    cases = [
        (text, StorageError, "is not a ROOT file"),
        (tmp_path / "missing.root", NotFound, "no such file"),
        (no_tree, NotFound, "holds no TTree or RNTuple"),
        (truncated, IntegrityError, "truncated or corrupt"),
        (tmp_path, StorageError, "is a directory"),
    ]
    for path, error, message in cases:
        with pytest.raises(error, match=message) as info:
            inspect_tree(path)
        assert isinstance(info.value, GiodError)
        assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_colon_in_file_name_is_a_file_name(tmp_path: Path) -> None:
    path = write_tree(tmp_path / "run:1.root", {"Events": {"x": np.arange(5)}})
    assert inspect_tree(path).n_entries == 5


def test_truncated_data_is_an_integrity_error(tmp_path: Path) -> None:
    whole = write_tree(tmp_path / "whole.root", {"Events": {"x": np.arange(100_000.0)}})
    cut = tmp_path / "cut.root"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(IntegrityError, match="cut.root: it is truncated or corrupt"):
        layout = inspect_tree(cut)
        for _ in iterate_events(cut, layout):
            pass


@pytest.mark.rootdata
def test_tag_only_tree_schema(zmumu: Path) -> None:
    layout = inspect_tree(zmumu)
    try:
        schema = layout.schema
    except SchemaError as exc:  # the data-model layer asks for at least one type
        pytest.xfail(f"models without collections are refused: {exc}")
    assert set(schema.tags) == set(layout.schema_dict["tags"])
    assert not schema.collections
