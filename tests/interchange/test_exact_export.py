"""giod import X, then giod export --format root: every branch of X back, bit-exact, as uproot reads it.

Names, types (typename and dtype, counters included), the counter each
jagged branch names, the tree's name and every value are compared with
uproot's reading of the original file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pytest
import uproot
from click.testing import CliRunner

from giod.cli import main
from giod.interchange import RootNames, inspect_tree, iterate_events, root_names
from tests.interchange.conftest import HZZ, TTBAR, ZMUMU, open_data, write_tree

DATA = Path(__file__).resolve().parents[1] / "data"
RNTUPLES = ["nanoaod_ttbar_importer.rntuple.root", "nanoaod_ttbar_native.rntuple.root"]


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _import_export(tmp_path: Path, source: Path, dataset: str) -> Path:
    fed = str(tmp_path / "fed")
    out = tmp_path / f"{dataset}.root"
    _cli("import", str(source), "--dataset", dataset, "--create", "-f", fed)
    _cli("export", dataset, "--format", "root", "-o", str(out), "-f", fed)
    return out


def _trees(f: Any) -> dict[str, str]:
    return {k.rsplit(";", 1)[0]: v for k, v in f.classnames().items() if v in ("TTree", "ROOT::RNTuple")}


def _same(a: Any, b: Any) -> bool:
    """Equal values and types, NaN equal to NaN, integers compared bit for bit."""
    return str(a.type) == str(b.type) and ak.array_equal(a, b, equal_nan=True, dtype_exact=True)


@pytest.mark.rootdata
@pytest.mark.parametrize("name", [HZZ, ZMUMU, TTBAR])
def test_every_branch_comes_back_exactly(tmp_path: Path, name: str) -> None:
    source = open_data(name)
    out = _import_export(tmp_path, source, "x")
    with uproot.open(source) as fa, uproot.open(out) as fb:
        assert set(_trees(fb)) == set(_trees(fa))  # "events" stays "events", "Events" stays "Events"
        (tree,) = _trees(fa)
        a, b = fa[tree], fb[tree]
        assert a.num_entries == b.num_entries
        assert set(b.keys()) == set(a.keys())  # no branch lost, none added
        arrays_a, arrays_b = a.arrays(library="ak"), b.arrays(library="ak")
        differ = []
        for key in a.keys():
            ba, bb = a[key], b[key]
            counter = (ba.count_branch.name if ba.count_branch is not None else None,
                       bb.count_branch.name if bb.count_branch is not None else None)
            if ba.typename != bb.typename or counter[0] != counter[1] or \
                    not _same(arrays_a[key], arrays_b[key]):
                differ.append(f"{key}: {ba.typename} [{counter[0]}] vs {bb.typename} [{counter[1]}]")
        assert not differ, differ[:10]


def _rntuple_columns(path: Path) -> dict[str, ak.Array]:
    """What a TTree user sees of an RNTuple: top-level fields (projections included), and in ROOT's
    native layout ``nX`` and ``X_f`` per subfield of a collection of records ``X``, ``nX`` beside a
    vector of numbers ``X``."""
    with uproot.open(path) as f:
        nt = f["Events"]
        arrays = nt.arrays(library="ak")
    out: dict[str, ak.Array] = {}
    for field in arrays.fields:
        value = arrays[field]
        if field.startswith("_collection"):
            continue  # the importer's untagged groups: their projections nJet, Jet_pt, ... stand for them
        if value.ndim == 2 and ak.fields(value):
            out[f"n{field}"] = ak.num(value, axis=1)
            out.update({f"{field}_{sub}": value[sub] for sub in ak.fields(value)})
        else:
            out[field] = value
            # a vector of numbers of the native layout (LHEPdfWeight) is counted too; the importer's
            # projections (Jet_pt) are counted by the projected nJet
            if value.ndim == 2 and "_" not in field and f"n{field}" not in arrays.fields:
                out[f"n{field}"] = ak.num(value, axis=1)
    return out


@pytest.mark.slow  # the importer-style RNTuple takes half a minute to import
@pytest.mark.parametrize("name", RNTUPLES)
def test_rntuple_fixtures_come_back_as_ttree_branches(tmp_path: Path, name: str) -> None:
    source = DATA / name
    out = _import_export(tmp_path, source, "x")
    expected = _rntuple_columns(source)
    with uproot.open(out) as f:
        assert set(_trees(f)) == {"Events"}
        tree = f["Events"]
        assert set(tree.keys()) == set(expected)
        counters = {b.count_branch.name for b in tree.branches if b.count_branch is not None}
        got = tree.arrays(library="ak")
    # ROOT's importer declares nJet as RNTupleCardinality<std::uint32_t> (uproot reads it as int64);
    # the native layout has no counter field, and the export writes uproot's int32
    counter_type = np.uint32 if "importer" in name else np.int32
    differ = []
    for key, want in expected.items():
        have = got[key]
        if key in counters:
            ok = ak.array_equal(want, have, dtype_exact=False) and have.layout.dtype == counter_type
        else:
            ok = _same(want, have)
        if not ok:
            differ.append(f"{key}: {want.type} vs {have.type}")
    assert not differ, differ[:10]


def test_indices_past_their_target_keep_their_values(tmp_path: Path) -> None:
    """As in real NanoAOD, where Jet_genJetIdx may point past nGenJet (the GenJet collection is cut)."""
    idx = ak.values_astype(ak.Array([[0, 3, -1], [1]]), np.int16)
    path = write_tree(tmp_path / "cut.root", {"events": {
        "Jet": ak.zip({"pt": ak.Array([[50.0, 40.0, 30.0], [20.0]]), "genJetIdx": idx}),
        "GenJet": ak.zip({"pt": ak.Array([[49.0], [21.0, 19.0]])}),
    }})
    layout = inspect_tree(path)
    assert layout.names.tree == "events"
    events = ak.concatenate(list(iterate_events(path, layout)))
    assert events.Jet.genJetIdx.tolist() == [[0, 3, -1], [1]]  # int16 as in the file
    assert events.Jet.genJet.tolist() == [[0, -1, -1], [1]]  # the relation: 3 is no GenJet

    out = _import_export(tmp_path, path, "cut")
    with uproot.open(out) as f:
        assert list(_trees(f)) == ["events"]
        branch = f["events"]["Jet_genJetIdx"]
        assert branch.typename == "int16_t[]" and branch.array().tolist() == [[0, 3, -1], [1]]


def test_the_names_travel_with_the_export(tmp_path: Path) -> None:
    """An exported file carries the names, so that importing it and exporting again changes nothing."""
    counts = np.array([2, 0, 1], dtype=np.int32)
    path = tmp_path / "hzz-like.root"
    with uproot.recreate(path) as f:
        tree = f.mktree("events", {"NJet": np.int32, "Jet_E": "var * float32", "Weight": "var * float64",
                                   "Type": str},
                        counter_name=lambda b: "NJet" if b == "Jet_E" else "nWeight")
        tree.extend({"NJet": counts, "Jet_E": ak.Array([[1.0, 2.0], [], [3.0]]),
                     "Weight": ak.Array([[0.5], [], [0.25, 0.75]]), "Type": ["GG", "GT", "TT"]})
    first = _import_export(tmp_path / "one", path, "x")
    second = _import_export(tmp_path / "two", first, "x")
    for out in (first, second):
        with uproot.open(out) as f:
            assert list(_trees(f)) == ["events"]
            tree = f["events"]
            assert set(tree.keys()) == {"NJet", "Jet_E", "nWeight", "Weight", "Type"}
            assert tree["Jet_E"].count_branch.name == "NJet" and tree["NJet"].typename == "int32_t"
            assert tree["Weight"].array().tolist() == [[0.5], [], [0.25, 0.75]]  # plain, not Weight_value
            assert tree["Type"].array().tolist() == ["GG", "GT", "TT"]
    fed = __import__("giod").open(str(tmp_path / "two" / "fed"))
    names = root_names(fed.dataset("x"))
    assert names == RootNames("events", {"Jet": "NJet"}, {}, {"Weight.value": "Weight"})
