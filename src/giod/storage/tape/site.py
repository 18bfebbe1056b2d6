"""The nearline site: a site whose files are on tape and are read from its disk buffer once staged.

``tape:///DIR?SETTINGS`` names one (``giod site add archive 'tape:///data/archive?drives=3'``). A file
written to it lands in the buffer and goes to tape at once (the copy stays
staged until evicted); reading a file that is only on tape stages it first,
alone, and waits however long it takes (the way a job that asks for one file
at a time reads tape). Jobs that know their files ahead ask for all of them in
one request instead (:meth:`NearlineSite.stage`, used by ``giod.store.staging``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import BinaryIO
from urllib.parse import unquote, urlsplit

from giod.errors import ConfigError, NotFound, StorageError
from giod.storage.kind import FileInfo, Site, SiteHealth, check_relpath
from giod.storage.pending import LocalPending, PendingFile
from giod.storage.tape.library import READ_PIN_S, FileState, RequestState, TapeLibrary
from giod.storage.tape.settings import LibrarySettings

__all__ = ["ON_DEMAND", "SCHEME", "NearlineSite", "parse_tape_url"]

SCHEME = "tape"

Progress = Callable[[int, int, float], None]

ON_DEMAND = "on-demand"  # the stage request of the files reads asked for without a request of their own


def parse_tape_url(url: str) -> tuple[str, LibrarySettings]:
    """The directory and the library settings of a ``tape://`` URL; ConfigError when malformed."""
    parts = urlsplit(url)
    if parts.scheme != SCHEME:
        raise ConfigError(f"{url!r} is not a tape:// URL")
    path = unquote(parts.netloc + parts.path)
    if not path:
        raise ConfigError(f"{url!r} names no directory (tape:///DIR?drives=N&…)")
    return path, LibrarySettings.from_query(parts.query)


class _Archiving(LocalPending):
    """A buffer file that goes to tape when it is published."""

    def __init__(self, site: NearlineSite, path: str):
        super().__init__(site.library.buffer, path)
        self._site = site

    def publish(self) -> None:
        super().publish()
        self._site.library.archive(self.path)


class NearlineSite(Site):
    """A tape library's site: files on cartridges, read through the disk buffer once staged."""

    def __init__(self, name: str, url: str):
        super().__init__(name, url)
        directory, settings = parse_tape_url(url)
        self.root = directory
        self.library = TapeLibrary(directory, settings)
        self.progress: Progress | None = None  # told while a read waits for its file

    def create(self, path: str, *, direct: bool = False) -> PendingFile:
        try:
            return _Archiving(self, check_relpath(path))
        except OSError as exc:
            raise StorageError(f"cannot create {path} on site {self.name}: {exc}") from exc

    def open(self, path: str) -> BinaryIO:
        """Open the staged copy, staging the file alone first when it is only on tape."""
        path = check_relpath(path)
        self.on_disk(path)
        try:
            return open(self.library.buffer / path, "rb")
        except FileNotFoundError as exc:  # evicted between the wait and the opening: once more
            self.library.wait([path], progress=self.progress)
            try:
                return open(self.library.buffer / path, "rb")
            except FileNotFoundError:
                raise NotFound(f"file {path} was evicted again before it could be opened on site {self.name}") from exc

    def on_disk(self, path: str) -> None:
        """Return once the staged copy of ``path`` is in the buffer (staged alone first when only on tape,
        however long that takes: what a server does for a read that asked for nothing ahead)."""
        path = check_relpath(path)
        try:
            self.library.wait([path], progress=self.progress)
        except NotFound as exc:
            raise NotFound(f"file {path} is missing on site {self.name}") from exc
        self.library.touch(path)

    def on_disk_or_staging(self, path: str) -> float | None:
        """None once the staged copy of ``path`` is in the buffer (the read noted); else the real seconds until
        it should be, its staging started if it is only on tape, without waiting (what a server does for a
        read that asked for nothing ahead: it answers "later" and holds no thread).

        On-demand stagings share one request (:data:`ON_DEMAND`), each file pinned for a read
        (``READ_PIN_S``), so that many such reads add one pin per file, not a request each. A library whose
        clock never sleeps (``time_scale`` 0) is waited for: its clock jumps.
        """
        path = check_relpath(path)
        if not self.library.settings.time_scale:
            self.on_disk(path)
            return None
        try:
            state = self.library.file(path)
            if state.state == "tape":
                self.library.stage([path], pin_s=READ_PIN_S, request=ON_DEMAND)
                state = self.library.file(path)
        except NotFound as exc:
            raise NotFound(f"file {path} is missing on site {self.name}") from exc
        if state.on_disk:
            self.library.touch(path)
            return None
        return max(0.0, state.ready - self.library.now()) * self.library.settings.time_scale

    def size(self, path: str) -> int:
        try:
            return self.library.file(check_relpath(path)).size
        except NotFound as exc:
            raise NotFound(f"file {path} is missing on site {self.name}") from exc

    def remove(self, path: str) -> None:
        self.library.remove(path)

    def walk(self) -> Iterator[FileInfo]:
        for path, size, mtime in self.library.walk():
            yield FileInfo(path, size, mtime)

    def health(self) -> SiteHealth:
        root = self.library.root
        if not root.is_dir():
            return SiteHealth(False, f"directory {root} is missing")
        st = os.statvfs(root)
        c = self.library.counters()
        detail = (f"tape library: {self.library.settings.drives} drives, {int(c['cartridges'])} cartridges, "
                  f"{int(c['files_staged'])} files staged, {int(c['files_staging'])} staging, "
                  f"{int(c['files_tape'])} on tape only")
        return SiteHealth(True, detail, st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize)

    def away(self) -> bool:
        return not self.library.root.is_dir()

    # ------------------------------------------------------------ the tier's own abilities

    def stage(self, paths: Sequence[str], *, pin_s: float | None = None, request: str | None = None) -> RequestState:
        """One bulk stage request for ``paths``, planned by cartridge and position (see ``TapeLibrary.stage``)."""
        return self.library.stage(paths, pin_s=pin_s, request=request)

    def states(self, paths: Sequence[str] | None = None) -> dict[str, FileState]:
        """Where each file is: on tape, staging (ready at …), staged (pinned until …)."""
        return self.library.files(paths)

    def tape_checksum(self, path: str) -> tuple[str, int]:
        """``(checksum, size)`` of the tape copy itself, read without staging (what ``giod fsck`` checks)."""
        from giod.storage.checksum import Checksum

        summer = Checksum()
        try:
            with open(self.library.tape / check_relpath(path), "rb") as fh:
                while block := fh.read(8 << 20):
                    summer.update(block)
        except FileNotFoundError as exc:
            raise NotFound(f"the tape copy of {path} is missing on site {self.name}") from exc
        return summer.hexdigest(), summer.size

    def release(self, path: str) -> None:  # the read-ahead ability of remote sites: nothing held here
        return None
