"""Writers' leases: gc and fsck never take the files of a live writer, whatever their age or the grace.

Writers run as real processes that stop at a chosen step (appended but not
flushed, or published but not registered) until the test lets them go on,
while ``giod gc --grace 0`` runs through the command line. A writer killed
with SIGKILL stops renewing its lease; once the lease has expired its
leftovers are reclaimed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import awkward as ak
import pytest
from tests.conftest import fresh_postgres_schema, giod_cli

import giod
from giod.store.consistency import fsck, gc
from giod.testing import synthetic

WRITER = textwrap.dedent("""
    import sys
    import giod
    from giod.testing import synthetic

    target, stop = sys.argv[1], sys.argv[2]
    fed = giod.open(target, create=False)
    if stop == "published":  # hold the writer between publishing its files and registering them
        real = fed.catalog.commit_database

        def held(commit, **kw):
            print("published", flush=True)
            sys.stdin.readline()
            return real(commit, **kw)

        fed.catalog.commit_database = held
    w = fed.dataset("daq").writer(cluster_events=8)
    w.append(synthetic.events(40, seed=11))
    print("appended", flush=True)
    if stop == "appended":
        sys.stdin.readline()
    w.commit()
    print("committed", flush=True)
""")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def target(request, tmp_path: Path) -> str:
    """A federation with an empty dataset ``daq``: a directory (SQLite), or PostgreSQL + a local site."""
    if request.param == "sqlite":
        url = str(tmp_path / "fed")
        fed = giod.open(url, create=True)
    else:
        url = fresh_postgres_schema(request)
        fed = giod.open(url, create=True)
        fed.add_site("local", str(tmp_path / "site"), 0)
    fed.create_dataset("daq", synthetic.schema())
    fed.close()
    return url


class _Writer:
    """A writer process that stops at ``stop`` until :meth:`go_on`."""

    def __init__(self, target: str, stop: str, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen([sys.executable, "-c", WRITER, target, stop], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})})

    def wait_for(self, word: str) -> None:
        line = self.proc.stdout.readline().strip()
        assert line == word, f"writer said {line!r}, stderr: {self.proc.stderr.read()}"

    def go_on(self) -> str:
        out, err = self.proc.communicate("\n", timeout=120)
        assert self.proc.returncode == 0, err
        return out

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=60)


def _files(target: str) -> list[Path]:
    fed = giod.open(target, create=False)
    try:
        return [Path(fed.site().local_path(i.path)) for i in fed.site().walk()]
    finally:
        fed.close()


def _age(paths: list[Path], seconds: float) -> None:
    """Date files back, as a writer slower than any grace would leave them."""
    when = time.time() - seconds
    for p in paths:
        os.utime(p, (when, when))


def _reads_back(target: str) -> None:
    fed = giod.open(target, create=False)
    try:
        ds = fed.dataset("daq")
        got = ds.read(["hits", "ht"])
        want = synthetic.events(40, seed=11)
        assert ak.to_list(got.hits) == ak.to_list(want.hits) and ak.to_list(got.ht) == ak.to_list(want.ht)
        report = fsck(fed.store)
        assert report.problems == [] and report.files_checked == len(ds.databases()[0].containers)
    finally:
        fed.close()


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["appended", "published"])
def test_gc_with_no_grace_spares_a_live_writer(target: str, stop: str):
    writer = _Writer(target, stop)
    writer.wait_for("appended")
    if stop == "published":
        writer.wait_for("published")
    files = _files(target)
    assert files and all(p.name.startswith(".") for p in files) == (stop == "appended")
    _age(files, 10 * 3600)

    r = giod_cli("gc", "--grace", "0", "-f", target)
    assert r.returncode == 0 and "0 orphan files removed" in r.stdout, r.stdout + r.stderr
    assert all(p.exists() for p in files)
    r = giod_cli("fsck", "--quick", "-f", target)
    assert f"{len(files)} files being written" in r.stdout and "orphan:" not in r.stdout, r.stdout
    assert r.returncode == 0, r.stdout + r.stderr

    assert "committed" in writer.go_on()
    _reads_back(target)


@pytest.mark.slow
def test_a_killed_writers_files_are_reclaimed_once_its_lease_expires(target: str):
    term = 2.0
    writer = _Writer(target, "appended", env={"GIOD_LEASE_SECONDS": str(term)})
    writer.wait_for("appended")
    writer.kill()
    files = _files(target)
    assert files

    fed = giod.open(target, create=False)
    try:
        (lease,) = fed.catalog.leases()
        assert all(lease.covers(p.path) for p in fsck(fed.store).by_kind("writing"))
        # a lease ends one term after its last renewal: wait for the catalog to say so
        deadline = time.monotonic() + 60 * term
        while fed.catalog.leases() and time.monotonic() < deadline:
            time.sleep(term / 4)
        assert fed.catalog.leases() == [] and [x.id for x in fed.catalog.leases(expired=True)] == [lease.id]
        assert {p.kind for p in fsck(fed.store).problems} == {"orphan"}
    finally:
        fed.close()
    r = giod_cli("gc", "--grace", "0", "-f", target)
    assert r.returncode == 0 and f"{len(files)} orphan files removed" in r.stdout, r.stdout + r.stderr
    assert not any(p.exists() for p in files)
    r = giod_cli("fsck", "-f", target)
    assert r.returncode == 0 and "0 problems" in r.stdout, r.stdout


def test_gc_spares_a_pass_until_it_commits(target: str):
    fed = giod.open(target, create=False)
    try:
        ds = fed.dataset("daq")
        events = synthetic.events(60, seed=4)
        raw = ["hits", "cells", "run", "event", "njets", "ntracks", "ht", "lead_pt"]
        with ds.writer(database_events=30) as w:
            w.append(events[raw])
        idle = fed.catalog.leases()  # the writer's, left idle for the next writer: its files are registered
        with ds.add_containers(program="reco") as p:
            for db in ds.databases():
                p.write(db, events[db.first_entry : db.stop_entry][["tracks", "jets"]])
            written = {s.path for out in p.outputs for s in out.containers}
            _age([Path(fed.site().local_path(x)) for x in written], 10 * 3600)
            assert {x.path for x in fsck(fed.store).by_kind("writing")} == written
            assert gc(fed.store, grace_seconds=0) == []
        assert len(idle) == 1 and fed.catalog.leases() == idle  # the pass's released
        got = ds.read(["jets"])
        assert ak.to_list(got.jets.pt) == ak.to_list(events.jets.pt)
        assert fsck(fed.store).problems == []
    finally:
        fed.close()


def test_a_writer_of_one_database_after_the_first_runs_one_write_transaction(tmp_path: Path) -> None:
    """The commit that registers the database: the lease is the one the process's last writer left idle
    (``IdleLeases``), so neither taking it nor releasing it costs a transaction, nor does a renewal."""
    from sqlalchemy import event

    fed = giod.open(str(tmp_path / "fed"), create=True)
    ds = fed.create_dataset("daq", synthetic.schema())
    with ds.writer() as w:  # the keeper thread started, the site known, a lease left idle
        w.append(synthetic.events(10, seed=1))
    (first,) = fed.catalog.leases()
    seen: list[str] = []

    def checkout(conn, _record, _proxy) -> None:
        conn.set_trace_callback(lambda sql: seen.append(sql.strip().upper()))

    event.listen(fed.catalog._engine, "checkout", checkout)
    try:
        for seed in range(5):
            with ds.writer() as w:
                w.append(synthetic.events(10, seed=seed))
    finally:
        event.remove(fed.catalog._engine, "checkout", checkout)
    assert sum(1 for sql in seen if sql == "BEGIN IMMEDIATE") == 5
    dbs = fed.dataset("daq").databases()
    assert len(dbs) == 6
    # one lease, idle now, whose prefix holds the six databases' folders, each its own
    assert [x.id for x in fed.catalog.leases()] == [first.id]
    folders = {c.path.rsplit("/", 1)[0] for db in dbs for c in db.containers}
    assert len(folders) == 6 and all(f.startswith(first.prefix) and len(f) == len(first.prefix) + 6
                                     for f in folders)
    assert fsck(fed.store).problems == []
    fed.close()  # releases the idle lease
    with giod.open(str(tmp_path / "fed"), create=False) as again:
        assert again.catalog.leases() == []
