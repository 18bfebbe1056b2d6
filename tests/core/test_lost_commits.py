"""Commits the catalog lost (its SQLite WAL deleted): fsck says so, gc keeps their files, recover restores them.

The last commit is made by a process killed right after it, so that its
transaction lives only in the WAL (no checkpoint ran); the WAL is then
deleted while nothing runs, as a careless clean-up would.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import awkward as ak
import pytest
from tests.conftest import giod_cli

import giod
from giod.federation import CATALOG_FILE
from giod.read import tagindex
from giod.read.tagindex import Directory
from giod.store.consistency import fsck, gc
from giod.testing import synthetic

RAW = ["hits", "cells", "run", "event", "njets", "ntracks", "ht", "lead_pt"]

@pytest.fixture(autouse=True)
def _small_databases_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Databases of 20-30 events are less than a block of the tag index, which would leave them without one
    (``tagindex.worth_writing``): blocks of 8 positions give each its index, a file these tests follow."""
    monkeypatch.setattr(tagindex, "BLOCK", 8)


LAST_COMMITS = textwrap.dedent("""
    import os, signal, sys
    import giod
    from giod.read import tagindex
    tagindex.BLOCK = 8  # databases of 20-30 events: an index each, whose files these tests follow
    from giod.testing import synthetic

    RAW = %r
    fed = giod.open(sys.argv[1], create=False)
    ds = fed.dataset("daq")
    with ds.writer(program="daq", parameters={"run": 2}, idempotency_key="run2") as w:
        w.append(synthetic.events(30, seed=2)[RAW])
    events = synthetic.events(30, seed=2)
    with ds.add_containers(program="reco", parameters={"pass": 1}) as p:  # a pass over both databases
        first, second = ds.databases()
        p.write(first, synthetic.events(20, seed=1)[["tracks", "jets"]])
        p.write(second, events[["tracks", "jets"]])
    os.kill(os.getpid(), signal.SIGKILL)  # no clean close: nothing checkpoints the WAL
""" % (RAW,))  # noqa: UP031 - the script's own braces stay as written


