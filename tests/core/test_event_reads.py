"""``ds.event(i)`` warm: an event of a cluster read before is gathered from the kept cluster, nothing decoded;
an event of a block built before is a view of it, bit for bit what the general path builds, and the catalog is
asked only for its version (a commit by another process seen by the next call that follows the catalog)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import awkward as ak
import numpy as np
import pyarrow as pa
import pytest
from sqlalchemy import event as sa_event
from sqlalchemy.pool import Pool

import giod
from giod.errors import NotFound
from giod.read import clusters
from giod.read.output import with_behaviour
from giod.read.projection import read_entry
from giod.storage.formats.arrow.reader import ArrowContainerReader
from giod.testing import synthetic


@pytest.fixture
def counted(monkeypatch):
    """Calls of the Arrow reader's batch decoding and block-level row reads, counted (they still run)."""
    counts = {"decode": 0, "read_rows": 0}

    def counting(name, real):
        def wrapper(self, *args, **kwargs):
            counts[name] += 1
            return real(self, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(ArrowContainerReader, "_decode", counting("decode", ArrowContainerReader._decode))
    monkeypatch.setattr(ArrowContainerReader, "read_rows", counting("read_rows", ArrowContainerReader.read_rows))
    clusters.forget()
    yield counts
    clusters.forget()


def test_warm_event_decodes_nothing(local_fed, model, counted):
    ds = local_fed.create_dataset("qcd", model)
    events = synthetic.events(400, seed=5)
    with ds.writer(database_events=200, cluster_events=200) as w:  # blocks 200..263, 264..327, 328..391, …
        w.append(events)

    def check(entry):
        ev = ds.event(entry)
        # fixed-size lists (tracks' covariance) are gathered from the kept cluster too
        np.testing.assert_array_equal(np.asarray(ev.tracks.cov.to_list(), dtype=np.float32).reshape(-1, 3),
                                      np.asarray(events.tracks.cov[entry].to_list(), dtype=np.float32).reshape(-1, 3))
        assert ev.jets.pt.to_list() == pytest.approx(events.jets.pt[entry].to_list())
        assert ev.hits.x.to_list() == pytest.approx(events.hits.x[entry].to_list())

    check(210)  # the first lookup into these clusters: its block's rows only, block by block, nothing kept
    assert counted["read_rows"] == len(model.containers)
    assert len(clusters._KEPT) == 0
    check(211)  # the same block: built before, nothing read
    assert counted["read_rows"] == len(model.containers)
    before = counted["decode"]
    check(300)  # another block of the same clusters: each decoded whole once, and kept
    cold = counted["decode"] - before
    assert cold >= len(model.containers)
    assert len(clusters._KEPT) == len(model.containers)
    decodes = []
    for entry in (301, 264, 390, 399):  # the same clusters: gathered from the kept ones
        before = counted["decode"]
        check(entry)
        decodes.append(counted["decode"] - before)
    assert decodes == [0, 0, 0, 0]
    assert counted["read_rows"] == len(model.containers)  # nor read any block by block again


def test_fixed_size_lists_gathered_across_clusters():
    """Rows of a fixed-size list column taken from two clusters, a sliced one among them, as Arrow's take."""
    items = pa.array(np.arange(30, dtype=np.float32))
    whole = pa.FixedSizeListArray.from_arrays(items, 3)
    a, b = pa.table({"c": whole.slice(2, 5)}), pa.table({"c": whole.slice(0, 4)})
    ka, kb = clusters._Cluster.of(a), clusters._Cluster.of(b)
    assert ka is not None and kb is not None
    got = clusters.gather([(ka, np.array([0, 4])), (kb, np.array([1]))])
    want = pa.concat_arrays([whole.slice(2, 5).take([0, 4]), whole.take([1])])
    assert got.column("c").combine_chunks().equals(want)


def test_event_is_four_momenta_only_with_all_four_fields(local_fed, model):
    """vector's behaviour comes with the collections read with pt, eta, phi and mass, not with pt alone."""
    ds = local_fed.create_dataset("qcd", model)
    events = synthetic.events(100, seed=6)
    with ds.writer(cluster_events=50) as w:
        w.append(events)
    entry = int(np.flatnonzero(ak.num(events.jets) > 0)[0])
    ev = ds.event(entry)
    jet = events.jets[entry][0]
    assert float(ev.jets[0].px) == pytest.approx(float(jet.pt * np.cos(jet.phi)), rel=1e-5)
    assert "Jet" in (ev.behavior or {})
    assert "Jet" not in (ds.event(entry, ["jets.pt"]).behavior or {})


def _same(got: ak.Record, want: ak.Record) -> None:
    """The same event bit for bit: form, every buffer's bytes, type, fields, behaviour."""
    packed = [ak.to_packed(r).layout.array for r in (got, want)]
    (f1, n1, b1), (f2, n2, b2) = (ak.to_buffers(p) for p in packed)
    assert (f1, n1) == (f2, n2)
    assert b1.keys() == b2.keys()
    for key in b1:
        assert np.asarray(b1[key]).tobytes() == np.asarray(b2[key]).tobytes(), key
    assert str(got.type) == str(want.type)
    assert sorted(got.behavior or {}, key=repr) == sorted(want.behavior or {}, key=repr)


def test_event_is_the_general_path_bit_for_bit(fed, model):
    """Every entry (block edges, database edges, clusters of unequal sizes across containers), every column
    choice, on every catalog: the view of a kept block is what the general path builds alone."""
    ds = fed.create_dataset("qcd", model)
    with ds.writer(database_events=150, cluster_events=40) as w:
        w.append(synthetic.events(330, seed=8))
    with ds.add_containers(replace=True, cluster_events=70) as p:  # new tags: another cluster size beside the first
        for db in ds.databases():
            p.write(db, synthetic.events(db.n_events, seed=db.id)[list(model.tags)], containers=["tag"])
    pinned = ds.pinned()
    for columns in (None, ["jets"], ["jets.pt", "tracks"], ["ht", "njets", "ntracks", "nhits"]):
        for entry in [*range(0, 330, 11), 63, 64, 149, 150, 329]:
            got = ds.event(entry, columns)
            _same(got, with_behaviour(read_entry(pinned.snapshot, entry, columns), ds.schema))
    ev = ds.event(5)
    np.testing.assert_array_equal(ak.to_numpy(ak.flatten(ev.jets.tracks.pt)),
                                  ak.to_numpy(ev.tracks.pt)[ak.to_numpy(ak.flatten(ev.jets.tracks_index))])
    # a copy of its own pickles as one event, not as its block
    assert len(pickle.dumps(ak.to_packed(ev))) < len(pickle.dumps(ak.to_packed(ds.read()[:2])))


def _statements(into: list[str]):
    """Every SQL statement the catalog connections opened from now on run (SQLite's trace), into ``into``."""

    def traced(dbapi_connection, _record):
        dbapi_connection.set_trace_callback(into.append)

    sa_event.listen(Pool, "connect", traced)
    return traced


WRITE_ONE = """
import sys
import giod
from giod.testing import synthetic
fed = giod.open(sys.argv[1])
with fed.dataset("qcd").writer() as w:
    w.append(synthetic.events(10, seed=77))
"""


def test_warm_event_asks_the_catalog_only_its_version_and_sees_another_process_commit(tmp_path: Path, model):
    fed0 = giod.open(tmp_path / "fed", create=True)
    with fed0.create_dataset("qcd", model).writer(database_events=100) as w:
        w.append(synthetic.events(200, seed=1))
    fed0.close()
    seen: list[str] = []
    listener = _statements(seen)
    try:
        fed = giod.open(tmp_path / "fed")  # every connection of its catalog traced
        ds, pinned = fed.dataset("qcd"), fed.dataset("qcd").pinned()
        for entry in (3, 150):  # cold: the database found, its block built
            ds.event(entry)
            pinned.event(entry)
        seen.clear()
        for entry in (3, 4, 150, 151, 3):
            ds.event(entry)
            pinned.event(entry)
        assert [s.strip().upper() for s in seen] == ["PRAGMA DATA_VERSION"] * 5  # one per unpinned call, nothing else
        proc = subprocess.run([sys.executable, "-c", WRITE_ONE, str(tmp_path / "fed")],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, capture_output=True)
        assert proc.returncode == 0, proc.stderr
        want = synthetic.events(10, seed=77)[4]
        got = ds.event(204)  # the next call that follows the catalog sees the other process's commit
        assert got.hits.x.to_list() == pytest.approx(want.hits.x.to_list())
        with pytest.raises(NotFound):  # the pinned dataset never moves
            pinned.event(204)
        assert len(pinned) == 200 and len(ds) == 210
        ds.event(3)  # its database found again at the new version (a pass may have changed it)
        seen.clear()
        ds.event(3)
        ds.event(205)
        assert [s.strip().upper() for s in seen] == ["PRAGMA DATA_VERSION"] * 2  # warm again at the new version
    finally:
        sa_event.remove(Pool, "connect", listener)


def test_an_entry_that_is_not_a_whole_number_or_no_columns_is_a_data_error(local_fed, model):
    from giod.errors import DataError

    ds = local_fed.create_dataset("event_inputs", model)
    with ds.writer() as w:
        w.append(synthetic.events(3, seed=1))
    for entry in ("1", 2.5, True, None):
        with pytest.raises(DataError):
            ds.event(entry)  # type: ignore[arg-type]
    for columns in ([], "hits"):
        with pytest.raises(DataError):
            ds.event(0, columns)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        ds.event(3)
    assert ds.event(np.int64(2)).to_list() == ds.event(2).to_list()
