"""RNTuples as ROOT writes them: importer-style untagged collections and native record collections.

The fixtures in tests/data hold the first 20 events of the CMS NanoAOD TTree
(tests/data/make_rntuple_fixtures.py made them with ROOT). Imported, each
must give the schema the TTree gives, and every value uproot reads from the
fixture, bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pytest
import uproot
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod.interchange import TreeLayout, import_root, inspect_tree

FIXTURES = Path(__file__).resolve().parents[1] / "data"
IMPORTER = FIXTURES / "nanoaod_ttbar_importer.rntuple.root"
NATIVE = FIXTURES / "nanoaod_ttbar_native.rntuple.root"
N = 20


@pytest.fixture(scope="module", params=[pytest.param("importer", marks=pytest.mark.slow), "native"])
def imported(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, TreeLayout, Any]]:
    """One fixture imported into a real federation: (layout name, tree layout, events read back)."""
    import giod

    name = request.param
    path = IMPORTER if name == "importer" else NATIVE
    fed = giod.open(tmp_path_factory.mktemp(name) / "fed", create=True)
    report = import_root(fed, path, name)
    assert report.n_events == N and report.skipped == {}
    yield name, inspect_tree(path), fed.dataset(name).read()
    fed.close()


def _bits(values: Any) -> tuple[str, bytes]:
    arr = np.ascontiguousarray(ak.to_numpy(ak.flatten(values, axis=None)))
    return str(arr.dtype), arr.tobytes()


def _undocumented(value: Any) -> Any:
    """A schema dict without its docs (and collections' counters): what the structure alone says."""
    if isinstance(value, dict):
        if "type" in value and set(value) <= {"type", "doc", "counter"}:
            return value["type"]
        return {k: _undocumented(v) for k, v in value.items()}
    return value


@pytest.mark.rootdata
def test_same_collections_fields_and_relations_as_the_ttree(
    imported: tuple[str, TreeLayout, Any], ttbar_layout: TreeLayout
) -> None:
    name, layout, _ = imported
    # the TTree's branch titles are its documentation; the RNTuple fixtures carry no field descriptions
    tree, got = _undocumented(ttbar_layout.schema_dict), layout.schema_dict
    assert list(got["collections"]) == list(tree["collections"])
    assert "Jet" in got["collections"] and "Muon" in got["collections"]
    assert got["types"] == tree["types"]  # fields with their dtypes, relations with their targets
    assert got["types"]["Jet"]["relations"]["muon1"] == {"to": "Muon"}
    tags = got.get("tags", {})
    if name == "importer":  # every scalar of the tree; no counter, no projection of ROOT's
        assert tags == tree["tags"]
    else:  # the fixture keeps a few scalars
        assert set(tags) == {"run", "luminosityBlock", "event", "genWeight", "MET_pt", "MET_phi"}
        assert all(tree["tags"][t] == d for t, d in tags.items())
    assert not any(k.startswith(("nJet", "Jet_")) for k in layout.mapping)  # ROOT's aliases are not read twice


def test_every_value_bit_exact_against_uproot(imported: tuple[str, TreeLayout, Any]) -> None:
    name, layout, events = imported
    path = IMPORTER if name == "importer" else NATIVE
    with uproot.open(path) as f:
        raw = f["Events"].arrays()
    assert len(events) == len(raw) == N
    checked = 0
    for key, target in layout.mapping.items():
        values = raw[tuple(key.split("."))]
        if isinstance(target, str):  # a tag
            assert _bits(events[target]) == _bits(values), key
        else:
            coll, member = target
            assert ak.num(events[coll], axis=1).tolist() == ak.num(values, axis=1).tolist(), key
            plan = layout.collections[coll].members[member]
            if plan.target is None:
                assert _bits(events[coll][member]) == _bits(values), key
            else:  # relation: the stored index, -1 where it leaves the target collection
                n_target = ak.broadcast_arrays(ak.num(events[plan.target], axis=1), values)[0]
                want = ak.values_astype(ak.where((values >= 0) & (values < n_target), values, -1), np.int32)
                assert _bits(events[coll][f"{member}_index"]) == _bits(want), key
        checked += 1
    assert checked == len(layout.mapping) > 100


@pytest.mark.rootdata
def test_values_equal_the_ttree_events(imported: tuple[str, TreeLayout, Any], ttbar_events: ak.Array) -> None:
    _, layout, events = imported
    tree = ttbar_events[:N]
    for coll, plan in layout.collections.items():
        for member, m in plan.members.items():
            field = member if m.target is None else f"{member}_index"
            assert _bits(events[coll][field]) == _bits(tree[coll][member]), f"{coll}.{member}"
    for tag in layout.tags:
        assert _bits(events[tag]) == _bits(tree[tag]), tag


def test_unknown_untagged_collection_is_skipped_whole(tmp_path: Path) -> None:
    import giod
    from giod.cli import main

    events = ak.zip(
        {
            "_collection0": ak.zip(
                {
                    "Jet_pt": ak.Array([[1.0, 2.0], []]),
                    "Jet_eta": ak.Array([[0.5, 0.1], []]),
                    "Jet_hits": ak.Array([[[1, 2], [3]], []]),  # a list per jet: giod has no such field type
                },
                depth_limit=2,
            ),
            "_collection1": ak.zip({"Foo_a": ak.Array([[1.0], [2.0]]), "Bar_b": ak.Array([[3], [4]])}),
            "run": np.array([1, 2], dtype=np.uint32),
        },
        depth_limit=1,
    )
    path = tmp_path / "odd.root"
    with uproot.recreate(path) as f:
        f.mkrntuple("Events", events)
    layout = inspect_tree(path)
    assert list(layout.collections) == ["Jet"]
    assert set(layout.schema.collection_type("Jet").fields) == {"pt", "eta"}
    assert list(layout.skipped) == ["_collection0.Jet_hits", "_collection1"]
    assert "unsupported field type" in layout.skipped["_collection0.Jet_hits"]
    why = layout.skipped["_collection1"]
    assert "Foo_a, Bar_b" in why and "share no collection name" in why
    assert not any(k.startswith("_collection1") for k in layout.mapping)

    fed = tmp_path / "fed"
    r = CliRunner().invoke(main, ["import", str(path), "--dataset", "odd", "--create", "-f", str(fed)])
    assert r.exit_code == 0, r.output
    skipped = [ln for ln in r.output.splitlines() if "skipped _collection" in ln]
    assert len(skipped) == 2 and "Foo_a, Bar_b" in skipped[1] and "Jet_hits" in skipped[0]
    with giod.open(fed) as opened:
        read = opened.dataset("odd").read()
        assert read.Jet.pt.tolist() == [[1.0, 2.0], []] and set(ak.fields(read)) == {"Jet", "run"}


def test_nothing_readable_is_one_line_naming_the_fields(tmp_path: Path) -> None:
    from giod.cli import main
    from giod.errors import DataError

    events = ak.zip({"_collection0": ak.zip({"Foo_a": ak.Array([[1.0]]), "Bar_b": ak.Array([[3]])})}, depth_limit=1)
    path = tmp_path / "odd.root"
    with uproot.recreate(path) as f:
        f.mkrntuple("Events", events)
    with pytest.raises(DataError, match=r"no branch giod can read \(skipped _collection0: untagged collection"):
        inspect_tree(path)
    fed = tmp_path / "fed"
    r = CliRunner().invoke(main, ["import", str(path), "--dataset", "odd", "--create", "-f", str(fed)])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "_collection0" in lines[0], r.output


_DTYPES = ["bool", "int8", "uint8", "int16", "int32", "uint32", "int64", "float32", "float64"]


@st.composite
def _untagged_files(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]], list[np.ndarray]]:
    """Importer-style columns as uproot writes them: ``_collectionN`` of records ``X_f``, and scalars."""
    n_events = draw(st.integers(1, 6))
    names = draw(st.lists(st.sampled_from(["Jet", "Muon", "Tau", "SV", "LHEPart"]), min_size=1, max_size=3,
                          unique=True))
    columns: dict[str, Any] = {}
    want: dict[str, dict[str, np.ndarray]] = {}
    counts_of = []
    for i, coll in enumerate(names):
        counts = np.array(draw(st.lists(st.integers(0, 3), min_size=n_events, max_size=n_events)), dtype=np.int64)
        counts_of.append(counts)
        fields = draw(st.lists(st.sampled_from(["pt", "eta", "charge", "mass"]), min_size=1, max_size=3, unique=True))
        record = {}
        for f in fields:
            dtype = np.dtype(draw(st.sampled_from(_DTYPES)))
            size = int(counts.sum()) * dtype.itemsize
            raw = np.frombuffer(draw(st.binary(min_size=size, max_size=size)), dtype=np.uint8)
            # any bits, NaNs of every payload included
            flat = raw % 2 == 1 if dtype == np.bool_ else raw.view(dtype).copy()
            record[f"{coll}_{f}"] = ak.unflatten(flat, counts)
            want.setdefault(coll, {})[f] = flat
        columns[f"_collection{i}"] = ak.zip(record)
    columns["run"] = np.arange(n_events, dtype=np.uint32)
    return columns, want, counts_of


