"""The chunk-to-events conversion takes shortcuts past awkward and uproot; each gives what they give."""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import numpy as np
import pytest
import uproot

from giod.interchange import inspect_tree, iterate_events
from giod.interchange.nanoaod import _Columns
from giod.interchange.treelayout import _count_branch
from tests.interchange.conftest import write_tree


def _tree(tmp_path: Path) -> Path:
    """Collections with a relation, tags of several types and a fixed-size array, in chunks of unequal size."""
    rng = np.random.default_rng(7)
    n = 257
    counts = rng.integers(0, 5, n)
    jet_pt = ak.unflatten(rng.random(int(counts.sum())).astype(np.float32), counts)
    mu_counts = rng.integers(0, 3, n)
    return write_tree(
        tmp_path / "t.root",
        {
            "Events": {
                "Jet": ak.zip({"pt": jet_pt, "muonIdx": ak.values_astype(jet_pt * 4 - 1, np.int32)}),
                "Muon": ak.zip({"eta": ak.unflatten(rng.standard_normal(int(mu_counts.sum())), mu_counts)}),
                "run": rng.integers(1, 9, n).astype(np.uint32),
                "event": np.arange(n, dtype=np.uint64),
                "HLT_Flag": rng.random(n) < 0.3,
                "weight": rng.standard_normal(n).astype(np.float64),
            }
        },
    )


def test_events_equal_the_general_conversion(tmp_path: Path) -> None:
    """Every column built directly equals awkward's own conversion of uproot's arrays, type and bits."""
    path = _tree(tmp_path)
    layout = inspect_tree(path)
    chunks = list(iterate_events(path, layout, step_size=100))
    assert [len(c) for c in chunks] == [100, 100, 57]
    events = ak.concatenate(chunks)
    with uproot.open(path) as f:
        raw = f["Events"].arrays(library="ak")
    for tag in ("run", "event", "HLT_Flag", "weight"):
        expected = ak.from_numpy(np.asarray(raw[tag]), regulararray=True, highlevel=False)
        got = events[tag].layout
        assert isinstance(got, ak.contents.NumpyArray) and got.dtype == expected.dtype
        assert np.array_equal(np.asarray(got.data), np.asarray(expected.data))
    assert ak.array_equal(events.Jet.pt, raw.Jet_pt, dtype_exact=True)
    assert ak.array_equal(events.Muon.eta, raw.Muon_eta, dtype_exact=True)
    assert ak.array_equal(events.Jet.muonIdx, raw.Jet_muonIdx, dtype_exact=True)
    assert events.Jet.muon.layout.content.dtype == np.int32
    assert ak.all((events.Jet.muon == -1) | (events.Jet.muon < ak.num(events.Muon)))


def test_columns_by_name_as_awkward_finds_them() -> None:
    """A field longer than its record is cut to the record's length, as ``RecordArray.content`` does."""
    long = ak.contents.NumpyArray(np.arange(10, dtype=np.float32))
    exact = ak.contents.NumpyArray(np.arange(4, dtype=np.int64))
    record = ak.contents.RecordArray([long, exact], ["a", "b"], length=4)
    columns = _Columns(ak.Array(record))
    for key in ("a", "b"):
        got, expected = columns(key), record.content(key)
        assert got.length == expected.length == 4
        assert np.array_equal(np.asarray(got.data), np.asarray(expected.data))
    with pytest.raises(ak.errors.FieldNotFoundError, match="no field .c."):  # a missing branch: as awkward says it
        columns("c")


def test_counter_branch_as_uproot_finds_it(tmp_path: Path) -> None:
    path = _tree(tmp_path)
    with uproot.open(path) as f:
        branches = list(f["Events"].branches)
        found = [_count_branch(b) for b in branches]
        expected = [b.count_branch for b in branches]
    assert all(a is b for a, b in zip(found, expected, strict=True))
    assert {b.name for b in found if b is not None} == {"nJet", "nMuon"}
