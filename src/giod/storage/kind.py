"""The Site interface: what every kind of site does, and the abilities a kind may declare.

A site holds files under relative, '/'-separated paths below its root. The
kinds (a local directory and any fsspec file system in ``giod.storage.site``,
a giod server in ``giod.storage.remote``, an XRootD server in ``giod.storage.xrootd``) implement :class:`Site`; callers
use the abilities through it and never ask which kind a site is. The
conformance suite every kind passes is ``tests/storage/test_site_conformance.py``.
"""

from __future__ import annotations

import io
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from giod.names import check_path
from giod.storage.pending import PendingFile

__all__ = ["FileInfo", "Site", "SiteHealth", "check_relpath"]


class RangeFile(io.RawIOBase):
    """A seekable, read-only view of a file of known ``size`` on another machine: a site kind adds
    ``read`` (and its own ways of fetching ranges); the position is kept here."""

    size: int
    _pos: int = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    mtime: float


@dataclass(frozen=True)
class SiteHealth:
    """Whether a site answers, and its free space when known."""

    reachable: bool
    detail: str  # why not, or a remark ("" when all is well)
    free_bytes: int | None = None
    total_bytes: int | None = None


def check_relpath(path: str) -> str:
    """Refuse paths that could leave the site root (the one path grammar, ``giod.names.check_path``)."""
    return check_path(path)


class Site(ABC):
    """A place that holds files, addressed by relative paths.

    Besides the file operations every kind has, a site declares abilities that
    only some kinds use; the others answer them with a no-op, so callers never
    ask which kind a site is: reads announced ahead (:meth:`prefetch`,
    :meth:`release`), sizes the catalog vouches for (:meth:`expect_size`,
    :meth:`forget`), a checksum computed where the file is (:meth:`server_checksum`),
    a copy made by the destination itself (:meth:`pull`),
    and how publishing and checking behave (the class attributes below).
    """

    #: bytes cross a network to reach the files (a mismatch may be damage on the way: read again)
    networked: bool = False
    #: an upload is checked against its checksum where it lands, before it is published
    checks_uploads: bool = False
    #: publishing a file replaces one already at its path (else that one is removed first)
    replaces_on_publish: bool = True

    def __init__(self, name: str, url: str):
        self.name = name
        self.url = url

    @abstractmethod
    def create(self, path: str, *, direct: bool = False) -> PendingFile:
        """A new file, invisible until published; ``direct`` hints that it need not stay in memory."""

    @abstractmethod
    def open(self, path: str) -> BinaryIO:
        """Open a published file for reading (seekable). NotFound if missing."""

    @abstractmethod
    def size(self, path: str) -> int: ...

    @abstractmethod
    def remove(self, path: str) -> None: ...

    @abstractmethod
    def walk(self) -> Iterator[FileInfo]:
        """Every file below the root, temporary ones included."""

    def local_path(self, path: str) -> str | None:
        """A path on the local file system for ``path``, when there is one."""
        return None

    # ---------------------------------------------- abilities (no-ops where a kind lacks them)

    def health(self) -> SiteHealth:
        """Whether the site is there (a directory, a server that answers, a file system that lists)."""
        return SiteHealth(True, "not checked")

    def away(self) -> bool:
        """Whether the whole site is away (an unmounted disk), so a failed read says nothing of a file."""
        return False

    def prefetch(self, items: Sequence[tuple[str, int, Sequence[str] | None]]) -> None:  # noqa: B027 - no-op
        """Announce reads: ``(path, size, columns)`` in reading order (``columns=None``: the whole file)."""

    def release(self, path: str) -> None:  # noqa: B027 - a no-op where a kind lacks the ability
        """Drop what was fetched ahead for ``path`` and not read."""

    def expect_size(self, path: str, size: int) -> None:  # noqa: B027 - a no-op where a kind lacks the ability
        """Record a size the catalog vouches for (sparing a request to ask it)."""

    def forget(self, path: str) -> None:  # noqa: B027 - a no-op where a kind lacks the ability
        """Drop a size known for ``path``: the file may have changed since."""

    def server_checksum(self, path: str, size: int = 0) -> str | None:
        """The file's checksum (``crc32c:xxxxxxxx``) computed where it is stored, so that no byte travels;
        None where a kind cannot have one computed there (or the site gave none in time: the caller reads
        the bytes). ``size``, when known, lets a large file take longer. NotFound when the file is missing."""
        return None

    def pull(self, source: Site, path: str, size: int, checksum: str,
             advance: Callable[[int], None] | None = None) -> str | None:
        """Have this site fetch ``path`` from ``source`` itself (a third-party copy).

        ``"copied"`` or ``"adopted"``; None when this site cannot copy from that
        source, and the bytes must pass through the caller.
        """
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.url!r})"