@settings(deadline=None, max_examples=60,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(_untagged_files())
def test_untagged_collections_round_trip_bit_exact(
    tmp_path: Path, case: tuple[dict[str, Any], dict[str, dict[str, np.ndarray]], list[np.ndarray]]
) -> None:
    from giod.interchange import iterate_events

    columns, want, counts_of = case
    path = tmp_path / "u.root"
    with uproot.recreate(path) as f:
        f.mkrntuple("Events", ak.zip(columns, depth_limit=1))
    layout = inspect_tree(path)
    assert layout.skipped == {} and list(layout.collections) == sorted(want) and list(layout.tags) == ["run"]
    events = ak.concatenate(list(iterate_events(path, layout)))
    for (coll, fields), counts in zip(want.items(), counts_of, strict=True):
        assert ak.num(events[coll], axis=1).tolist() == counts.tolist()
        for f, flat in fields.items():
            assert _bits(events[coll][f]) == (str(flat.dtype), flat.tobytes()), f"{coll}.{f}"


def test_unmarked_copies_of_an_untagged_collection_are_not_imported_twice(tmp_path: Path) -> None:
    # uproot writes no projections: ROOT's aliases come back as plain fields
    pt = ak.values_astype(ak.Array([[1.0, 2.0], [], [3.0]]), np.float32)
    events = ak.zip(
        {
            "Jet_pt": pt,
            "_collection0": ak.zip({"Jet_pt": pt, "Jet_eta": pt * 2}),
            "nJet": np.array([2, 0, 1], dtype=np.uint32),
            "Tau_pt": pt,  # no Tau collection: a list of its own
            "run": np.array([1, 1, 2], dtype=np.uint32),
        },
        depth_limit=1,
    )
    path = tmp_path / "copies.root"
    with uproot.recreate(path) as f:
        f.mkrntuple("Events", events)
    layout = inspect_tree(path)
    assert list(layout.collections) == ["Jet", "Tau_pt"] and list(layout.tags) == ["run"]
    assert layout.skipped == {
        "Jet_pt": "a copy of _collection0.Jet_pt",
        "nJet": "the number of Jet objects, which giod derives from the collection",
    }
    assert layout.mapping["_collection0.Jet_pt"] == ("Jet", "pt")
