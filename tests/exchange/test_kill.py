"""kill -9 during a copy: nothing half-registered, and the rerun copies only what had not arrived."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import awkward as ak

import giod
from giod.exchange import copy_dataset
from tests.exchange.conftest import commit, make_daq

# A copy that kills itself (SIGKILL: no cleanup, no finally) as it is about to fetch file number KILL_AT.
CHILD = textwrap.dedent("""
    import os, signal, sys
    import giod
    from giod.exchange import copy as exchange

    kill_at, calls = int(sys.argv[3]), [0]
    fetch = exchange._fetch

    def fetch_then_die(*args, **kwargs):
        calls[0] += 1
        if calls[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return fetch(*args, **kwargs)

    exchange._fetch = fetch_then_die
    exchange.copy_dataset(giod.open(sys.argv[1]), giod.open(sys.argv[2]), "raw")
""")


def test_kill_9_during_a_copy_then_resume(tmp_path: Path) -> None:
    daq = make_daq(tmp_path / "daq", databases=2)
    commit(daq, 2, seed=2)  # 4 databases of 5 files each (4 containers and the tag index)
    per_db = [len(db.containers) for db in daq.dataset("raw").databases()]
    assert per_db == [5, 5, 5, 5]
    reco = giod.open(tmp_path / "reco", create=True)
    kill_at = 13  # databases 1 and 2 registered, 2 files of database 3 published, then death
    proc = subprocess.run([sys.executable, "-c", CHILD, str(daq.root), str(reco.root), str(kill_at)],
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr

    # whole databases only: two registered, the third's files published but not a single row of it
    dbs = reco.dataset("raw").databases()
    assert [len(db.containers) for db in dbs] == [5, 5]
    registered = {c.path for db in dbs for c in db.containers}
    on_disk = {p.relative_to(reco.root / "data").as_posix() for p in (reco.root / "data").rglob("*.*")}
    assert len(on_disk - registered) == 2

    resumed = copy_dataset(daq, reco, "raw")
    assert resumed.since is not None  # the cursor had moved past the two registered databases
    assert (resumed.copied, resumed.already) == (2, 0)
    # the two files that had arrived are read and kept, not copied again
    assert (resumed.files_adopted, resumed.files_copied) == (2, 8)
    assert len(reco.dataset("raw").databases()) == 4
    assert ak.array_equal(reco.dataset("raw").read(), daq.dataset("raw").read())
    assert copy_dataset(daq, reco, "raw").copied == 0


# A copy killed between registering a database and moving the cursor past it.
CHILD_CURSOR = textwrap.dedent("""
    import os, signal, sys
    import giod
    from giod.exchange import copy_dataset

    dst = giod.open(sys.argv[2])
    advance, calls = dst.catalog.advance_exchange_cursor, [0]

    def advance_then_die(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return advance(*args, **kwargs)

    dst.catalog.advance_exchange_cursor = advance_then_die
    copy_dataset(giod.open(sys.argv[1]), dst, "raw")
""")


def test_kill_9_between_registration_and_cursor_lands_nothing_twice(tmp_path: Path) -> None:
    daq = make_daq(tmp_path / "daq", databases=3)
    reco = giod.open(tmp_path / "reco", create=True)
    proc = subprocess.run([sys.executable, "-c", CHILD_CURSOR, str(daq.root), str(reco.root)],
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert len(reco.dataset("raw").databases()) == 2  # the second registered, the cursor still at the first

    resumed = copy_dataset(daq, reco, "raw")
    assert (resumed.already, resumed.copied, resumed.files_copied) == (1, 1, 5)  # known by its key: no copy
    assert ak.array_equal(reco.dataset("raw").read(), daq.dataset("raw").read())
