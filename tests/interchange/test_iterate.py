"""iterate_events: values equal what uproot reads, relations in range, chunking invisible."""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import numpy as np
import pytest
import uproot

from giod.interchange import inspect_tree, iterate_events
from tests.interchange.conftest import RawTree, write_tree


def _expected_index(raw: ak.Array, target_counts: ak.Array) -> ak.Array:
    """Raw NanoAOD indices with out-of-range ones as -1, computed by awkward broadcasting."""
    return ak.where((raw >= 0) & (raw < target_counts), raw, -1)


def _same(a: ak.Array, b: ak.Array) -> bool:
    return bool(ak.array_equal(a, b, dtype_exact=False))


@pytest.mark.rootdata
def test_nanoaod_values_equal_uproot(ttbar_events: ak.Array, ttbar_raw: RawTree) -> None:
    events, raw = ttbar_events, ttbar_raw.arrays
    assert len(events) == ttbar_raw.num_entries
    assert _same(events.Jet.pt, raw.Jet_pt)
    assert _same(events.Muon.eta, raw.Muon_eta)
    assert _same(events.Electron.charge, raw.Electron_charge)
    assert _same(events.run, raw.run) and _same(events.event, raw.event)
    assert _same(events.MET_pt, raw.MET_pt)
    assert events.run.layout.dtype == np.uint32 and events.event.layout.dtype == np.uint64
    assert events.Jet.pt.layout.content.dtype == np.float32
    assert events.Jet.muon1.layout.content.dtype == np.int32

    pairs = [
        (events.Jet.muon1, raw.Jet_muonIdx1, raw.nMuon),
        (events.Muon.jet, raw.Muon_jetIdx, raw.nJet),
        (events.GenPart.genPartMother, raw.GenPart_genPartIdxMother, raw.nGenPart),
    ]
    for got, idx, n_target in pairs:
        assert _same(got, _expected_index(idx, n_target))
        assert ak.all((got == -1) | ((got >= 0) & (got < n_target)))
    assert ak.any(events.Jet.muon1 >= 0)  # the file does link jets to muons


@pytest.mark.rootdata
def test_flat_tree_values(hzz: Path) -> None:
    layout = inspect_tree(hzz)
    chunks = list(iterate_events(hzz, layout, step_size=1000))
    assert [len(c) for c in chunks] == [1000, 1000, 421]
    events = ak.concatenate(chunks)
    (whole,) = iterate_events(hzz, layout, step_size=10_000)
    assert ak.array_equal(whole, events)
    with uproot.open(hzz) as f:
        raw = f["events"].arrays(["NJet", "Jet_Px", "Muon_Charge", "MET_px", "triggerIsoMu24"])
    assert _same(ak.num(events.Jet), raw.NJet)
    assert ak.array_equal(events.Jet.Px, raw.Jet_Px)
    assert ak.array_equal(events.Muon.Charge, raw.Muon_Charge)
    assert ak.array_equal(events.MET_px, raw.MET_px)
    assert ak.array_equal(events.triggerIsoMu24, raw.triggerIsoMu24)


@pytest.mark.rootdata
def test_tag_only_tree_values(zmumu: Path) -> None:
    layout = inspect_tree(zmumu)
    events = ak.concatenate(list(iterate_events(zmumu, layout)))
    with uproot.open(zmumu) as f:
        raw = f["events"].arrays(["px1", "Q2", "M"])
    assert set(events.fields) == set(layout.schema_dict["tags"])
    for name in raw.fields:
        assert ak.array_equal(events[name], raw[name])


def test_out_of_range_indices_become_minus_one(tmp_path: Path) -> None:
    idx = ak.values_astype(ak.Array([[5, -3, 0], [1], []]), np.int32)
    path = write_tree(
        tmp_path / "t.root",
        {
            "Events": {
                "Jet": ak.zip({"pt": ak.Array([[1.0, 2.0, 3.0], [4.0], []]), "muonIdx": idx}),
                "Muon": ak.zip({"pt": ak.Array([[10.0], [20.0, 30.0], [40.0]])}),
            }
        },
    )
    layout = inspect_tree(path)
    (events,) = iterate_events(path, layout)
    assert events.Jet.muon.tolist() == [[-1, -1, 0], [1], []]


def test_rntuple_values(tmp_path: Path) -> None:
    events_in = ak.zip(
        {
            "Jet": ak.zip(
                {
                    "pt": ak.values_astype(ak.Array([[1.0, 2.0], [], [3.0]]), np.float32),
                    "muonIdx": ak.values_astype(ak.Array([[0, 5], [], [-1]]), np.int32),
                }
            ),
            "Muon": ak.zip({"pt": ak.Array([[1.0], [], [3.0, 4.0]])}),
            "w": ak.Array([[1.0], [2.0, 3.0], []]),
            "met": np.array([1.0, 2.0, 3.0], dtype=np.float32),
        },
        depth_limit=1,
    )
    path = tmp_path / "r.root"
    with uproot.recreate(path) as f:
        f.mkrntuple("Events", events_in)
    layout = inspect_tree(path)
    (events,) = iterate_events(path, layout)
    assert events.Jet.muon.tolist() == [[0, -1], [], [-1]]
    assert ak.array_equal(events.Jet.pt, events_in.Jet.pt)
    assert ak.array_equal(events.Muon.pt, events_in.Muon.pt)
    assert ak.array_equal(events.w.value, events_in.w)
    assert ak.array_equal(events.met, events_in.met)
