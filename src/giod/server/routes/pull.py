"""Third-party copies: this server fetches a container file from another giod server.

A replicator that copies between two servers only asks; the bytes go from the
source server straight to this one (as XRootD and FTS third-party copies
do), with the source token the replicator hands over for that request alone
(``X-Giod-Source-Authorization``, like HTTP-TPC's ``TransferHeaderAuthorization``).
The file is written to a temporary file, checked against the size and
CRC-32C the replicator's catalog recorded, and only then published; a file
already here is read and kept when it is the right one, never overwritten.

The answer streams NDJSON lines as the copy goes, so that a long copy keeps
its connection alive and the replicator can show progress: ``{"bytes": n}``
lines, then one closing line, ``{"how": "copied" | "adopted", …}`` or
``{"error": kind, "message": …}``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from giod.errors import AuthError, ConflictError, DataError, GiodError, IntegrityError, TooLarge
from giod.storage.checksum import Checksum, checksum_stream
from giod.storage.http import Endpoint
from giod.storage.site import Site

__all__ = ["SLOTS", "PullRequest", "check_size", "pull_lines", "same_file", "source_prefix"]

CHUNK = 1 << 20  # bytes read from the source at a time
SLOTS = 64  # copies taking in bytes at once (the others wait, their source already asked)
PROGRESS_EVERY = 0.5  # seconds between progress lines
ENDPOINTS = 32  # source endpoints (base URL, token) kept with their connections
_endpoints: OrderedDict[tuple[str, str | None], Endpoint] = OrderedDict()
_endpoints_lock = threading.Lock()


def source_prefix(url: str) -> tuple[str, str]:
    """``(base, /files/<site>)`` of a source site URL; DataError for anything else.

    Only giod site URLs are fetched from: the server never becomes a
    client of arbitrary addresses on a writer's behalf.
    """
    parts = urlsplit(url)
    segments = parts.path.rstrip("/").split("/")
    if (parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password
            or parts.query or parts.fragment or len(segments) != 3 or segments[1] != "files"
            or unquote(segments[2]) in ("", ".", "..") or "/" in unquote(segments[2])):
        raise DataError(f"source {url!r} is not a giod server site (http(s)://host:port/files/<site>)")
    return f"{parts.scheme}://{parts.netloc}", "/" + "/".join(segments[1:])


def _endpoint(base: str, token: str | None) -> Endpoint:
    """One endpoint per (source, token), kept: its connections survive from one copy to the next."""
    key = (base, token)
    with _endpoints_lock:
        ep = _endpoints.get(key)
        if ep is None:
            ep = _endpoints[key] = Endpoint(base, token or "", streams=64, timeout=60.0)
            while len(_endpoints) > ENDPOINTS:
                _endpoints.popitem(last=False)[1].close()
        _endpoints.move_to_end(key)
        return ep


class PullRequest:
    """What one third-party copy is asked to do."""

    def __init__(self, site: Site, site_name: str, path: str, full: Path, source: str, token: str | None,
                 size: int, checksum: str):
        self.site, self.site_name, self.path, self.full = site, site_name, path, full
        self.base, self.prefix = source_prefix(source)
        self.source, self.token, self.size, self.checksum = source, token, size, checksum
        self.what = f"fetching {path} from {source}"


def _line(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode() + b"\n"


async def pull_lines(req: PullRequest, slots: Any, received: Any = None) -> AsyncIterator[bytes]:
    """Carry out the copy, yielding the NDJSON answer; ``received(n)`` counts the bytes fetched.

    Any number of copies wait for their source at once (a far source costs a
    round trip each); ``slots`` (an ``anyio.Semaphore``) bounds how many take
    in bytes and write them at a time. The file is written past the page
    cache (``giod.storage.direct``): it arrives whole and is not read here
    soon, and the disk then takes many files at once without the thrashing of
    a page cache filled faster than it drains.
    """
    import anyio
    from anyio import to_thread

    try:
        if await to_thread.run_sync(req.full.exists):  # a stat can wait on a slow disk too
            yield _line(await to_thread.run_sync(_adopt, req))
            return
        r = await to_thread.run_sync(_open_source, req)
        while True:  # the wait says something now and then: the asker's connection stays alive
            with anyio.move_on_after(PROGRESS_EVERY):
                await slots.acquire()
                break
            yield _line({"bytes": 0})
        try:
            async for line in _receive(req, r, received):
                yield line
        finally:
            slots.release()
    except GiodError as exc:
        yield _line({"error": type(exc).__name__, "message": str(exc)})
    except OSError as exc:  # the local disk failing or full
        yield _line({"error": "StorageError", "message": f"writing {req.path} at {req.site_name}: {exc}"})


def same_file(full: Path, path: str, checksum: str, size: int | None = None, where: str = "") -> dict[str, Any]:
    """The file already at ``full`` when it is the one described (ConflictError otherwise: never overwritten)."""
    with open(full, "rb") as fh:
        found, n = checksum_stream(fh)
    if found != checksum or (size is not None and n != size):
        raise ConflictError(f"file {path} exists{where} with other content ({n} bytes, {found}): "
                            "files are never overwritten")
    return {"path": path, "size": n, "checksum": found}


def _adopt(req: PullRequest) -> dict[str, Any]:
    return {**same_file(req.full, req.path, req.checksum, req.size, f" at site {req.site_name}"), "how": "adopted"}


def _open_source(req: PullRequest) -> Any:
    """The source's answer, its body not read yet."""
    ep = _endpoint(req.base, req.token)
    try:
        return ep.stream("GET", f"{req.prefix}/{quote(req.path)}", what=req.what)
    except AuthError as exc:
        raise type(exc)(f"{req.what}: the source refused the token: {exc}") from exc


