"""One container file: its checksum at a site, and its copy from one site to another.

A copy is published at the destination only when the bytes that arrived
have the size and CRC-32C the catalog recorded, so a transfer corrupted or
cut short on the way never becomes a file under the container's name, let
alone a replica. A local (or fsspec) destination is then read back and
checked again; a giod server checks the upload itself before publishing it
(``X-Giod-Checksum``), which is the same check made where the file lands.

Between two giod servers the bytes do not pass through the copying process:
the destination's server fetches the file from the source's server itself
(a third-party copy, see ``RemoteSite.pull``), checks it, and publishes it;
the copying process only asks, and hands over its token for the source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from giod.errors import ConflictError, IntegrityError, NotFound
from giod.storage.checksum import Checksum
from giod.storage.site import Site

__all__ = ["CHUNK", "FileState", "copy_file", "file_checksum", "file_state", "place"]

CHUNK = 8 << 20  # bytes read at a time (two pieces of a remote site's read scheduler)

Advance = Callable[[int], None]


def _size(site: Site, path: str) -> int:
    site.forget(path)  # the file may have changed since a size was cached
    return site.size(path)


def _read(site: Site, path: str, size: int, advance: Advance | None, sink: Callable[[bytes], object]) -> Checksum:
    """Stream the file through ``sink``, checksumming; a remote file is fetched many pieces at once."""
    summer = Checksum()
    site.expect_size(path, size)
    site.prefetch([(path, size, None)])
    with site.open(path) as fh:
        while True:
            block = fh.read(CHUNK)
            if not block:
                break
            summer.update(block)
            sink(block)
            if advance is not None:
                advance(len(block))
    return summer


def file_checksum(site: Site, path: str, advance: Advance | None = None) -> tuple[str, int]:
    """``(checksum, size)`` of the whole file as the site holds it now (NotFound when missing)."""
    size = _size(site, path)
    try:
        summer = _read(site, path, size, advance, lambda _: None)
    finally:
        site.release(path)
    if summer.size != size:
        raise IntegrityError(f"{path} on site {site.name}: {summer.size} bytes read of {size}")
    return summer.hexdigest(), summer.size


@dataclass(frozen=True)
class FileState:
    """What a site holds at a container's path: nothing, the right file, or another one."""

    present: bool
    intact: bool
    detail: str = ""


def file_state(site: Site, path: str, size: int, checksum: str, advance: Advance | None = None) -> FileState:
    """Whether ``site`` holds the file the catalog describes (reads it whole when the size matches, or asks
    the site for its checksum where the site computes one).

    A site that cannot be reached raises (StorageError): that says nothing about the file.
    """
    try:
        actual = _size(site, path)
    except NotFound:
        return FileState(False, False, "file is missing")
    if actual != size:
        return FileState(True, False, f"{actual} bytes, the catalog recorded {size}")
    # a site that computes the checksum where the file is (an XRootD server) spares reading it through here
    try:
        theirs = site.server_checksum(path, size)
    except NotFound:
        return FileState(False, False, "file is missing")
    if theirs is not None:
        if advance is not None:
            advance(size)
        if theirs == checksum:
            return FileState(True, True)
        return FileState(True, False, f"checksum {theirs} (computed by the site), the catalog recorded {checksum}")
    # through a network a mismatch is read twice: bytes damaged on the way must not condemn a file
    found = FileState(True, True)
    for _ in range(2 if site.networked else 1):
        try:
            value, _n = file_checksum(site, path, advance)
        except NotFound:
            return FileState(False, False, "file is missing")
        except IntegrityError as exc:
            found = FileState(True, False, str(exc))
            continue
        if value == checksum:
            return FileState(True, True)
        found = FileState(True, False, f"checksum {value}, the catalog recorded {checksum}")
    return found


def copy_file(src: Site, dst: Site, path: str, size: int, checksum: str, *, replace: bool = False,
              advance: Advance | None = None) -> None:
    """Copy ``path`` from ``src`` to ``dst``, published only if size and checksum match the catalog's.

    ``replace``: a different file is at the destination (a damaged copy, or
    a stranger); a giod server never overwrites a file, so it is removed
    there just before the verified copy is uploaded.
    """
    pending = dst.create(path)
    try:
        summer = _read(src, path, size, advance, pending.write)
        if summer.size != size or summer.hexdigest() != checksum:
            raise IntegrityError(
                f"{path} from site {src.name} arrived as {summer.size} bytes with {summer.hexdigest()}, "
                f"the catalog recorded {size} bytes with {checksum}: not published at {dst.name}")
        if replace and not dst.replaces_on_publish:
            dst.remove(path)
        pending.publish()
    except BaseException:
        pending.discard()
        raise
    finally:
        src.release(path)
    if not dst.checks_uploads:
        value, n = file_checksum(dst, path)
        if value != checksum or n != size:
            dst.remove(path)  # our own fresh write, damaged on the way to the disk: nobody counts on it
            raise IntegrityError(f"{path} read back at site {dst.name} as {n} bytes with {value}, "
                                 f"written as {size} bytes with {checksum}")


def place(src: Site, dst: Site, path: str, size: int, checksum: str, *,
          advance: Advance | None = None) -> str:
    """Make ``dst`` hold the container file: ``"adopted"`` when the right file is already there, else ``"copied"``.

    A file found at the destination is read and checked, never trusted: the
    right one is kept (an interrupted replication that published its copy
    but did not register it resumes without copying again), a wrong one is
    replaced by a verified copy.
    """
    how = _pull(src, dst, path, size, checksum, advance)
    if how is not None:
        return how
    found = file_state(dst, path, size, checksum)
    if found.intact:
        return "adopted"
    copy_file(src, dst, path, size, checksum, replace=found.present, advance=advance)
    return "copied"


def _pull(src: Site, dst: Site, path: str, size: int, checksum: str, advance: Advance | None) -> str | None:
    """A third-party copy (between two giod servers); None when the destination cannot make one."""
    try:
        return dst.pull(src, path, size, checksum, advance)
    except ConflictError:  # another file is there: it goes, then the verified copy comes
        dst.remove(path)
        return dst.pull(src, path, size, checksum, advance)
