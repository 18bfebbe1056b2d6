"""Container files: byte ranges (single and multi-range), HEAD, uploads for remote writers.

Paths are confined to the site's root: relative, no ``..``, no backslash or
NUL, and after symbolic links are resolved still inside the root. Files of a
dataset live under its name, which is what a dataset-restricted token is
checked against.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse

from giod.errors import ConflictError, DataError, IntegrityError, NotFound, StorageError, TooLarge
from giod.server.byteranges import RangeRefused, file_chunks, multipart, parse_range
from giod.server.routes import pull
from giod.server.state import ServerState, need, state
from giod.storage.checksum import Checksum
from giod.storage.site import LocalSite, check_relpath

router = APIRouter(tags=["files"])

CONTENT_TYPE = "application/vnd.apache.parquet"
ARROW_CONTENT_TYPE = "application/vnd.apache.arrow.file"  # the IANA name of Arrow's file format


def content_type(path: str) -> str:
    """The media type of a container file, by its name (giod names files after their format)."""
    return ARROW_CONTENT_TYPE if path.endswith(".arrow") else CONTENT_TYPE


def _dataset(path: str) -> str:
    return path.split("/", 1)[0]


def _root(st: ServerState, site: str) -> Path:
    s = st.federation.site(site)
    if not isinstance(s, LocalSite):
        raise NotFound(f"site {site} is not served by this server (it is not a local directory)")
    return s.root.resolve()


def _confined(st: ServerState, site: str, path: str) -> tuple[Path, Path]:
    try:
        check_relpath(path)
    except StorageError as exc:  # what the client asked for is malformed: 400, not a server fault (503)
        raise DataError(str(exc)) from exc
    root = _root(st, site)
    full = (root / path).resolve()
    if not full.is_relative_to(root):
        raise NotFound(f"file {path} not found on site {site}")  # a link out of the root: never followed
    return root, full


def _limit_headers(st: ServerState) -> dict[str, str]:
    lim = st.limits
    return {"accept-ranges": "bytes", "x-giod-max-ranges": str(lim.max_ranges),
            "x-giod-max-request-bytes": str(lim.max_request_bytes),
            "x-giod-max-upload-bytes": str(lim.max_upload_bytes)}


def _etag(st: ServerState, site: str, path: str, stat: os.stat_result) -> str:
    known = st.extra.setdefault("checksums", {})
    key = (site, path, stat.st_size, stat.st_mtime_ns)
    if key not in known:
        found = st.federation.catalog.checksum_of(path)
        known[key] = found or f"size{stat.st_size}-mtime{stat.st_mtime_ns}"
    return f'"{known[key]}"'


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


def _stream(st: ServerState, fd: int, chunks: Iterator[bytes]) -> Iterator[bytes]:
    st.metrics.add("open_files", 1)
    try:
        for c in chunks:
            st.metrics.add("bytes_sent", len(c))
            yield c
    finally:
        st.metrics.add("open_files", -1)
        os.close(fd)


@router.head("/files/{site}/{path:path}", summary="Size, ETag (the checksum) and the server's range bounds")
def head_file(request: Request, site: str, path: str) -> Response:
    need(request, "read", _dataset(path))
    st = state(request)
    _, full = _confined(st, site, path)
    fd, info = _open(full, path, site)
    os.close(fd)
    headers = _limit_headers(st) | {"content-length": str(info.st_size), "etag": _etag(st, site, path, info)}
    return Response(status_code=200, headers=headers, media_type=content_type(path))


@router.get("/files/{site}/{path:path}", summary="A container file, whole or in byte ranges",
            responses={206: {"description": "the asked ranges"}, 413: {"description": "over the bounds"},
                       416: {"description": "no range within the file"}})
def get_file(request: Request, site: str, path: str) -> Response:
    need(request, "read", _dataset(path))
    st = state(request)
    _, full = _confined(st, site, path)
    fd, info = _open(full, path, site)
    size = info.st_size
    try:
        headers = _limit_headers(st) | {"etag": _etag(st, site, path, info)}
        header = request.headers.get("range")
        if header is None:
            headers["content-length"] = str(size)
            return StreamingResponse(_stream(st, fd, file_chunks(fd, 0, size)), headers=headers,
                                     media_type=content_type(path))
        ranges = parse_range(header, size, max_ranges=st.limits.max_ranges,
                             max_bytes=st.limits.max_request_bytes)
    except RangeRefused as exc:
        os.close(fd)
        extra = {"content-range": f"bytes */{size}"} if exc.status == 416 else {}
        return _refusal(exc.status, exc.message, _limit_headers(st) | extra)
    except BaseException:
        os.close(fd)
        raise
    if len(ranges) == 1:
        a, b = ranges[0]
        headers |= {"content-range": f"bytes {a}-{b - 1}/{size}", "content-length": str(b - a)}
        return StreamingResponse(_stream(st, fd, file_chunks(fd, a, b)), status_code=206, headers=headers,
                                 media_type=content_type(path))
    boundary, length, body = multipart(fd, ranges, size, content_type(path))
    headers["content-length"] = str(length)
    return StreamingResponse(_stream(st, fd, body), status_code=206, headers=headers,
                             media_type=f"multipart/byteranges; boundary={boundary}")


def _refusal(status: int, message: str, headers: dict[str, str]) -> Response:
    import json

    kind = {400: "DataError", 413: "TooLarge"}.get(status, "StorageError")
    return Response(json.dumps({"error": kind, "message": message}), status_code=status, headers=headers,
                    media_type="application/json")


@router.put("/files/{site}/{path:path}", summary="Upload a container file (published only if its checksum holds)",
            status_code=201)
async def put_file(request: Request, site: str, path: str) -> dict[str, Any]:
    need(request, "write", _dataset(path))
    st = state(request)
    _, full = _confined(st, site, path)
    expected = request.headers.get("x-giod-checksum")
    if not expected:
        raise IntegrityError("an upload needs its checksum in the X-Giod-Checksum header")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > st.limits.max_upload_bytes:
        raise TooLarge(f"upload of {declared} bytes refused: at most {st.limits.max_upload_bytes}")
    if full.exists():
        # files are immutable once published: a retried upload of the same bytes is fine
        return pull.same_file(full, path, expected)
    target = st.federation.site(site)
    pending = target.create(path)
    summer = Checksum()
    try:
        async for chunk in request.stream():
            summer.update(chunk)
            if summer.size > st.limits.max_upload_bytes:
                raise TooLarge(f"upload larger than {st.limits.max_upload_bytes} bytes refused")
            pending.write(chunk)
        st.metrics.add("bytes_received", summer.size)
        if summer.hexdigest() != expected:
            raise IntegrityError(f"upload of {path} arrived with checksum {summer.hexdigest()}, "
                                 f"the writer computed {expected}: not published")
        pending.publish()
    except BaseException:
        pending.discard()
        raise
    return {"path": path, "size": summer.size, "checksum": expected}


@router.post("/files/{site}/{path:path}", summary="Copy a container file here from another giod server",
             responses={200: {"description": "NDJSON: progress lines, then the outcome", "content": {
                 "application/x-ndjson": {}}}})
async def pull_file(request: Request, site: str, path: str) -> Response:
    """Third-party copy (see ``giod.server.routes.pull``): headers ``X-Giod-Source`` (the source site's URL),
    ``X-Giod-Size``, ``X-Giod-Checksum`` and, for the source, ``X-Giod-Source-Authorization``."""
    need(request, "write", _dataset(path))
    st = state(request)
    _, full = _confined(st, site, path)
    expected = request.headers.get("x-giod-checksum")
    if not expected:
        raise IntegrityError("a copy needs the file's checksum in the X-Giod-Checksum header")
    size = pull.check_size(request.headers.get("x-giod-size"), st.limits.max_upload_bytes)
    source = request.headers.get("x-giod-source", "")
    auth = request.headers.get("x-giod-source-authorization", "")
    scheme, _, token = auth.partition(" ")
    if auth and (scheme.lower() != "bearer" or not token.strip()):
        raise DataError("X-Giod-Source-Authorization takes 'Bearer <token>'")
    req = pull.PullRequest(st.federation.site(site), site, path, full, source, token.strip() or None, size,
                           expected)
    if "pull_slots" not in st.extra:
        import anyio

        st.extra["pull_slots"] = anyio.Semaphore(pull.SLOTS)
    slots = st.extra["pull_slots"]
    return StreamingResponse(pull.pull_lines(req, slots, lambda n: st.metrics.add("bytes_received", n)),
                             media_type="application/x-ndjson", headers={"cache-control": "no-store"})


@router.delete("/files/{site}/{path:path}", summary="Remove a file the catalog does not reference")
def delete_file(request: Request, site: str, path: str) -> dict[str, Any]:
    need(request, "write", _dataset(path))
    st = state(request)
    _, full = _confined(st, site, path)
    if path in st.federation.catalog.container_paths(site):
        raise ConflictError(f"file {path} is registered in the catalog: gc removes it once unreferenced")
    with contextlib.suppress(FileNotFoundError):
        st.federation.site(site).remove(path)
    return {"removed": path}
