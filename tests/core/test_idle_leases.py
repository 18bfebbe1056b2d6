"""A writer's last commit leaves its lease idle for the process's next writer (``IdleLeases``).

A writer per small commit (the DAQ pattern) then pays one catalog write transaction, the commit, instead of
two: the lease is taken once a process. Each writer still writes under a live lease from before its first
file until its files are registered; an idle lease covers registered files only, a writer that aborts
releases it, a stale one is never handed on, and closing the federation releases what is idle.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import awkward as ak
import pytest
from tests.conftest import fresh_postgres_schema

import giod
from giod.catalog.leases import IdleLeases
from giod.errors import DataError
from giod.store.consistency import fsck, gc
from giod.testing import synthetic


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def fed(request, tmp_path: Path):
    if request.param == "sqlite":
        f = giod.open(str(tmp_path / "fed"), create=True)
    else:
        f = giod.open(fresh_postgres_schema(request), create=True)
        f.add_site("local", str(tmp_path / "site"), 0)
    f.create_dataset("daq", synthetic.schema())
    yield f
    f.close()


def _folder(db) -> str:
    (folder,) = {c.path.rsplit("/", 1)[0] for c in db.containers}
    return folder


def _rows(fed) -> list[tuple]:
    """What the catalog holds of each database, but for its random folder, the commit's clock and the sizes
    (each footer records the version the writer saw, with its time)."""
    return [(db.first_entry, db.n_events, db.writer, db.program, db.idempotency_key, db.parents,
             sorted((c.name, c.cluster_entries, c.format) for c in db.containers), sorted(db.tag_stats.items()))
            for db in fed.dataset("daq").databases()]


def test_the_idle_path_writes_the_same_rows_and_events_as_a_lease_per_writer(fed, tmp_path, monkeypatch):
    chunks = [synthetic.events(n, seed=n) for n in (10, 3, 25, 1, 10)]

    def fill(f) -> None:
        for k, events in enumerate(chunks):
            with f.dataset("daq").writer(name="daq-1", idempotency_key=f"run-{k}") as w:
                w.append(events)

    fill(fed)
    (idle,) = fed.catalog.leases()
    with giod.open(str(tmp_path / "general"), create=True) as general, monkeypatch.context() as m:
        general.create_dataset("daq", synthetic.schema())
        m.setattr(IdleLeases, "LIMIT", 0)  # no lease kept idle: each writer takes and releases its own
        fill(general)
        assert general.catalog.leases() == []
        assert _rows(fed) == _rows(general)
        want = ak.concatenate(chunks)
        for f in (fed, general):
            assert ak.to_list(f.dataset("daq").read(["hits", "njets"])) == ak.to_list(want[["hits", "njets"]])
        assert not any(_folder(db).startswith(idle.prefix) for db in general.dataset("daq").databases())
    assert [x.id for x in fed.catalog.leases()] == [idle.id]
    dbs = fed.dataset("daq").databases()
    assert all(_folder(db).startswith(idle.prefix) for db in dbs)
    assert len({_folder(db) for db in dbs}) == len(chunks)
    assert fsck(fed.store).problems == []


def test_an_aborted_writer_releases_the_handed_lease_and_leaves_nothing_behind(fed):
    ds = fed.dataset("daq")
    with ds.writer() as w:
        w.append(synthetic.events(10, seed=1))
    (idle,) = fed.catalog.leases()
    w = ds.writer(database_events=10)
    w.append(synthetic.events(15, seed=2))  # one database committed under the handed lease, 5 events open
    assert [x.id for x in fed.catalog.leases()] == [idle.id]
    with pytest.raises(DataError):
        with w:
            w.append({"no_such_collection": [1]})
    assert fed.catalog.leases() == []  # released, not left idle: the prefix may hold what it left
    assert len(ds.databases()) == 2
    with ds.writer() as w2:  # a new lease on a new prefix
        w2.append(synthetic.events(10, seed=3))
    (fresh,) = fed.catalog.leases()
    assert fresh.id != idle.id and fresh.prefix != idle.prefix
    assert gc(fed.store, grace_seconds=0) == [] and fsck(fed.store).problems == []
    assert len(ds.databases()) == 3


def test_a_stale_idle_lease_is_released_and_a_new_one_taken(fed):
    ds = fed.dataset("daq")
    with ds.writer() as w:
        w.append(synthetic.events(10, seed=1))
    (idle,) = fed.catalog.leases()
    ((lease, _, _),) = next(iter(fed.store.idle_leases._idle.values()))
    lease.renewed -= lease.seconds / 3  # not renewed while idle: less than two thirds of a term ahead now
    with ds.writer() as w:
        w.append(synthetic.events(10, seed=2))
    (now,) = fed.catalog.leases()
    assert now.id != idle.id and now.prefix != idle.prefix
    assert len(ds.databases()) == 2


def test_a_writer_whose_last_database_was_cut_by_size_hands_its_lease_on(fed):
    ds = fed.dataset("daq")
    with ds.writer(database_events=10) as w:
        w.append(synthetic.events(20, seed=1))  # both databases committed inside append
    (idle,) = fed.catalog.leases()
    with ds.writer() as w:
        w.append(synthetic.events(10, seed=2))
    assert [x.id for x in fed.catalog.leases()] == [idle.id]
    folders = sorted(_folder(db) for db in ds.databases())
    assert folders == [f"{idle.prefix}{n:06x}" for n in range(3)]


def test_writers_in_threads_share_no_lease_at_once(fed):
    ds = fed.dataset("daq")
    errors: list[BaseException] = []

    def run(seed: int) -> None:
        try:
            for k in range(6):
                with ds.writer() as w:
                    w.append(synthetic.events(5, seed=seed * 100 + k))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    dbs = ds.databases()
    assert len(dbs) == 24 and len({_folder(db) for db in dbs}) == 24
    assert 1 <= len(fed.catalog.leases()) <= 4
    assert fsck(fed.store).problems == []
    fed.store.idle_leases.release_all()
    assert fed.catalog.leases() == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_does_not_use_its_parents_idle_lease(fed, tmp_path: Path):
    ds = fed.dataset("daq")
    with ds.writer() as w:
        w.append(synthetic.events(10, seed=1))
    (idle,) = fed.catalog.leases()
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            with ds.writer() as w:
                w.append(synthetic.events(10, seed=2))
            mine = [x for x in fed.catalog.leases() if x.id != idle.id]
            ok = len(mine) == 1 and not any(_folder(db).startswith(idle.prefix) for db in ds.databases()[1:])
            code = 0 if ok else 3
        finally:
            os.write(wfd, bytes([code]))
            os._exit(0)
    os.close(wfd)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    assert got == b"\x00"
    assert idle.id in {x.id for x in fed.catalog.leases()}  # the child left its parent's lease alone
    assert len(ds.databases()) == 2
