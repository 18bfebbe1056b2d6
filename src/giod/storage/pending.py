"""Files being written: invisible under their final name until they are durable and published.

:class:`PendingFile` is what :meth:`giod.storage.kind.Site.create` hands out;
:class:`LocalPending` is the one of a local disk (made durable, then renamed),
which the direct writes of ``giod.storage.direct`` build on.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import threading
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from typing import BinaryIO

from giod.errors import StorageError
from giod.storage.writeback import WritebackRange

__all__ = ["TMP_MARK", "FolderSyncs", "LocalPending", "PendingFile", "fsync_path", "is_temporary",
           "temporary_name"]

TMP_MARK = ".tmp-"  # temporary files are named ".<name>.tmp-<uuid>"


#: bytes checksummed then copied into a local file at a time: well inside a core's cache, so that the copy
#: reads what the checksum has just read, not the memory again (docs/decisions.md)
LOCAL_PIECE = 256 << 10


def is_temporary(path: str) -> bool:
    return TMP_MARK in posixpath.basename(path)


class PendingFile(ABC):
    """A file being written; invisible under its final name until published."""

    path: str
    #: bytes a checksumming sink hands :meth:`write` at a time (None: each write whole). A local file copies
    #: what it is given into the page cache: a piece checksummed just before is still in the CPU's cache
    piece: int | None = None

    @abstractmethod
    def write(self, data: bytes | memoryview) -> int: ...

    @abstractmethod
    def publish(self) -> None:
        """Make the data durable and give the file its final name."""

    @abstractmethod
    def discard(self) -> None:
        """Remove the temporary file (safe to call twice)."""

    def defer_folder_sync(self, folders: FolderSyncs) -> None:  # noqa: B027 - only local disks sync folders
        """Leave the fsync of the folders :meth:`publish` changes to ``folders`` (``folders.sync()``)."""

    # file-like protocol, so that pyarrow can write into it
    closed = False

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def flush(self) -> None:  # noqa: B027 - data reach the disk in publish()
        pass


def temporary_name(final: Path) -> Path:
    """Where a file is written before it is published as ``final`` (its folder is made)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return final.with_name(f".{final.name}{TMP_MARK}{uuid.uuid4().hex}")


def make_folders(folder: Path) -> list[Path]:
    """Make ``folder`` and the missing ones above it; the folders this call made, outermost first."""
    missing: list[Path] = []
    at = folder
    while not at.is_dir():
        missing.append(at)
        if at.parent == at:
            break
        at = at.parent
    made = []
    for f in reversed(missing):
        try:
            f.mkdir()
        except FileExistsError:
            continue  # made by another writer at the same moment: its entry is that writer's to sync
        made.append(f)
    return made


class FolderSyncs:
    """The folders whose entries some files' publishing changed, each fsync'd once by :meth:`sync`.

    A writer publishes the files of a database (each file fsync'd, then renamed)
    and syncs their folders once, after the last rename and before the catalog
    commit that makes the files visible: one fsync of a folder makes every
    rename into it durable, so the five files of a database cost one folder
    fsync instead of five. A crash before :meth:`sync` returns loses at most
    renames of files no catalog row names yet: recovery sees either no file or
    files whose footers list containers missing beside them, and neither is a
    database (``giod fsck``/``gc`` remove them). A folder made for the files is
    an entry of its parent, which is synced too.
    """

    def __init__(self) -> None:
        self._folders: dict[Path, None] = {}  # in order of arrival; files publish from several threads
        self._lock = threading.Lock()

    def add(self, folder: Path) -> None:
        with self._lock:
            self._folders[folder] = None

    def __len__(self) -> int:
        return len(self._folders)

    def sync(self) -> None:
        """fsync every folder noted, innermost first; StorageError when the disk refuses."""
        with self._lock:
            folders, self._folders = list(self._folders), {}
        # a folder's own entries before the entry that names it in its parent
        for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
            try:
                fsync_path(folder)
            except OSError as exc:
                raise StorageError(f"cannot sync folder {folder.name}: {exc.strerror or exc}") from exc


class LocalPending(PendingFile):
    """A temporary file on a local disk: made durable, then renamed to its final name.

    Subclasses say how bytes are written and made durable (:meth:`write`,
    :meth:`_sync_and_close`, :meth:`_close`); publishing and discarding are the same.
    """

    _made: tuple[Path, ...] = ()  # folders made for the file: their parents' entries are synced on publishing
    piece = LOCAL_PIECE
    _folders: FolderSyncs | None = None  # where publish leaves its folders to sync (None: synced at once)

    def __init__(self, root: Path, path: str):
        self.path = path
        self._final = root / path
        self._made = tuple(make_folders(self._final.parent))
        self._tmp = self._final.with_name(f".{self._final.name}{TMP_MARK}{uuid.uuid4().hex}")  # its folder is made
        self._fh: BinaryIO | None = open(self._tmp, "xb")  # noqa: SIM115 - closed in publish/discard
        self._writeback = WritebackRange()

    def defer_folder_sync(self, folders: FolderSyncs) -> None:
        self._folders = folders

    def write(self, data: bytes | memoryview) -> int:
        fh = self._fh
        assert fh is not None, "write after publish/discard"
        n = fh.write(data)
        self._writeback.add(n, fh.fileno(), fh.flush)
        return n

    def _open(self) -> bool:
        return self._fh is not None

    def _sync_and_close(self) -> None:
        """Everything written on the disk, the file closed (OSError when the disk refuses)."""
        fh = self._fh
        assert fh is not None
        fh.flush()
        os.fsync(fh.fileno())
        fh.close()
        self._fh = None

    def _close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def publish(self) -> None:
        if not self._open():
            raise StorageError(f"{self.path}: already published or discarded")
        try:
            self._sync_and_close()
            os.replace(self._tmp, self._final)
            later = self._folders
            folders = FolderSyncs() if later is None else later
            folders.add(self._final.parent)
            for made in self._made:
                folders.add(made.parent)
            if later is None:
                folders.sync()
        except OSError as exc:
            self.discard()
            raise StorageError(f"cannot write {self.path}: {exc.strerror or exc}") from exc

    def discard(self) -> None:
        self._close()
        with contextlib.suppress(FileNotFoundError):
            self._tmp.unlink()


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush a file or a folder (its entries) to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
