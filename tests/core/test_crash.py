"""kill -9 of writers at random points: nothing partial is ever visible.

Writers are forked from the test process (so each start costs milliseconds,
not an interpreter start-up) and killed with SIGKILL at a random moment while
they write containers and commit. Afterwards every committed database must
read back bit-identical to what its writer meant to write, fsck must find no
damage, and gc must clear the orphans the kills left behind once the killed
writers' leases have expired.
"""

from __future__ import annotations

import os
import random
import signal
import time

import awkward as ak
import pytest

import giod
from giod.store.consistency import fsck, gc
from giod.testing import synthetic

KILLS = 100


def _writer_child(target: str, ready_fd: int, child: int) -> None:
    try:
        fed = giod.open(target)
        ds = fed.dataset("crash")
        os.write(ready_fd, b"r")
        k = 0
        while True:
            n = 20 + (k % 5) * 15
            seed = child * 10_000 + k
            with ds.writer(parameters={"seed": seed, "n": n}, cluster_events=16) as w:
                w.append(synthetic.events(n, seed=seed))
            os.write(ready_fd, b"c")  # committed: one byte per commit, read by the parent for some children
            k += 1
    finally:
        os._exit(0)


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
    for child in range(KILLS):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.close(r)
            _writer_child(target, w, child)
        os.close(w)
        assert os.read(r, 1) == b"r"
        if child % 10 == 0:  # every tenth writer commits once first: databases land however loaded the machine
            assert os.read(r, 1) == b"c", "the writer died before its first commit"
        time.sleep(rng.uniform(0.0, 0.25))  # the kill point, not a synchronisation
        os.close(r)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)

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
