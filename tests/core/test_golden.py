"""A federation written by an older giod (Parquet containers) reads unchanged."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import awkward as ak
import numpy as np
import pytest

import giod.distributed
from giod.read.objects import unlink

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


def _hits_x(events: ak.Array) -> float:
    # a module-level function: Dask worker processes import it by name
    return float(ak.sum(ak.values_astype(events.hits.x, np.float64)))


def test_golden_in_dask_tasks(golden):
    expected = json.loads((DATA / "golden_parquet.json").read_text())
    sel = golden.dataset("golden").select()
    got = giod.distributed.map_selection(sel, _hits_x, columns=["hits"], scheduler="processes:2", partition_events=100)
    assert got == pytest.approx(expected["hits.x"], rel=1e-9)


def test_a_later_pass_adds_arrow_containers_to_old_databases(golden):
    ds = golden.dataset("golden")
    old = ds.read()
    stored = unlink(old, ds.schema)
    with ds.add_containers(program="reco", program_version="2", replace=True) as p:
        for db in ds.databases():
            p.write(db, stored[db.first_entry:db.stop_entry][["tracks", "jets"]])
    for db in ds.databases():
        formats = {c.name: c.format for c in db.containers}
        assert formats == {"raw.calo": "parquet", "raw.tracker": "parquet", "tag": "parquet", "reco": "arrow"}
    again = ds.read()
    assert again.jets.tracks.pt.to_list() == old.jets.tracks.pt.to_list()
    assert again.hits.x.to_list() == old.hits.x.to_list()


def test_golden_read_through_a_server(tmp_path: Path):
    from tests.server.conftest import serve

    expected = json.loads((DATA / "golden_parquet.json").read_text())
    shutil.copytree(DATA / "golden_parquet", tmp_path / "golden")
    for served in serve(tmp_path / "golden"):
        remote = served.remote()
        ds = remote.dataset("golden")
        assert _maker().expected(unlink(ds.read(), ds.schema)) == pytest.approx(expected, rel=1e-12)
        picked = ds.select("njets >= 4").read(["hits"])
        assert 0 < len(picked) < 300
        remote.close()
