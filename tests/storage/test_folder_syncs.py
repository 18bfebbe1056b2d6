"""A database's files are fsync'd one by one, their folders once each, all before the catalog names them."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import giod
from giod.storage import pending as pending_mod
from giod.storage.pending import FolderSyncs
from giod.storage.site import LocalSite
from giod.testing import synthetic


def _record_fsyncs(monkeypatch, events: list[tuple[str, str]]) -> None:
    """Note each fsync: ("file", its final name) — files are synced under their temporary names — or
    ("folder", its path)."""
    real = os.fsync

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            events.append(("folder", path))
        else:
            name = re.fullmatch(r"\.(.+)\.tmp-[0-9a-f]+", os.path.basename(path))
            assert name is not None, path  # a file is synced before it has its final name
            events.append(("file", os.path.join(os.path.dirname(path), name[1])))
        real(fd)

    monkeypatch.setattr(pending_mod.os, "fsync", fsync)


def test_a_database_costs_one_fsync_per_file_and_one_per_folder_touched(tmp_path: Path, monkeypatch):
    with giod.open(tmp_path / "fed", create=True) as fed:
        ds = fed.create_dataset("d", synthetic.schema())
        with ds.writer() as w:  # the dataset's folder exists from here on
            w.append(synthetic.events(10, seed=1))
        events: list[tuple[str, str]] = []
        _record_fsyncs(monkeypatch, events)
        commit = fed.catalog.commit_database

        def noted(spec, **kw):  # the catalog commit, in the same sequence as the fsyncs
            events.append(("catalog", spec.dataset))
            return commit(spec, **kw)

        monkeypatch.setattr(fed.catalog, "commit_database", noted)
        with ds.writer() as w:
            w.append(synthetic.events(10, seed=2))
        (db,) = [d for d in ds.databases() if d.first_entry == 10]
    names = {Path(c.path).name for c in db.containers}
    files = [Path(p).name for kind, p in events if kind == "file"]
    folders = [Path(p) for kind, p in events if kind == "folder"]
    # four containers; no tag index for 10 events (one block of it: tagindex.worth_writing)
    assert sorted(files) == sorted(names) and len(names) == 4
    folder = Path(next(p for kind, p in events if kind == "file")).parent
    # the database's own folder, then the dataset's folder that gained its entry: one fsync each
    assert folders == [folder, folder.parent]
    kinds = [kind for kind, _ in events]
    assert kinds == ["file"] * 4 + ["folder"] * 2 + ["catalog"]


def test_a_file_published_alone_syncs_its_folder_and_the_folders_made_for_it(tmp_path: Path, monkeypatch):
    events: list[tuple[str, str]] = []
    _record_fsyncs(monkeypatch, events)
    site = LocalSite("disk", str(tmp_path))
    (tmp_path / "a").mkdir()
    p = site.create("a/b/c/f.bin")
    p.write(b"x" * 100)
    p.publish()
    assert (tmp_path / "a/b/c/f.bin").read_bytes() == b"x" * 100
    assert [(k, Path(f).relative_to(tmp_path).as_posix()) for k, f in events] == [
        ("file", "a/b/c/f.bin"), ("folder", "a/b/c"), ("folder", "a/b"), ("folder", "a")]


def test_deferred_folders_are_synced_once_each_when_asked(tmp_path: Path, monkeypatch):
    events: list[tuple[str, str]] = []
    _record_fsyncs(monkeypatch, events)
    site = LocalSite("disk", str(tmp_path))
    folders = FolderSyncs()
    for name in ("f1", "f2", "f3"):
        p = site.create(f"db/{name}")
        p.defer_folder_sync(folders)
        p.write(name.encode())
        p.publish()
    assert [k for k, _ in events] == ["file"] * 3  # no folder yet
    assert len(folders) == 2  # db, and the root that gained db's entry
    folders.sync()
    assert [(k, Path(f).relative_to(tmp_path.parent).as_posix()) for k, f in events[3:]] == [
        ("folder", f"{tmp_path.name}/db"), ("folder", tmp_path.name)]
    folders.sync()  # nothing left to sync
    assert len(events) == 5
    assert sorted(os.listdir(tmp_path / "db")) == ["f1", "f2", "f3"]
