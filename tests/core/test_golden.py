"""A federation written by an older giod (Parquet containers) reads unchanged."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import awkward as ak
import numpy as np
import pytest

import giod
from giod.objects import unlink

DATA = Path(__file__).resolve().parents[1] / "data"


def _maker():
    spec = importlib.util.spec_from_file_location("make_golden_parquet", DATA / "make_golden_parquet.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def golden(tmp_path: Path):
    # opening migrates the catalog: never the committed copy
    shutil.copytree(DATA / "golden_parquet", tmp_path / "golden")
    fed = giod.open(tmp_path / "golden")
    yield fed
    fed.close()


def test_golden_reads_as_written(golden):
    expected = json.loads((DATA / "golden_parquet.json").read_text())
    ds = golden.dataset("golden")
    assert len(ds.databases()) == 2
    events = ds.read()
    assert _maker().expected(unlink(events, ds.schema)) == pytest.approx(expected, rel=1e-12)
    # relations navigate on the old files
    assert float(ak.sum(ak.values_astype(events.jets.tracks.pt, np.float64))) == pytest.approx(
        expected["jets.tracks.pt"], rel=1e-12)


def test_golden_selections_and_events(golden):
    ds = golden.dataset("golden")
    full = ds.read(["jets.pt", "njets", "hits"])
    picked = ds.select("njets >= 4").read(["jets.pt", "njets", "hits"])
    mask = ak.to_numpy(full.njets) >= 4
    assert 0 < len(picked) < len(full)
    assert picked.jets.pt.to_list() == full.jets.pt[mask].to_list()
    assert picked.hits.x.to_list() == full.hits.x[mask].to_list()
    event = ds.event(250)
    assert event.hits.x.to_list() == full.hits.x[250].to_list()


def test_golden_containers_keep_their_format(golden):
    for db in golden.dataset("golden").databases():
        for c in db.containers:
            assert c.path.endswith(".parquet")
            assert getattr(c, "format", "parquet") == "parquet"
