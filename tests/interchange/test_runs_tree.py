"""A NanoAOD file's other trees: ``Runs`` lands in the linked dataset ``<name>.Runs``; the rest are named.

The file is made from the shared CMS ttbar file's events (a few branches) with
the ``Runs`` and ``LuminosityBlocks`` trees a NanoAOD file carries beside them.
"""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import numpy as np
import pytest
import uproot
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.interchange import linked_trees

pytestmark = pytest.mark.rootdata


@pytest.fixture(scope="module")
def nano(ttbar: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    with uproot.open(ttbar) as f:
        ev = f["Events"].arrays(["run", "luminosityBlock", "event", "genWeight", "Jet_pt", "Jet_eta"])
    path = tmp_path_factory.mktemp("nano") / "nano.root"
    weights = np.asarray(ev.genWeight, dtype=np.float64)
    scale = ak.Array([[0.9, 1.0, 1.1]])
    jets = ak.zip({"pt": ev.Jet_pt, "eta": ev.Jet_eta})
    with uproot.recreate(path) as out:
        out.mktree("Events", {"run": "uint32", "luminosityBlock": "uint32", "event": "uint64",
                              "genWeight": "float32", "Jet": jets.type.content})
        out["Events"].extend({"run": ev.run, "luminosityBlock": ev.luminosityBlock, "event": ev.event,
                              "genWeight": ev.genWeight, "Jet": jets})
        out.mktree("Runs", {"run": "uint32", "genEventCount": "int64", "genEventSumw": "float64",
                            "genEventSumw2": "float64", "LHEScaleSumw": scale.type.content})
        out["Runs"].extend({"run": np.array([1], np.uint32), "genEventCount": np.array([len(ev)]),
                            "genEventSumw": np.array([weights.sum()]),
                            "genEventSumw2": np.array([(weights**2).sum()]), "LHEScaleSumw": scale})
        out.mktree("LuminosityBlocks", {"run": "uint32", "luminosityBlock": "uint32"})
        out["LuminosityBlocks"].extend({"run": np.array([1], np.uint32), "luminosityBlock": np.array([1], np.uint32)})
    return path


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_runs_tree_is_imported_and_the_others_named(nano: Path, tmp_path: Path) -> None:
    fed_path = str(tmp_path / "fed")
    out = _cli("import", str(nano), "--dataset", "ttbar", "--create", "-f", fed_path)
    assert "tree Runs: 1 entry into dataset ttbar.Runs" in out, out
    assert "tree LuminosityBlocks: not imported" in out and "--tree LuminosityBlocks" in out, out
    fed = giod.open(fed_path)
    with uproot.open(nano) as f:
        expected = float(f["Runs"]["genEventSumw"].array(library="np").sum())
        genweight = float(np.sum(f["Events"]["genWeight"].array(library="np"), dtype=np.float64))
    # the documented one-liner that normalises MC
    sumw = ak.sum(fed.dataset("ttbar.Runs").read(["genEventSumw"]).genEventSumw)
    assert sumw == expected == pytest.approx(genweight)
    assert len(fed.dataset("ttbar").read(["genWeight"])) == 200

    # a second import of the same file is refused as before, and the Runs dataset is untouched
    result = CliRunner().invoke(main, ["import", str(nano), "--dataset", "ttbar", "-f", fed_path])
    assert result.exit_code == 2 and "already in dataset ttbar" in result.output
    assert len(fed.dataset("ttbar.Runs").read(["run"])) == 1


def test_export_writes_the_runs_tree_back(nano: Path, tmp_path: Path) -> None:
    fed_path = str(tmp_path / "fed")
    back = tmp_path / "back.root"
    _cli("import", str(nano), "--dataset", "ttbar", "--create", "-f", fed_path)
    _cli("export", "ttbar", "--format", "root", "-o", str(back), "--where", "run > 0", "-f", fed_path)
    with uproot.open(nano) as fa, uproot.open(back) as fb:
        assert "Runs" in fb and fb["Runs"].num_entries == 1
        assert set(fb["Runs"].keys()) == set(fa["Runs"].keys())
        for key in fa["Runs"].keys():
            a, b = fa["Runs"][key].array(), fb["Runs"][key].array()
            assert str(a.type) == str(b.type) and ak.array_equal(a, b), key
        assert fb["Events"].num_entries == 200
    # a skim that keeps no event still carries the sums of every generated one
    none = tmp_path / "none.root"
    _cli("export", "ttbar", "--format", "root", "-o", str(none), "--where", "run > 4000000000", "-f", fed_path)
    with uproot.open(none) as fn:
        assert fn["Events"].num_entries == 0 and fn["Runs"].num_entries == 1
    with giod.open(fed_path) as fed:  # what the export followed: the link in the events' provenance
        linked = linked_trees(fed.dataset("ttbar").select("run > 0"))
        assert list(linked) == ["Runs"] and linked["Runs"].dataset.name == "ttbar.Runs"
