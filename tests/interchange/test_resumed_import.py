"""kill -9 of an import in the middle, then the same command again: every event of the file once.

The import runs in a real subprocess; its progress callback tells the test,
through a pipe, that half of the file's databases are committed and the next
one is being written, then waits, so the kill lands at that point every time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.errors import ConflictError
from giod.interchange import import_root
from giod.store.consistency import fsck
from tests.conftest import fresh_postgres_schema
from tests.interchange.conftest import write_tree

N_EVENTS = 20_000
DATABASE_EVENTS = 2_000  # ten databases
KILL_AT = 11_000  # five databases committed, the sixth half written

CHILD = f"""
import os, sys
from giod.interchange import import_root
import giod

target, path, ready = sys.argv[1], sys.argv[2], int(sys.argv[3])
fed = giod.open(target)

def progress(done, total):
    if done >= {KILL_AT}:
        os.write(ready, b"k")
        sys.stdin.read()  # held here until killed

import_root(fed, path, "zjets", step_size=1000, progress=progress)
"""


@pytest.fixture(scope="module")
def tree_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(24)
    counts = rng.integers(0, 4, N_EVENTS).astype(np.int32)
    import awkward as ak

    jets = ak.unflatten(rng.normal(40, 10, int(counts.sum())).astype(np.float32), counts)
    return write_tree(tmp_path_factory.mktemp("root") / "zjets.root", {"Events": {
        "event": np.arange(N_EVENTS, dtype=np.int64), "run": np.full(N_EVENTS, 7, dtype=np.int32),
        "nJet": counts, "Jet_pt": jets,
    }})


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        url = str(tmp_path / "fed")
        giod.open(url, create=True).close()
    else:
        url = fresh_postgres_schema(request)
        with giod.open(url, create=True) as fed:
            fed.add_site("local", str(tmp_path / "site"), 0)
    return url


def _kill_mid_import(target: str, path: Path) -> None:
    read_end, write_end = os.pipe()
    env = {**os.environ, "GIOD_DATABASE_EVENTS": str(DATABASE_EVENTS)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, target, str(path), str(write_end)],
                             stdin=subprocess.PIPE, pass_fds=(write_end,), env=env)
    os.close(write_end)
    try:
        assert os.read(read_end, 1) == b"k", "the import ended before the kill point"
    finally:
        os.close(read_end)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL


def _events(target: str) -> np.ndarray:
    with giod.open(target) as fed:
        return np.sort(fed.dataset("zjets").read(["event"]).event.to_numpy())


@pytest.mark.slow  # an import killed in a child process, then run again
def test_a_killed_import_is_finished_exactly_by_the_same_command(target: str, tree_file: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _kill_mid_import(target, tree_file)
    partial = _events(target)
    assert 0 < len(partial) < N_EVENTS and len(partial) % DATABASE_EVENTS == 0
    with giod.open(target) as fed:
        incomplete = fsck(fed.store).by_kind("incomplete")
    assert len(incomplete) == 1 and f"{len(partial):,} of its {N_EVENTS:,} events" in incomplete[0].detail
    assert "zjets.root" in incomplete[0].detail and "giod import" in incomplete[0].detail

    runner = CliRunner()
    recovered = runner.invoke(main, ["recover", "-f", target])  # what fsck advises after a crash: no change here
    assert recovered.exit_code == 0, recovered.output
    monkeypatch.setenv("GIOD_DATABASE_EVENTS", str(DATABASE_EVENTS))
    again = runner.invoke(main, ["import", str(tree_file), "--dataset", "zjets", "-f", target])
    assert again.exit_code == 0, again.output
    assert f"imported {N_EVENTS - len(partial):,} events" in again.output
    assert f"{len(partial):,} of the file's {N_EVENTS:,} events were already in dataset zjets" in again.output

    assert np.array_equal(_events(target), np.arange(N_EVENTS))  # every event once, in any order
    with giod.open(target) as fed:
        assert len(fed.dataset("zjets")) == N_EVENTS
        assert fsck(fed.store).by_kind("incomplete") == []
        # the third time there is nothing left to import: refused as before
        with pytest.raises(ConflictError, match="already in dataset zjets: all of its events"):
            import_root(fed, tree_file, "zjets")


def test_an_append_is_not_taken_for_a_resume(tmp_path: Path, tree_file: Path) -> None:
    with giod.open(tmp_path / "fed", create=True) as fed:
        import_root(fed, tree_file, "zjets", step_size=5000)
        report = import_root(fed, tree_file, "zjets", step_size=5000, append=True)
        assert report.n_events == N_EVENTS and report.resumed == 0
        assert len(fed.dataset("zjets")) == 2 * N_EVENTS
        assert fsck(fed.store).by_kind("incomplete") == []
