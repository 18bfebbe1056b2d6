"""A writer killed between the renames of one database's containers: recover never registers what it left.

The writer runs in a real subprocess, which stops itself just before it would
put one chosen container in place (after at least one other is in place),
tells the test through a pipe, and is then killed with SIGKILL. Its lease is
given up as its expiry would, and the files it left are judged: they are the
debris of an unfinished database (fsck: orphans, gc removes them), never a
database with a container missing.
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
from giod.read import tagindex
from giod.store.consistency import fsck, gc, recover
from giod.testing import synthetic
from giod_bench import crafted


@pytest.fixture(autouse=True)
def _small_databases_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Databases of 20-30 events are less than a block of the tag index, which would leave them without one
    (``tagindex.worth_writing``): blocks of 8 positions give each its index, a file these tests follow."""
    monkeypatch.setattr(tagindex, "BLOCK", 8)


KILLED = textwrap.dedent("""
    import os, sys, threading
    import giod
    from giod.read import tagindex
    tagindex.BLOCK = 8  # databases of 20-30 events: an index each, whose files these tests follow
    from giod.write import writer
    from giod.storage.site import LocalPending
    from giod.testing import synthetic

    target, stop_at, fd, old = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "old"
    if old:  # a footer as giod wrote it before it named the database's containers
        footer = writer.Writer._footer
        def _footer(self, *args, **kwargs):
            out = footer(self, *args, **kwargs)
            out.pop("containers", None)
            return out
        writer.Writer._footer = _footer
    published = [0]
    moved = threading.Condition()
    publish = LocalPending.publish
    # the tag index is written once the tag container is in place, beside the other containers: stopped
    # before it, the writer first lets every container reach its place; any other file waits for one
    others = 4 if stop_at == "tag-index" else 1

    def stopping(self):
        if os.path.basename(self.path).startswith(stop_at + "."):
            with moved:
                moved.wait_for(lambda: published[0] >= others)
            os.write(fd, b"k")
            threading.Event().wait()  # until the SIGKILL
        publish(self)
        with moved:
            published[0] += 1
            moved.notify_all()

    LocalPending.publish = stopping
    fed = giod.open(target, create=False)
    with fed.dataset("daq").writer(program="daq") as w:
        w.append(synthetic.events(30, seed=2))
""")


def _killed_writer(target: Path, stop_at: str, old: bool = False, compression: str = "zstd") -> None:
    """Run a writer in a subprocess and SIGKILL it just before ``stop_at`` is renamed into place."""
    r, w = os.pipe()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "GIOD_COMPRESSION": compression}
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(target), stop_at, str(w), "old" if old else "new"],
                            pass_fds=(w,), env=env, stderr=subprocess.PIPE)
    os.close(w)
    try:
        got = os.read(r, 1)
    finally:
        os.close(r)
    if got:
        proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert got == b"k" and proc.returncode == -signal.SIGKILL, err.decode()
    with giod.open(target, create=False) as fed:  # its lease ends as its expiry would
        for lease in fed.catalog.leases():
            fed.catalog.release_lease(lease.id)


@pytest.fixture
def target(tmp_path: Path) -> Path:
    root = tmp_path / "fed"
    with giod.open(root, create=True) as fed:
        ds = fed.create_dataset("daq", synthetic.schema())
        with ds.writer() as w:
            w.append(synthetic.events(20, seed=1))
    return root


@pytest.mark.parametrize("stop_at", ["tag", "raw.calo"])
def test_a_database_killed_between_its_renames_is_debris_not_a_lost_commit(target: Path, stop_at: str):
    _killed_writer(target, stop_at)
    with giod.open(target, create=False) as fed:
        report = fsck(fed.store)
        assert not report.lost_commits and not report.damaged, report.problems
        unfinished = [p for p in report.problems if "did not finish" in p.detail]
        assert unfinished and all(p.kind == "orphan" and stop_at in p.detail for p in unfinished), report.problems
        assert recover(fed.store) == []
        ds = fed.dataset("daq")
        assert len(ds.databases()) == 1 and len(ds) == 20
        assert len(ds.select("njets >= 0")) == 20
        removed = gc(fed.store, grace_seconds=0)
        assert {Path(p).name.split(".")[0] for _, p in removed} >= {Path(p.path).name.split(".")[0]
                                                                     for p in unfinished}
        assert fsck(fed.store).problems == []


def test_recover_registers_a_complete_database_of_the_same_writer(target: Path):
    # killed before the tag index, once every container of the database is in place
    _killed_writer(target, "tag-index")
    with giod.open(target, create=False) as fed:
        assert len(fsck(fed.store).by_kind("lost")) == 4  # raw.calo, raw.tracker, reco, tag
        (got,) = recover(fed.store)
        assert got.database_id is not None, got
        ds = fed.dataset("daq")
        assert len(ds) == 50 and len(ds.select("njets >= 0")) == 50
        want = synthetic.events(30, seed=2)
        assert ak.to_list(ds.read(["ht"])[20:].ht) == ak.to_list(want.ht)


def test_recover_checks_the_files_whole_before_it_registers_them(target: Path):
    # a complete database by its footers, one of whose files a peer crafted (every checksum made to agree)
    _killed_writer(target, "tag-index", compression="none")
    with giod.open(target, create=False) as fed:
        (reco,) = [p for p in fsck(fed.store).by_kind("lost") if Path(p.path).name.startswith("reco.")]
        path = Path(fed.site(reco.site).local_path(reco.path))
        schema = fed.dataset("daq").schema.arrow_schema("reco")
    data = bytearray(path.read_bytes())
    crafted.column_buffer(data, schema, 0, "jets")[3] = 100_000_000
    crafted.reseal(data)
    path.write_bytes(data)
    with giod.open(target, create=False) as fed:
        (got,) = recover(fed.store)
        assert got.database_id is None and reco.path in got.reason and "offset" in got.reason.lower(), got
        ds = fed.dataset("daq")
        assert len(ds) == 20 and len(ds.select("count(jets.pt > 0) >= 0")) == 20


def test_files_without_the_list_of_containers_keep_the_older_rule(target: Path):
    # a footer written before the list existed cannot tell a whole database from a part: recover trusts it
    _killed_writer(target, "tag", old=True)
    with giod.open(target, create=False) as fed:
        assert fsck(fed.store).lost_commits
        (got,) = recover(fed.store)
        assert got.database_id is not None and "tag" not in {c.name for c in fed.dataset("daq").databases()[1]
                                                               .containers}
