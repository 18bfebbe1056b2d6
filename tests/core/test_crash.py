"""kill -9 of writers at random points: nothing partial is ever visible.

Writers are forked by a fork server (so each start costs milliseconds, not an
interpreter start-up; and from a process of one thread, never the test
process, whose other threads may hold a lock at the fork that the child would
wait for forever) and killed with SIGKILL at a random moment while they write
containers and commit. Afterwards every committed database must
read back bit-identical to what its writer meant to write, fsck must find no
damage, and gc must clear the orphans the kills left behind once the killed
writers' leases have expired.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import sys
import time

import awkward as ak
import pytest

import giod
from giod.store.consistency import fsck, gc
from giod.testing import synthetic

KILLS = 100
PRELOAD = ("giod", "sqlalchemy", "pyarrow", "awkward", "numpy", "urllib3", "yaml")


def _writer_child(target: str, ready, child: int) -> None:  # type: ignore[no-untyped-def]
    os.environ["GIOD_LEASE_SECONDS"] = "1"  # the killed writers' leases end soon after the kills
    fed = giod.open(target)
    ds = fed.dataset("crash")
    ready.send_bytes(b"r")
    k = 0
    while True:
        n = 20 + (k % 5) * 15
        seed = child * 10_000 + k
        with ds.writer(parameters={"seed": seed, "n": n}, cluster_events=16) as w:
            w.append(synthetic.events(n, seed=seed))
        ready.send_bytes(b"c")  # committed: a message per commit, read by the parent for some children
        k += 1


def _expected(db) -> ak.Array:
    return synthetic.events(db.parameters["n"], seed=db.parameters["seed"])


@pytest.mark.slow
def test_kill_minus_nine_during_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("GIOD_LEASE_SECONDS", "1")  # the killed writers' leases end soon after the kills
    target = str(tmp_path / "fed")
    fed = giod.open(target, create=True)
    fed.create_dataset("crash", synthetic.schema())
    fed.close()
    rng = random.Random(1234)
    warm = giod.open(tmp_path / "warm", create=True)  # a write here imports what every writer will need
    with warm.create_dataset("w", synthetic.schema()).writer(cluster_events=16) as w:
        w.append(synthetic.events(20, seed=1))
    warm.close()
    forks = multiprocessing.get_context("forkserver")
    # what this process has imported, imported once by the server: a writer's start costs a fork
    forks.set_forkserver_preload(sorted(m for m in sys.modules if m.split(".")[0] in PRELOAD) + [__name__])
    for child in range(KILLS):
        r, w = forks.Pipe(duplex=False)
        writer = forks.Process(target=_writer_child, args=(target, w, child), daemon=True)
        writer.start()
        w.close()
        assert r.poll(120) and r.recv_bytes() == b"r", "the writer did not start"
        if child % 10 == 0:  # every tenth writer commits once first: databases land however loaded the machine
            assert r.poll(120) and r.recv_bytes() == b"c", "the writer died before its first commit"
        time.sleep(rng.uniform(0.0, 0.25))  # the kill point, not a synchronisation
        writer.kill()  # SIGKILL
        writer.join()
        assert writer.exitcode == -9
        r.close()

    fed = giod.open(target)
    deadline = time.monotonic() + 60
    while fed.catalog.leases() and time.monotonic() < deadline:
        time.sleep(0.2)  # waiting for the catalog's clock to pass the last lease's expiry
    assert fed.catalog.leases() == []
    ds = fed.dataset("crash")
    dbs = ds.databases()
    assert len(dbs) > 0
    report = fsck(fed.store)
    assert not report.damaged, report.problems
    # entry ranges are contiguous and disjoint
    assert [d.first_entry for d in dbs] == [sum(x.n_events for x in dbs[:i]) for i in range(len(dbs))]
    # every committed database reads back bit-identical
    sample = dbs if len(dbs) <= 60 else random.Random(5).sample(dbs, 60)
    everything = ds.read(["hits", "jets", "ht"])
    for db in sample:
        arr = everything[db.first_entry:db.stop_entry]
        want = _expected(db)
        assert ak.to_list(arr.hits) == ak.to_list(want.hits)
        assert ak.to_list(arr.ht) == ak.to_list(want.ht)
        assert ak.to_list(arr.jets.tracks_index) == ak.to_list(want.jets.tracks)
    # a writer killed between publishing and registering, after the last commit, leaves complete files
    # that fsck cannot tell from a commit the catalog lost: gc removes them only when told to
    orphans = report.by_kind("orphan") + report.by_kind("lost")
    removed = gc(fed.store, grace_seconds=0, include_lost=True)
    assert len(removed) == len({(p.site, p.path) for p in orphans})
    assert fsck(fed.store).problems == []
    assert len(ds) == sum(d.n_events for d in dbs)