class _Receiver:
    """The body of the source's answer into a temporary file, checksummed; published only if right."""

    def __init__(self, req: PullRequest, r: Any, received: Any):
        self.req, self.r, self.received = req, r, received
        self.pending = req.site.create(req.path, direct=True)
        self.summer = Checksum()
        self.over = False  # more bytes than the catalog recorded

    def step(self) -> bool:
        """Take in one chunk; False at the end of the body."""
        import urllib3

        try:
            block = self.r.read(CHUNK, decode_content=False)
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # cut short on the way
            raise IntegrityError(f"{self.req.what}: transfer broken after {self.summer.size} bytes ({exc}): "
                                 f"not published at {self.req.site_name}") from exc
        if not block:
            return False
        self.summer.update(block)
        if self.summer.size > self.req.size:
            self.over = True
            return False
        self.pending.write(block)
        if self.received is not None:
            self.received(len(block))
        return True

    def publish(self) -> None:
        req, got = self.req, self.summer
        if got.size != req.size or got.hexdigest() != req.checksum:
            raise IntegrityError(
                f"{req.path} from {req.source} arrived as {got.size}{'+' if self.over else ''} bytes with "
                f"{got.hexdigest()}, the catalog recorded {req.size} bytes with {req.checksum}: "
                f"not published at {req.site_name}")
        self.pending.publish()


async def _receive(req: PullRequest, r: Any, received: Any) -> AsyncIterator[bytes]:
    from anyio import to_thread

    rx: _Receiver | None = None
    ended = False
    try:
        rx = await to_thread.run_sync(_Receiver, req, r, received)
        last = time.monotonic()
        while await to_thread.run_sync(rx.step):
            if time.monotonic() - last >= PROGRESS_EVERY:
                last = time.monotonic()
                yield _line({"bytes": rx.summer.size})
        ended = not rx.over
        await to_thread.run_sync(rx.publish)
    except BaseException:
        if rx is not None:
            rx.pending.discard()
        raise
    finally:
        if ended:
            r.release_conn()
        else:  # mid-body: the connection cannot serve another request
            r.close()
    yield _line({"path": req.path, "size": rx.summer.size, "checksum": rx.summer.hexdigest(), "how": "copied"})


def check_size(value: str | None, limit: int) -> int:
    """The declared size of the file to copy (DataError when absent or malformed, TooLarge over ``limit``)."""
    if value is None or not value.isdigit():
        raise DataError("a copy needs the file's size in the X-Giod-Size header")
    size = int(value)
    if size > limit:
        raise TooLarge(f"copy of {size} bytes refused: at most {limit}")
    return size
