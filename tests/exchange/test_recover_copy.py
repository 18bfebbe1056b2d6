"""``giod recover`` after a copy killed with SIGKILL, or refused: it never duplicates a copy, never registers an
incomplete database, and fsck reports no problem only once the data are right."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import awkward as ak
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.exchange import copy_dataset
from giod.store.consistency import fsck, recover
from tests.exchange.conftest import commit, make_daq
from tests.exchange.test_kill import CHILD


def _expire_leases(fed: giod.Federation) -> None:
    """What the passing of a lease's term does to the leases of a process that is gone."""
    assert fed.root is not None
    with sqlite3.connect(fed.root / "catalog.sqlite") as conn:
        conn.execute("UPDATE leases SET expires = 0")


def test_recover_after_a_killed_copy_duplicates_nothing(tmp_path: Path) -> None:
    daq = make_daq(tmp_path / "daq", databases=2)
    commit(daq, 2, seed=2)
    reco = giod.open(tmp_path / "reco", create=True)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(daq.root), str(reco.root), "13"],
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    _expire_leases(reco)  # the copy is gone for good: its lease ran out

    report = fsck(reco.store)
    debris = [p for p in report.problems if p.kind == "orphan"]
    assert len(debris) == 2 and all("interrupted copy" in p.detail for p in debris), report.problems
    assert not report.lost_commits  # the copy's files are not commits this catalog lost
    out = CliRunner().invoke(main, ["recover", "-f", str(reco.root)])
    assert out.exit_code == 0, out.output
    assert recover(giod.open(reco.root).store) == []
    assert len(reco.dataset("raw").databases()) == 2  # nothing registered from the debris

    resumed = copy_dataset(daq, giod.open(reco.root), "raw")
    assert (resumed.copied, resumed.files_adopted) == (2, 2)  # the copy adopts its own debris
    reco = giod.open(reco.root)
    assert ak.array_equal(reco.dataset("raw").read(), daq.dataset("raw").read())  # no event twice
    assert fsck(reco.store).problems == []


def test_gc_keeps_a_killed_copy_known_as_such_until_its_debris_is_gone(tmp_path: Path) -> None:
    from giod.store.consistency import gc

    daq = make_daq(tmp_path / "daq", databases=2)
    commit(daq, 2, seed=2)
    reco = giod.open(tmp_path / "reco", create=True)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(daq.root), str(reco.root), "13"],
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    _expire_leases(reco)
    assert gc(reco.store) == []  # the debris is younger than the grace: kept, and still known as the copy's
    assert recover(reco.store) == []
    assert len([p for p in fsck(reco.store).problems if "interrupted copy" in p.detail]) == 2
    assert len(gc(reco.store, grace_seconds=0)) == 2  # past the grace it goes, like any orphan
    assert fsck(reco.store).problems == []
    copy_dataset(daq, reco, "raw")
    assert ak.array_equal(reco.dataset("raw").read(), daq.dataset("raw").read())


def test_debris_of_a_refused_copy_never_becomes_a_database(tmp_path: Path) -> None:
    daq = make_daq(tmp_path / "daq", databases=2)
    assert daq.root is not None
    db = daq.dataset("raw").databases()[-1]
    tag = db.container("tag")
    assert tag is not None and db.containers[-1].name != "tag"
    damaged = daq.root / "data" / db.containers[-1].path
    damaged.write_bytes(b"\0" * damaged.stat().st_size)
    reco = giod.open(tmp_path / "reco", create=True)
    out = CliRunner().invoke(main, ["copy", "raw", "--from", str(daq.root), "--to", str(reco.root)])
    assert out.exit_code == 2 and "could not be copied" in out.output
    reco = giod.open(reco.root)
    _expire_leases(reco)
    assert recover(reco.store) == []
    assert fsck(reco.store).problems == []
    assert len(reco.dataset("raw").databases()) == 1
    assert len(reco.dataset("raw").select("njets >= 2").read()) > 0  # every selection still works
