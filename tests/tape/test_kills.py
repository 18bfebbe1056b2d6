"""Kill -9 during staging, eviction and migration to tape: nothing is lost, and recovery finishes the work.

Each child process works in a loop and prints a line after every step; the
test kills it with SIGKILL as soon as it has read a given line, so the kill
lands while the next step is under way, wherever that is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import awkward as ak
import pytest

import giod
from giod.storage.tape import LibrarySettings, TapeLibrary
from giod.tier import move_to_nearline
from tests.tape.conftest import expected_events

ROOT = Path(__file__).resolve().parents[2]


def _kill_after(script: str, lines: int) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, env=env,
                             text=True)
    assert child.stdout is not None
    seen = 0
    for _ in child.stdout:
        seen += 1
        if seen >= lines:
            break
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert seen >= lines, "the child ended before it was killed"


def _library(root: Path, n: int, **changes: object) -> TapeLibrary:
    lib = TapeLibrary(root, LibrarySettings(time_scale=0.0, drives=2, **changes))  # type: ignore[arg-type]
    for i in range(n):
        (lib.buffer / "d").mkdir(parents=True, exist_ok=True)
        (lib.buffer / f"d/f{i}").write_bytes(bytes([i]) * 200_000)
        lib.archive(f"d/f{i}")
        lib.evict(f"d/f{i}")
    return lib


@pytest.mark.parametrize("after", [1, 3, 7])
def test_a_kill_while_staging_and_evicting_loses_nothing(tmp_path, after):
    root = tmp_path / "lib"
    _library(root, 12, buffer_bytes=600_000)  # room for three files: staging evicts all the time
    _kill_after(f"""
        from giod.storage.tape import LibrarySettings, TapeLibrary
        lib = TapeLibrary({str(root)!r}, LibrarySettings(time_scale=0.0, drives=2, buffer_bytes=600_000))
        for round in range(100):
            for i in range(12):
                lib.wait([f"d/f{{i}}"])
                print(round, i, flush=True)
                if i % 3 == 0:
                    lib.evict(f"d/f{{(i + 5) % 12}}")
    """, after)
    lib = TapeLibrary(root, LibrarySettings(time_scale=0.0, drives=2, buffer_bytes=600_000))
    lib.recover()
    states = lib.files()
    assert sorted(states) == sorted(f"d/f{i}" for i in range(12))  # every file still known
    for i in range(12):
        assert (lib.tape / f"d/f{i}").read_bytes() == bytes([i]) * 200_000  # the tape copies are whole
        f = states[f"d/f{i}"]
        on_disk = (lib.buffer / f"d/f{i}").exists()
        assert on_disk == (f.state == "staged")  # no copy the state does not know, none it counts on missing
    lib.wait([f"d/f{i}" for i in range(12)][:3])
    assert all((lib.buffer / f"d/f{i}").read_bytes() == bytes([i]) * 200_000 for i in range(3))
    assert not [p for p in (lib.buffer / "d").iterdir() if ".tmp-" in p.name]


@pytest.mark.parametrize("after", [1, 6])
def test_a_kill_while_moving_to_tape_loses_nothing(fed, after):
    expected = fed["qcd"].read(["ht", "jets"])
    root = fed.root
    fed.close()
    _kill_after(f"""
        import giod
        from giod.tier import move_to_nearline
        fed = giod.open({str(root)!r})
        move_to_nearline(fed.store, "qcd", "archive", streams=1, on_database=lambda i: print(i, flush=True))
    """, after)
    fed = giod.open(root)
    TapeLibrary(*_site_args(fed)).recover()
    # every container keeps a good, registered copy that reads back as written
    states = fed.catalog.replica_states("qcd")
    assert all(any(r.state == "good" for r in reps) for reps in states.values())
    assert ak.to_list(fed["qcd"].read(["ht", "jets"])) == ak.to_list(expected)
    from giod.store.consistency import fsck

    report = fsck(fed.store)
    assert not [p for p in report.problems if p.kind in ("missing", "size", "checksum", "catalog")]
    move_to_nearline(fed.store, "qcd", "archive")  # run again: the move finishes
    assert all([r.site for r in reps] == ["archive"] for reps in fed.catalog.replica_states("qcd").values())
    assert ak.to_list(fed["qcd"].read(["ht", "jets"])) == ak.to_list(expected)
    assert len(expected) == len(expected_events())
    fed.close()


def _site_args(fed: giod.Federation) -> tuple[str, LibrarySettings]:
    from giod.storage.tape import parse_tape_url

    return parse_tape_url(fed.catalog.site("archive").url)


@pytest.mark.parametrize("after", [2, 5])
def test_a_kill_while_queueing_and_writing_to_tape_loses_nothing(tmp_path, after):
    root = tmp_path / "lib"
    _kill_after(f"""
        from giod.storage.site import open_site
        site = open_site("arch", "tape://{root}?time_scale=0&drives=2")
        for i in range(1000):
            pending = site.create(f"d/f{{i}}")  # a temporary name, renamed when published, then queued
            pending.write(bytes([i % 256]) * 200_000)
            pending.publish()
            if i % 3 == 2:
                site.library.flush()
            print(i, flush=True)
    """, after)
    lib = TapeLibrary(root, LibrarySettings(time_scale=0.0, drives=2))
    lib.recover()
    lib.flush()
    assert lib.queued() == {}  # every write planned and over
    known = lib.paths()
    assert len(known) >= after
    for path in known:  # each known file has a whole tape copy and comes back from it
        i = int(path.rsplit("f", 1)[1])
        lib.evict(path)
        lib.wait([path])
        assert (lib.buffer / path).read_bytes() == bytes([i % 256]) * 200_000
    published = [p.name for p in (lib.buffer / "d").iterdir() if ".tmp-" not in p.name]
    assert sorted(published) == sorted(p.split("/")[1] for p in known)  # no published file the library misses
