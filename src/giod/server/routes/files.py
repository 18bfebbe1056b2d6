"""Container files: byte ranges (single and multi-range), HEAD, uploads for remote writers.

Paths are confined to the site's root: relative, no ``..``, no backslash or
NUL, and after symbolic links are resolved still inside the root. Files of a
dataset live under its name, which is what a dataset-restricted token is
checked against: both the path asked for and, when a link was followed, the
path it resolves to must lie in a dataset the token covers.

The ETag of a file is its catalog checksum: ``If-None-Match`` with it answers
304, and a ``Range`` comes with its ``If-Range`` only while it still holds.
The upload and copy routes run on the event loop (they stream): everything
in them that waits for the disk or the catalog runs in worker threads, so
that a slow disk stalls no other request.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_
import time
from pathlib import Path
from typing import Any

import anyio
from anyio import to_thread
from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from giod.errors import ConflictError, DataError, GiodError, IntegrityError, NotFound, Staging, StorageError, TooLarge
from giod.names import dataset_of_path
from giod.server.auth import Caller
from giod.server.byteranges import CHUNK, RangeRefused, file_chunks, multipart_parts, parse_range
from giod.server.routes import pull
from giod.server.state import ServerState, need, state
from giod.server.streams import FileBody, Part
from giod.storage.checksum import Checksum
from giod.storage.formats.arrow.served import served_ranges
from giod.storage.remote import HEADS_CONTENT_TYPE
from giod.storage.site import LocalSite, check_relpath
from giod.storage.tape.site import NearlineSite

router = APIRouter(tags=["files"])

CONTENT_TYPE = "application/vnd.apache.parquet"
UPLOAD_BUFFER = 1 << 20  # bytes of an upload gathered before each write (done in a worker thread)
ARROW_CONTENT_TYPE = "application/vnd.apache.arrow.file"  # the IANA name of Arrow's file format
MAX_COLUMNS_TEXT = 8 << 10  # characters of the columns a planned read names
MAX_HEADS = 256  # files one request for heads (footers and batch metadata) names


def content_type(path: str) -> str:
    """The media type of a container file, by its name (giod names files after their format)."""
    return ARROW_CONTENT_TYPE if path.endswith(".arrow") else CONTENT_TYPE


NAMES_SECONDS = 2.0  # a dataset name with '/' (made before the name grammar) is seen within this time


def _nested_names(st: ServerState) -> tuple[str, ...]:
    """Dataset names that hold a '/' (only federations older than the name grammar have them), longest first."""
    now = time.monotonic()
    held = st.extra.get("nested_names")
    if held is None or now - held[0] > NAMES_SECONDS:
        names = st.federation.catalog.dataset_names()
        held = (now, tuple(sorted((n for n in names if "/" in n), key=len, reverse=True)))
        st.extra["nested_names"] = held
    return held[1]


def owner(st: ServerState, path: str) -> str:
    """The dataset a file belongs to: its first directory, or the longest older name with '/' it lies below."""
    for name in _nested_names(st):
        if path.startswith(name + "/"):
            return name
    return dataset_of_path(path)


def _authorised(request: Request, scope: str, site: str, path: str) -> tuple[Caller, Path]:
    """The caller and the resolved file, if the caller may ``scope`` the dataset of both ``path`` and
    what it resolves to (a link inside the site to another dataset's file is refused: 403, or 404
    for a dataset the caller may not see)."""
    st = state(request)
    who = need(request, scope, owner(st, path))
    root, full = _confined(st, site, path, scope)
    real = full.relative_to(root).as_posix()
    if real != path:
        if not who.sees(owner(st, real)):  # where the link leads is not told
            raise NotFound(f"file {path} not found on site {site}")
        need(request, scope, owner(st, real))
    if scope == "read" and (tape := st.extra["site_roots"][(site, True)][2]) is not None:
        # a file only on tape: its staging started, the client told when to ask again (503, Retry-After);
        # no thread of the server waits for a mount
        wait = tape.on_disk_or_staging(real)
        if wait is not None:
            raise Staging(f"file {path} is being staged from tape on site {site}: ask again in {wait:.1f} s",
                          wait)
    return who, full


ROOTS_SECONDS = 2.0  # a site's resolved root is kept this long (a file request asked for it every time)


def _root(st: ServerState, site: str, scope: str = "write") -> Path:
    """The resolved root a ``scope`` request reads or writes below; a tape site is read from its buffer
    (its site kept beside the root for staging)."""
    now = time.monotonic()
    roots = st.extra.setdefault("site_roots", {})
    key = (site, scope == "read")
    held = roots.get(key)
    if held is None or now - held[0] > ROOTS_SECONDS:
        s = st.federation.site(site)
        if scope == "read" and isinstance(s, NearlineSite):
            # where its files are read once staged; written only through it
            held = roots[key] = (now, s.library.buffer.resolve(), s)
        elif not isinstance(s, LocalSite):
            raise NotFound(f"site {site} is not served by this server (it is not a local directory)")
        else:
            held = roots[key] = (now, s.root.resolve(), None)
    root: Path = held[1]
    return root


def _confined(st: ServerState, site: str, path: str, scope: str = "write") -> tuple[Path, Path]:
    _checked(path)
    root = _root(st, site, scope)
    full = _resolved(root, path)
    if not full.is_relative_to(root):
        raise NotFound(f"file {path} not found on site {site}")  # a link out of the root: never followed
    return root, full


def _resolved(root: Path, path: str) -> Path:
    """``(root / path).resolve()`` for a resolved ``root``: the components below the root are looked at one
    by one (the root's own are not looked at again, as a full resolve would, on every request), and any
    link among them is resolved the full way."""
    at = str(root)
    for part in path.split("/"):
        at = os.path.join(at, part)
        try:
            if stat_.S_ISLNK(os.lstat(at).st_mode):
                return (root / path).resolve()
        except OSError:
            break  # nothing there (or not a directory): as resolve() does, the rest is taken as written
    return Path(os.path.normpath(os.path.join(str(root), path)))


def _limit_headers(st: ServerState) -> dict[str, str]:
    lim = st.limits
    return {"accept-ranges": "bytes", "x-giod-max-ranges": str(lim.max_ranges),
            "x-giod-max-request-bytes": str(lim.max_request_bytes),
            "x-giod-max-upload-bytes": str(lim.max_upload_bytes)}


def _etag(st: ServerState, site: str, path: str, stat: os.stat_result) -> str:
    key = (site, path, stat.st_size, stat.st_mtime_ns)
    known = st.etags.get(key)
    if known is None:
        known = st.federation.catalog.checksum_of(path) or f"size{stat.st_size}-mtime{stat.st_mtime_ns}"
        st.etags.put(key, known)
    return f'"{known}"'


def _none_match(request: Request, etag: str) -> bool:
    """Whether ``If-None-Match`` names ``etag`` (weak comparison, as RFC 9110 asks) or is ``*``."""
    header = request.headers.get("if-none-match")
    if header is None:
        return False
    if header.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in header.split(","))


def _not_modified(st: ServerState, etag: str) -> Response:
    return Response(status_code=304, headers=_limit_headers(st) | {"etag": etag})


def _open(full: Path, path: str, site: str) -> tuple[int, os.stat_result]:
    try:
        fd = os.open(full, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError as exc:
        raise NotFound(f"file {path} not found on site {site}") from exc
    except (IsADirectoryError, NotADirectoryError, PermissionError, OSError) as exc:
        raise NotFound(f"file {path} not found on site {site}") from exc
    st = os.fstat(fd)
    if not stat_.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotFound(f"file {path} not found on site {site}")
    return fd, st


@router.head("/files/{site}/{path:path}", summary="Size, ETag (the checksum) and the server's range bounds")
def head_file(request: Request, site: str, path: str) -> Response:
    st = state(request)
    _, full = _authorised(request, "read", site, path)
    fd, info = _open(full, path, site)
    os.close(fd)
    etag = _etag(st, site, path, info)
    if _none_match(request, etag):
        return _not_modified(st, etag)
    headers = _limit_headers(st) | {"content-length": str(info.st_size), "etag": etag}
    return Response(status_code=200, headers=headers, media_type=content_type(path))


@router.get("/files/{site}/{path:path}", summary="A container file, whole or in byte ranges",
            responses={206: {"description": "the asked ranges"}, 413: {"description": "over the bounds"},
                       416: {"description": "no range within the file"}})
def get_file(request: Request, site: str, path: str) -> Response:
    st = state(request)
    _, full = _authorised(request, "read", site, path)
    fd, info = _open(full, path, site)
    st.federation.store.read_log.note_path(path)  # its database's last read, written later in a batch
    size = info.st_size
    try:
        etag = _etag(st, site, path, info)
        if _none_match(request, etag):
            os.close(fd)
            return _not_modified(st, etag)
        headers = _limit_headers(st) | {"etag": etag}
        header = request.headers.get("range")
        if_range = request.headers.get("if-range")
        if header is not None and if_range is not None and if_range.strip() != etag:
            header = None  # the client's part is of another file (or a date, never matched): send it whole
        if header is None:
            ranges: list[tuple[int, int]] = []  # the whole file
        planned = _planned(request, fd, size, path, st.limits.max_request_bytes) if header is not None else None
        if planned is not None:  # the plan's ranges, whatever the Range asked (the tail, for a plain server)
            ranges, whole = planned
            headers["x-giod-plan"] = "whole" if whole else "metadata"
        elif header is not None:
            ranges = parse_range(header, size, max_ranges=st.limits.max_ranges,
                                 max_bytes=st.limits.max_request_bytes)
    except RangeRefused as exc:
        os.close(fd)
        extra = {"content-range": f"bytes */{size}"} if exc.status == 416 else {}
        return _refusal(exc.status, exc.message, _limit_headers(st) | extra)
    except BaseException:
        os.close(fd)
        raise
    if not ranges:
        headers["content-length"] = str(size)
        return _answer(st, fd, [(0, size)], size, 200, headers, content_type(path))
    if len(ranges) == 1:
        a, b = ranges[0]
        headers |= {"content-range": f"bytes {a}-{b - 1}/{size}", "content-length": str(b - a)}
        return _answer(st, fd, [(a, b)], b - a, 206, headers, content_type(path))
    boundary, length, parts = multipart_parts(ranges, size, content_type(path))
    headers["content-length"] = str(length)
    return _answer(st, fd, parts, length, 206, headers, f"multipart/byteranges; boundary={boundary}")


def _answer(st: ServerState, fd: int, parts: list[Part], length: int, status: int, headers: dict[str, str],
            media_type: str) -> Response:
    """The answer of ``length`` bytes made of ``parts`` (bytes, or spans of the open file ``fd``, closed once
    they are sent).

    An answer of one chunk at most is read here, in the route's worker thread, and sent whole: a stream
    would hand each of its chunks, and its end, to a worker thread of its own (three thread hops, not one,
    for the footers, metadata and small ranges a far reader asks for). A larger one is a :class:`FileBody`:
    its spans go by ``sendfile`` on a plain-TCP connection.
    """
    if length <= CHUNK:
        try:
            data = b"".join(p if isinstance(p, bytes) else b"".join(file_chunks(fd, *p)) for p in parts)
        finally:
            os.close(fd)
        st.metrics.add("bytes_sent", len(data))
        return Response(data, status_code=status, headers=headers, media_type=media_type)
    st.metrics.add("open_files", 1)
    return FileBody(fd, parts, send_timeout=st.streams.send_timeout, sent=lambda n: st.metrics.add("bytes_sent", n),
                    done=lambda: st.metrics.add("open_files", -1), status_code=status, headers=headers,
                    media_type=media_type)


def _planned(request: Request, fd: int, size: int, path: str, max_bytes: int
             ) -> tuple[list[tuple[int, int]], bool] | None:
    """For ``?columns=a,b``: the ranges a read of those columns of an Arrow file asks for (footer, batches'
    metadata, the columns' buffers when within ``max_bytes``), so that they travel in one round trip, and
    whether the buffers are among them; for ``?buffers=no`` the footer and metadata alone (a reader that
    places the buffers itself); None for any other request or file (the Range is answered)."""
    asked = request.query_params.get("columns")
    heads = request.query_params.get("buffers") == "no"  # footer and batches' metadata alone
    if not (asked or heads) or not path.endswith(".arrow"):
        return None
    columns = [c for c in (asked or "").split(",") if c]
    if (not columns and not heads) or len(asked or "") > MAX_COLUMNS_TEXT:
        raise RangeRefused(400, f"columns: 1 to {MAX_COLUMNS_TEXT} characters of comma-separated names")
    if heads:
        max_bytes = 0

    def read_at(start: int, stop: int) -> bytes:
        return os.pread(fd, stop - start, start)

    try:
        return served_ranges(read_at, size, columns, max_bytes)
    except GiodError:
        return None  # not a file the server can plan: the reader plans it from the bytes it asked for


class HeadsAsked(BaseModel):
    paths: list[str] = Field(min_length=1, max_length=MAX_HEADS, description="Arrow files of the site")


@router.post("/files/{site}", summary="The footers and batch metadata of many Arrow files, in one answer",
             responses={200: {"content": {HEADS_CONTENT_TYPE: {}},
                              "description": "a 4-byte big-endian length, a JSON index of that length, the "
                                             "bytes it lists"}})
def file_heads(request: Request, site: str, asked: HeadsAsked) -> Response:
    """What ``GET /files/{site}/{path}?buffers=no`` answers, for each of many files at once: a reader placing
    the buffers of many files itself (a gathered read) asks once, not once a file.

    The index lists, for each file in the order asked, its ``size`` and its ``parts`` (``[start, length]``,
    the bytes following in that order), or an ``error`` (``NotFound``, ``Staging``: the file not on disk
    yet; ``Unplanned``: no Arrow file the server can plan; ``TooLarge``: past the request's bound). The
    caller must be allowed to read every file's dataset; a file it may not see is ``NotFound``.
    """
    import json

    st = state(request)
    need(request, "read", any_dataset=True)  # before anything about the site is told
    _root(st, site, "read")  # a site not served here is not found, whichever files are named
    index: list[dict[str, Any]] = []
    data: list[bytes] = []
    held = 0
    for path in asked.paths:
        entry: dict[str, Any] = {"path": path}
        index.append(entry)
        # a dataset the caller may not see refuses the request, as a GET of its file would be (404)
        need(request, "read", owner(st, _checked(path)))
        try:
            _, full = _authorised(request, "read", site, path)
            fd, info = _open(full, path, site)
        except (NotFound, Staging) as exc:
            entry["error"] = type(exc).__name__
            continue
        try:
            ranges = _heads_of(fd, info.st_size, path)
            n = sum(b - a for a, b in ranges or [])
            if ranges is None or held + n > st.limits.max_request_bytes:
                entry["error"] = "Unplanned" if ranges is None else "TooLarge"
                continue
            parts = [os.pread(fd, b - a, a) for a, b in ranges]
        finally:
            os.close(fd)
        if sum(len(p) for p in parts) != n:
            entry["error"] = "NotFound"  # cut short meanwhile: never replaced, so removed
            continue
        st.federation.store.read_log.note_path(path)
        held += n
        data += parts
        entry |= {"size": info.st_size, "parts": [[a, b - a] for a, b in ranges]}
    text = json.dumps({"files": index}, separators=(",", ":")).encode()
    body = b"".join([len(text).to_bytes(4, "big"), text, *data])
    st.metrics.add("bytes_sent", len(body))
    return Response(body, media_type=HEADS_CONTENT_TYPE, headers=_limit_headers(st))


def _checked(path: str) -> str:
    try:
        return check_relpath(path)
    except StorageError as exc:  # what the client asked for is malformed: 400, not a server fault (503)
        raise DataError(str(exc)) from exc


def _heads_of(fd: int, size: int, path: str) -> list[tuple[int, int]] | None:
    """The ranges of an Arrow file's tail and batches' metadata (None: not a file the server can plan)."""
    if not path.endswith(".arrow"):
        return None
    try:
        return served_ranges(lambda a, b: os.pread(fd, b - a, a), size, [], 0)[0]
    except GiodError:
        return None


def _refusal(status: int, message: str, headers: dict[str, str]) -> Response:
    import json

    kind = {400: "DataError", 413: "TooLarge"}.get(status, "StorageError")
    return Response(json.dumps({"error": kind, "message": message}), status_code=status, headers=headers,
                    media_type="application/json")


@router.put("/files/{site}/{path:path}", summary="Upload a container file (published only if its checksum holds)",
            status_code=201, responses={429: {"description": "the token holds its quota in uncommitted uploads"}})
async def put_file(request: Request, site: str, path: str) -> dict[str, Any]:
    st = state(request)
    who, full, expected, done = await to_thread.run_sync(_admit_upload, request, st, site, path)
    if done is not None:
        return done
    assert who.token is not None  # writing needs a token
    upload = _Upload(st, who.token.id, site, path)
    declared = request.headers.get("content-length")
    try:
        # a declared length counts against the quota before a byte of the body is read
        await to_thread.run_sync(upload.reserve, int(declared) if declared and declared.isdigit() else 0)
        await to_thread.run_sync(upload.create)
        buffer: list[bytes] = []
        gathered = 0
        async for chunk in request.stream():
            upload.size += len(chunk)
            if upload.size > st.limits.max_upload_bytes:
                raise TooLarge(f"upload larger than {st.limits.max_upload_bytes} bytes refused")
            buffer.append(chunk)
            gathered += len(chunk)
            if gathered >= UPLOAD_BUFFER:
                await to_thread.run_sync(upload.write, b"".join(buffer))
                buffer, gathered = [], 0
        await to_thread.run_sync(upload.write, b"".join(buffer))
        st.metrics.add("bytes_received", upload.size)
        await to_thread.run_sync(upload.publish, expected)
    except BaseException:
        with anyio.CancelScope(shield=True):  # a client gone mid-upload still leaves nothing behind
            await to_thread.run_sync(upload.discard)
        raise
    return {"path": path, "size": upload.size, "checksum": expected}


def _admit_upload(request: Request, st: ServerState, site: str,
                  path: str) -> tuple[Caller, Path, str, dict[str, Any] | None]:
    """Caller, file and checksum of an upload; with the answer already when the same file is there."""
    who, full = _authorised(request, "write", site, path)
    expected = request.headers.get("x-giod-checksum")
    if not expected:
        raise IntegrityError("an upload needs its checksum in the X-Giod-Checksum header")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > st.limits.max_upload_bytes:
        raise TooLarge(f"upload of {declared} bytes refused: at most {st.limits.max_upload_bytes}")
    if full.exists():
        # files are immutable once published: a retried upload of the same bytes is fine
        return who, full, expected, pull.same_file(full, path, expected)
    return who, full, expected, None


class _Upload:
    """One upload's temporary file, checksum and share of its token's quota (methods block: run in threads)."""

    def __init__(self, st: ServerState, token: int, site: str, path: str):
        self.st, self.token, self.site, self.path = st, token, site, path
        self.pending: Any = None
        self.summer = Checksum()
        self.size = 0  # bytes received so far
        self.reserved = 0

    def still_held(self, item: tuple[str, str]) -> bool:
        """Whether a file this token uploaded earlier is on its site and not yet in the catalog."""
        site, path = item
        try:
            _, full = _confined(self.st, site, path)
        except (DataError, NotFound):
            return False
        return full.exists() and self.st.federation.catalog.checksum_of(path) is None

    def reserve(self, size: int) -> None:
        if size > self.reserved:
            self.st.quota.reserve(self.token, (self.site, self.path), size, self.still_held)
            self.reserved = size

    def create(self) -> None:
        self.pending = self.st.federation.site(self.site).create(self.path)

    def write(self, data: bytes) -> None:
        self.reserve(self.summer.size + len(data))
        self.summer.update(data)
        self.pending.write(data)

    def publish(self, expected: str) -> None:
        if self.summer.hexdigest() != expected:
            raise IntegrityError(f"upload of {self.path} arrived with checksum {self.summer.hexdigest()}, "
                                 f"the writer computed {expected}: not published")
        self.pending.publish()
        self.st.quota.arrived(self.token, (self.site, self.path))

    def discard(self) -> None:
        if self.pending is not None:
            self.pending.discard()
        self.st.quota.release(self.token, (self.site, self.path))


@router.post("/files/{site}/{path:path}", summary="Copy a container file here from another giod server",
             responses={200: {"description": "NDJSON: progress lines, then the outcome", "content": {
                 "application/x-ndjson": {}}}})
async def pull_file(request: Request, site: str, path: str) -> Response:
    """Third-party copy (see ``giod.server.routes.pull``): headers ``X-Giod-Source`` (the source site's URL),
    ``X-Giod-Size``, ``X-Giod-Checksum`` and, for the source, ``X-Giod-Source-Authorization``."""
    st = state(request)
    req = await to_thread.run_sync(_admit_pull, request, st, site, path)
    if "pull_slots" not in st.extra:
        st.extra["pull_slots"] = anyio.Semaphore(pull.SLOTS)
    slots = st.extra["pull_slots"]
    return StreamingResponse(pull.pull_lines(req, slots, lambda n: st.metrics.add("bytes_received", n)),
                             media_type="application/x-ndjson", headers={"cache-control": "no-store"})


def _admit_pull(request: Request, st: ServerState, site: str, path: str) -> pull.PullRequest:
    """The copy asked for, once its token, path and headers are checked (asks the catalog: run in a thread)."""
    _, full = _authorised(request, "write", site, path)
    expected = request.headers.get("x-giod-checksum")
    if not expected:
        raise IntegrityError("a copy needs the file's checksum in the X-Giod-Checksum header")
    size = pull.check_size(request.headers.get("x-giod-size"), st.limits.max_upload_bytes)
    source = request.headers.get("x-giod-source", "")
    auth = request.headers.get("x-giod-source-authorization", "")
    scheme, _, token = auth.partition(" ")
    if auth and (scheme.lower() != "bearer" or not token.strip()):
        raise DataError("X-Giod-Source-Authorization takes 'Bearer <token>'")
    return pull.PullRequest(st.federation.site(site), site, path, full, source, token.strip() or None, size,
                            expected)


@router.delete("/files/{site}/{path:path}", summary="Remove a file the catalog does not reference")
def delete_file(request: Request, site: str, path: str) -> dict[str, Any]:
    st = state(request)
    _, full = _authorised(request, "write", site, path)
    if path in st.federation.catalog.container_paths(site):
        raise ConflictError(f"file {path} is registered in the catalog: gc removes it once unreferenced")
    with contextlib.suppress(FileNotFoundError):
        st.federation.site(site).remove(path)
    return {"removed": path}
