"""coffea on giod: NanoAOD behaviours from a selection, compared with coffea on the original file."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import awkward as ak
import pytest

import giod
from giod.interchange import import_root

if os.environ.get("CI") == "true":
    import coffea  # noqa: F401 - under CI=true a missing coffea is a failure, not a skip
else:
    pytest.importorskip("coffea", reason="coffea is not installed (pip install 'giod[coffea]')")

import dask
from coffea.nanoevents import NanoEventsFactory

from giod.interchange import coffea as giod_coffea

pytestmark = [pytest.mark.rootdata, pytest.mark.filterwarnings("ignore")]

BEHAVIOURS = ["Muon.matched_jet.pt", "Jet.matched_muons.pt", "GenPart.parent.pdgId",
              "Jet.matched_gen.pt"]  # the last: Jet_genJetIdx points past nGenJet in 11 jets


def _path(events: Any, path: str) -> Any:
    for name in path.split("."):
        events = getattr(events, name)
    return events


def _same(a: Any, b: Any) -> bool:
    # coffea on the ROOT file keeps each branch's title and C++ type as parameters; the values are what count
    return ak.array_equal(a, b, equal_nan=True, check_parameters=False)


@pytest.fixture(scope="module")
def original(ttbar: Path) -> ak.Array:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return NanoEventsFactory.from_root({str(ttbar): "Events"}, mode="eager").events()


@pytest.fixture(scope="module")
def dataset(ttbar: Path, tmp_path_factory: pytest.TempPathFactory) -> giod.Dataset:
    fed = giod.open(str(tmp_path_factory.mktemp("coffea") / "fed"), create=True)
    import_root(fed, ttbar, "ttbar")
    return fed.dataset("ttbar")


@pytest.mark.parametrize("path", BEHAVIOURS)
def test_behaviours_match_coffea_on_the_file(dataset: giod.Dataset, original: ak.Array, path: str) -> None:
    events = giod_coffea.nanoevents(dataset.select(None))
    assert len(events) == len(original)
    assert _same(_path(events, path), _path(original, path))


def test_selection_and_projection(dataset: giod.Dataset, original: ak.Array) -> None:
    sel = dataset.select("nMuon >= 1 and count(Jet.pt > 30) >= 2")
    events = giod_coffea.nanoevents(sel)
    keep = (ak.num(original.Muon) >= 1) & (ak.sum(original.Jet.pt > 30, axis=1) >= 2)
    assert 0 < len(events) == int(ak.sum(keep)) < len(original)
    assert _same(events.Muon.matched_jet.pt, original[keep].Muon.matched_jet.pt)
    # NanoAOD's plain jagged weights stay plain: coffea's usual weight product works
    assert _same(events.LHEPdfWeight[:, 0] * events.genWeight,
                 original[keep].LHEPdfWeight[:, 0] * original[keep].genWeight)
    read = set(events.attrs["giod_reader"].read)
    # what those lines touched, and (for the counters of Muon and Jet) one column each: nothing else
    assert {"Muon.jetIdx", "Jet.pt", "LHEPdfWeight.value", "genWeight"} <= read
    assert len(read) <= 8 and not any(c.startswith(("Electron.", "Tau.", "FatJet.")) for c in read), read


def test_dask_keeps_behaviours_and_projection(dataset: giod.Dataset, original: ak.Array,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    events = giod_coffea.dask_nanoevents(dataset.select(None), partition_events=70)
    assert events.npartitions == 3
    seen: list[str] = []
    values = giod_coffea._Reader.values

    def spy(reader: Any, branch: Any) -> Any:
        seen.append(branch.column)
        return values(reader, branch)

    monkeypatch.setattr(giod_coffea._Reader, "values", spy)
    for path in BEHAVIOURS:
        seen.clear()
        (got,) = dask.compute(_path(events, path), scheduler="sync")
        assert _same(got, _path(original, path)), path
        assert len(set(seen)) <= 8 and not any(c.startswith("Electron.") for c in seen), (path, sorted(set(seen)))


def test_processor_runs_like_coffea_runner(dataset: giod.Dataset, original: ak.Array) -> None:
    from examples.coffea_nanoaod import MuonJetProcessor

    sel = dataset.select("nMuon >= 1")
    expected = MuonJetProcessor().process(original[ak.num(original.Muon) >= 1])
    eager = giod_coffea.run(MuonJetProcessor(), {"ttbar": sel}, partition_events=70)
    (lazy,) = dask.compute(giod_coffea.apply_to_selections(MuonJetProcessor(), {"ttbar": sel}, partition_events=70))
    for out in (eager, lazy["ttbar"]):
        assert {k: int(v) for k, v in out.items() if k != "matched_pt"} == \
            {k: int(v) for k, v in expected.items() if k != "matched_pt"}
        assert float(out["matched_pt"]) == pytest.approx(float(expected["matched_pt"]), rel=1e-6)


def test_example_runs(ttbar: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from examples.coffea_nanoaod import main

    out = main([str(ttbar), str(tmp_path / "fed")])
    assert int(out["run"]["events"]) == int(out["dask"]["events"]) > 0
    assert "muons" in capsys.readouterr().out


@pytest.mark.slow  # coffea's runner: minutes on two shared cores
def test_fileset_for_coffeas_runner(dataset: giod.Dataset, tmp_path: Path) -> None:
    from coffea.nanoevents import NanoAODSchema
    from coffea.processor import IterativeExecutor, Runner
    from examples.coffea_nanoaod import MuonJetProcessor

    sel = dataset.select("nMuon >= 1")
    fileset = giod_coffea.to_fileset({"ttbar": sel}, tmp_path, partition_events=70)
    assert len(fileset["ttbar"]["files"]) == 3 and set(fileset["ttbar"]["files"].values()) == {"Events"}
    out = Runner(IterativeExecutor(), schema=NanoAODSchema, chunksize=50)(fileset, MuonJetProcessor(),
                                                                          treename="Events")
    expected = giod_coffea.run(MuonJetProcessor(), {"ttbar": sel})
    assert {k: int(v) for k, v in out.items() if k != "matched_pt"} == \
        {k: int(v) for k, v in expected.items() if k != "matched_pt"}
    assert float(out["matched_pt"]) == pytest.approx(float(expected["matched_pt"]), rel=1e-6)