@pytest.mark.slow
def test_files_of_commits_lost_with_the_wal_are_reported_kept_and_registered_again(tmp_path: Path):
    target = tmp_path / "fed"
    fed = giod.open(target, create=True)
    ds = fed.create_dataset("daq", synthetic.schema())
    with ds.writer() as w:
        w.append(synthetic.events(20, seed=1)[RAW])
    fed.close()  # the last connection closed: checkpointed, the WAL is gone
    assert not (target / f"{CATALOG_FILE}-wal").exists()

    r = subprocess.run([sys.executable, "-c", LAST_COMMITS, str(target)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == -9, r.stderr
    wal = target / f"{CATALOG_FILE}-wal"
    assert wal.stat().st_size > 0
    wal.unlink()
    (target / f"{CATALOG_FILE}-shm").unlink(missing_ok=True)

    fed = giod.open(target, create=False)
    assert len(fed.dataset("daq")) == 20  # the last commits are gone from the catalog
    assert [c.name for c in fed.dataset("daq").databases()[0].containers] == ["raw.calo", "raw.tracker", "tag",
                                                                             "tag-index"]
    report = fsck(fed.store)
    lost = report.by_kind("lost")
    assert len(lost) == 4 + 2 and report.lost_commits and not report.by_kind("orphan")
    lost_files = [Path(fed.site(p.site).local_path(p.path)) for p in lost]
    fed.close()

    r = giod_cli("fsck", "-f", str(target))
    assert r.returncode == 1 and "6 files of lost commits" in r.stdout and "giod recover" in r.stdout, r.stdout
    r = giod_cli("gc", "--grace", "0", "-f", str(target))
    assert r.returncode == 0 and "0 orphan files removed" in r.stdout and "kept 6 files" in r.stderr, r.stdout
    assert all(f.exists() for f in lost_files)
    r = giod_cli("recover", "--dry-run", "-f", str(target))
    assert r.returncode == 0 and "0 databases registered again, 0 passes" in r.stdout, r.stdout
    assert r.stdout.count("would register") == 1 and r.stdout.count("would add the containers") == 2

    r = giod_cli("recover", "-f", str(target))
    assert r.returncode == 0 and "1 databases registered again, 2 passes added again" in r.stdout, r.stdout + r.stderr
    fed = giod.open(target, create=False)
    try:
        ds = fed.dataset("daq")
        first, second = ds.databases()
        assert (second.first_entry, second.n_events) == (20, 30)
        assert (second.program, second.parameters, second.idempotency_key) == ("daq", {"run": 2}, "run2:0")
        reco = second.container("reco")
        assert reco is not None and (reco.program, reco.parameters) == ("reco", {"pass": 1})
        assert first.container("reco") is not None
        got = ds.read(["hits", "ht", "jets"])
        want = ak.concatenate([synthetic.events(20, seed=1), synthetic.events(30, seed=2)])
        assert ak.to_list(got.hits) == ak.to_list(want.hits) and ak.to_list(got.ht) == ak.to_list(want.ht)
        assert ak.to_list(got.jets.pt) == ak.to_list(want.jets.pt)
        # tag statistics come back too: selections prune with them
        assert len(ds.select("ht > -1")) == 50
        # and so does the tag index, which still names the tag container it indexes
        index = fed.store.read_container(second.container("tag-index"), lambda r: Directory.of(r.arrow_schema))
        tag = second.container("tag")
        assert index is not None and (index.tag, index.checksum, index.events) == (tag.path, tag.checksum, 30)
        assert fsck(fed.store).problems == []
        assert gc(fed.store, grace_seconds=0) == []
    finally:
        fed.close()


LOST_DATASET = textwrap.dedent("""
    import os, signal, sys
    import giod
    from giod.read import tagindex
    tagindex.BLOCK = 8  # databases of 20-30 events: an index each, whose files these tests follow
    from giod.testing import synthetic

    fed = giod.open(sys.argv[1], create=False)
    with fed.create_dataset("late", synthetic.schema()).writer() as w:
        w.append(synthetic.events(10, seed=3))
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_recover_says_why_it_cannot_register_a_dataset_the_catalog_lost_too(tmp_path: Path):
    target = tmp_path / "fed"
    giod.open(target, create=True).close()
    r = subprocess.run([sys.executable, "-c", LOST_DATASET, str(target)], capture_output=True, text=True, timeout=300)
    assert r.returncode == -9, r.stderr
    (target / f"{CATALOG_FILE}-wal").unlink()
    (target / f"{CATALOG_FILE}-shm").unlink(missing_ok=True)

    r = giod_cli("recover", "-f", str(target))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "cannot register local:late/" in r.stdout and "dataset late is not in the catalog" in r.stdout
    assert "Traceback" not in r.stderr
    with giod.open(target, create=False) as fed:
        assert len(fsck(fed.store).by_kind("lost")) == 5  # still there, still reported


TWO_LOST = textwrap.dedent("""
    import os, signal, sys
    import giod
    from giod.read import tagindex
    tagindex.BLOCK = 8  # databases of 20-30 events: an index each, whose files these tests follow
    from giod.testing import synthetic

    fed = giod.open(sys.argv[1], create=False)
    ds = fed.dataset("daq")
    for seed in (4, 5):
        with ds.writer() as w:
            w.append(synthetic.events(10, seed=seed))
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_recover_registers_the_lost_databases_all_or_none(tmp_path: Path):
    target = tmp_path / "fed"
    with giod.open(target, create=True) as fed:
        fed.create_dataset("daq", synthetic.schema())
    r = subprocess.run([sys.executable, "-c", TWO_LOST, str(target)], capture_output=True, text=True, timeout=300)
    assert r.returncode == -9, r.stderr
    (target / f"{CATALOG_FILE}-wal").unlink()
    (target / f"{CATALOG_FILE}-shm").unlink(missing_ok=True)
    with giod.open(target, create=False) as fed:
        lost = fsck(fed.store).by_kind("lost")
        site = fed.site("local")
        folders = sorted({str(Path(p.path).parent) for p in lost})
        assert len(folders) == 2
        # the second database's files moved out of the dataset's directory: the catalog refuses that commit
        moved = Path(site.local_path(folders[1]))
        elsewhere = moved.parent.parent / "elsewhere" / moved.name
        elsewhere.parent.mkdir()
        moved.rename(elsewhere)

    r = giod_cli("recover", "-f", str(target))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "not below the dataset's directory" in r.stdout and "0 databases registered again" in r.stdout, r.stdout
    with giod.open(target, create=False) as fed:
        assert len(fed.dataset("daq")) == 0  # not the first without the second
        elsewhere.rename(moved)
    r = giod_cli("recover", "-f", str(target))
    assert r.returncode == 0 and "2 databases registered again" in r.stdout, r.stdout + r.stderr
    with giod.open(target, create=False) as fed:
        assert len(fed.dataset("daq")) == 20 and fsck(fed.store).problems == []
