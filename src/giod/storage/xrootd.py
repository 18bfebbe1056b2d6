"""``root://`` sites: container files on an XRootD server (EOS, dCache, a plain ``xrootd``).

The kind speaks the XRootD protocol through its own client library (the
``XRootD`` Python bindings, brought by ``fsspec-xrootd``) rather than through
fsspec, so that it can use what the protocol offers:

- many ranges of one file in one request (``kXR_readv``), all requests in
  flight at once: a projection's column ranges cost one round trip, not one
  per range;
- a window of reads in flight ahead of a sequential reader (a copy, a
  checksum), so a whole file streams at the link's rate, not one piece per
  round trip;
- the server's own checksum (``kXR_Qcksum``, CRC-32C where the server is
  configured with ``xrootd.chksum crc32c``): an upload is checked where it
  landed before it is published, and a replica is verified without its bytes
  crossing the network;
- third-party copies between two XRootD servers (``ofs.tpc``): the
  destination's server fetches the file from the source's itself.

A file is written under a temporary name and renamed into place only after
the server confirmed its checksum (or, from a server without checksums, after
it was read back), so a reader never sees a partial or damaged file.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, cast
from urllib.parse import urlsplit

from giod import config
from giod.errors import ConfigError, ConflictError, IntegrityError, MissingDependency, NotFound, StorageError
from giod.storage.checksum import ALGORITHM, Checksum
from giod.storage.kind import FileInfo, RangeFile, Site, SiteHealth, check_relpath
from giod.storage.pending import TMP_MARK, PendingFile

__all__ = ["XRootDFile", "XRootDSite", "available"]

#: bytes of one range in a vectored read (the protocol refuses a range of 2 MiB)
READV_RANGE = 1 << 20
#: ranges (and bytes) of one vectored read request
READV_COUNT = 1024
READV_BYTES = 16 << 20
#: a sequential reader has this many bytes in flight ahead of it, in pieces of READ_PIECE
READ_AHEAD = 64 << 20
READ_PIECE = 8 << 20
#: writes in flight while a file is uploaded
WRITES_IN_FLIGHT = 8
TIMEOUT = 300  # seconds one request may take
HEALTH_TIMEOUT = 10  # seconds a health check waits (a server refusing connections is retried until then)
#: a checksum query may take CHECKSUM_SECONDS, plus a second per CHECKSUM_RATE bytes of the file; past
#: that the bytes are read instead (a server's checksum job can fail, or never answer, for one file)
CHECKSUM_SECONDS = 30
CHECKSUM_RATE = 20 << 20
TPC_TRIES = 2  # tries of a third-party copy before it goes through this process (or fails, if that is refused)

log = logging.getLogger("giod.storage")
#: bytes read from the end of an announced file with its opening (where a container keeps its footer)
TAIL = 64 << 10

_NOT_FOUND = 3011  # kXR_NotFound
_UNSUPPORTED = 3013  # kXR_Unsupported: the server has no checksum configured
_HEX = re.compile(r"[0-9a-fA-F]{1,8}")
_EXISTS = 3018  # kXR_ItExists


def available() -> str | None:
    """Why the XRootD client cannot be used here, or None when it can."""
    try:
        from XRootD import client  # noqa: F401
    except ImportError as exc:
        return f"the XRootD client is not installed (pip install xrootd, or fsspec-xrootd): {exc}"
    return None


def _client() -> Any:
    try:
        from XRootD import client
    except ImportError as exc:
        raise MissingDependency(f"root:// sites need the XRootD client, which is not installed: "
                                f"pip install xrootd ({exc})") from exc
    # the client checks its requests' timeouts every 15 s by default: a health check of 10 s took 15, and a
    # checksum query of 30 s took 45 (the client keeps XRD_TIMEOUTRESOLUTION, when set: the user's)
    cast(Any, client).EnvPutInt("TimeoutResolution", 1)
    return client


class _Waiter:
    """The answer of one asynchronous request, waited for by the caller."""

    __slots__ = ("_done", "response", "status")

    def __init__(self) -> None:
        self._done = threading.Event()
        self.status: Any = None
        self.response: Any = None

    def __call__(self, status: Any, response: Any, hosts: Any = None) -> None:
        self.status, self.response = status, response
        self._done.set()

    def wait(self) -> tuple[Any, Any]:
        if not self._done.wait(TIMEOUT + 30):
            raise StorageError("an XRootD request got no answer")
        return self.status, self.response


class XRootDSite(Site):
    """A directory on an XRootD server, at ``root://host[:port]//path`` (or ``roots://`` with TLS)."""

    networked = True
    checks_uploads = True  # by the server's checksum where it has one, else by reading back, before publishing
    replaces_on_publish = True  # a rename over a file replaces it

    def __init__(self, name: str, url: str):
        super().__init__(name, url)
        parts = urlsplit(url)
        if parts.scheme not in ("root", "roots", "xroot", "xroots") or not parts.hostname:
            raise ConfigError(f"site {name}: {url!r} is not a root://HOST[:PORT]//PATH URL")
        self.server = f"{parts.scheme}://{parts.netloc}"
        root = parts.path
        while root.startswith("//"):
            root = root[1:]
        self.root = "/" + root.strip("/") if root.strip("/") else ""
        self._client = _client()
        self.fs = self._client.FileSystem(self.server)
        self._sizes: dict[str, int] = {}
        self._prepared: dict[str, _Prepared] = {}  # files announced, opened (and their tails read) ahead
        self._lock = threading.Lock()
        self._algorithm: str | None = ""  # "" until asked: the server's checksum, None when it has none
        # what passed through this client: files opened for reading, bytes received, vectored read requests
        self.opened = self.received = self.vector_reads = 0
        # third-party copies to this site that failed (each try), and copies that went through this process
        # instead; with ``third_party_fallback`` off, the copy fails with the server's reason
        self.third_party_failures = self.through_here = 0
        self.third_party_fallback = bool(config.load()["third_party_fallback"])

    # ------------------------------------------------------------- paths and errors

    def _full(self, path: str) -> str:
        return f"{self.root}/{check_relpath(path)}"

    def file_url(self, path: str) -> str:
        """The ``root://`` URL of ``path`` (what another server fetches in a third-party copy)."""
        return f"{self.server}/{self._full(path)}"

    def _check(self, status: Any, what: str, path: str) -> None:
        if status.ok:
            return
        if status.errno == _NOT_FOUND:
            raise NotFound(f"file {path} is missing on site {self.name}")
        raise StorageError(f"site {self.name}: {what} {path or 'its root'}: {status.message.strip()}")

    # ------------------------------------------------------------- reading

    def open(self, path: str) -> BinaryIO:
        full = self._full(path)
        self.opened += 1
        with self._lock:
            prepared = self._prepared.pop(path, None)
        if prepared is not None:
            status, _ = prepared.opening.wait()
            prepared.ready.wait(TIMEOUT)
            if status.ok:
                return XRootDFile(self, path, prepared.file, prepared.size, prepared.tail)  # type: ignore[return-value]
            _close_later(prepared.file)  # opened too early, or failed: try again now, and say why
        f = self._client.File()
        status, _ = f.open(self.server + "/" + full, timeout=TIMEOUT)
        self._check(status, "cannot open", path)
        size = self._sizes.get(path)
        if size is None:
            status, info = f.stat(timeout=TIMEOUT)
            self._check(status, "cannot stat", path)
            size = int(info.size)
        return XRootDFile(self, path, f, size)  # type: ignore[return-value]

    def size(self, path: str) -> int:
        known = self._sizes.get(path)
        if known is not None:
            return known
        status, info = self.fs.stat(self._full(path), timeout=TIMEOUT)
        self._check(status, "cannot stat", path)
        return int(info.size)

    def prefetch(self, items: Sequence[tuple[str, int, Sequence[str] | None]]) -> None:
        """Open the announced files now, all at once, and read the tail of each (its footer) as it opens:
        a reader then waits for none of these round trips, only for the ranges of its columns."""
        fresh = []
        with self._lock:
            for path, size, _columns in items:
                self._sizes[path] = size
                if path not in self._prepared:
                    fresh.append(self._prepared.setdefault(path, _Prepared(self, path, size)))
        if fresh:
            threading.Thread(target=_read_tails, args=(fresh,), daemon=True, name="giod-xrootd-tails").start()

    def release(self, path: str) -> None:
        with self._lock:
            prepared = self._prepared.pop(path, None)
        if prepared is not None:
            _close_later(prepared.file)

    def expect_size(self, path: str, size: int) -> None:
        self._sizes[path] = size

    def forget(self, path: str) -> None:
        self._sizes.pop(path, None)

    # ------------------------------------------------------------- writing, listing, removing

    def create(self, path: str, *, direct: bool = False) -> PendingFile:
        return _XRootDPending(self, check_relpath(path))

    def remove(self, path: str) -> None:
        full = self._full(path)
        self._sizes.pop(path, None)
        status, _ = self.fs.rm(full, timeout=TIMEOUT)
        if not status.ok and status.errno != _NOT_FOUND:
            raise StorageError(f"cannot remove {path} on site {self.name}: {status.message.strip()}")
        # drop directories left empty, up to the root (a directory that still holds files refuses)
        parent = posixpath.dirname(full)
        while len(parent) > len(self.root) and parent.startswith(self.root + "/"):
            status, _ = self.fs.rmdir(parent, timeout=TIMEOUT)
            if not status.ok:
                break
            parent = posixpath.dirname(parent)

    def walk(self) -> Iterator[FileInfo]:
        flags = self._client.flags.DirListFlags
        status, listing = self.fs.dirlist(self.root or "/", flags.STAT | flags.RECURSIVE, timeout=TIMEOUT)
        if not status.ok:
            if status.errno == _NOT_FOUND:
                return
            raise StorageError(f"site {self.name} cannot be listed: {status.message.strip()}")
        for entry in listing:
            info = entry.statinfo
            if info is None or info.flags & self._client.flags.StatInfoFlags.IS_DIR:
                continue
            yield FileInfo(entry.name.lstrip("/"), int(info.size), float(info.modtime))

    # ------------------------------------------------------------- abilities

    def health(self) -> SiteHealth:
        status, _ = self.fs.stat(self.root or "/", timeout=HEALTH_TIMEOUT)
        if not status.ok:
            if status.errno == _NOT_FOUND:
                return SiteHealth(True, "empty (directory not created yet)")
            return SiteHealth(False, status.message.strip())
        free = total = None
        status, answer = self.fs.query(self._client.flags.QueryCode.SPACE, self.root or "/", timeout=HEALTH_TIMEOUT)
        if status.ok and isinstance(answer, bytes):
            with contextlib.suppress(KeyError, ValueError):  # an answer not as documented: space unknown
                text = answer.rstrip(b"\0").decode("ascii")
                fields = dict(p.split("=", 1) for p in text.split("&") if "=" in p)
                free, total = int(fields["oss.free"]), int(fields["oss.space"])
                if not 0 <= free <= total < 1 << 80:
                    free = total = None
        return SiteHealth(True, "", free, total)

    def server_checksum(self, path: str, size: int = 0) -> str | None:
        """The file's CRC-32C as the server computes it (``crc32c:xxxxxxxx``); None when it offers no CRC-32C,
        or gave none for this file in time (said in the log): the caller reads the bytes instead.

        The bytes do not cross the network; NotFound when the file is missing.
        """
        value, why = self._checksum(path, size)
        if value is None and self._algorithm is not None:  # this file's failure, not the site's lack
            log.warning("%s; its bytes are read instead", why)
        return value

    def _checksum(self, path: str, size: int) -> tuple[str | None, str]:
        """``(checksum, "")``, or ``(None, why)`` (see :meth:`server_checksum`; the caller says why)."""
        none = f"site {self.name} computes no checksum to check a copy with"
        if self._algorithm is None:
            return None, none
        timeout = CHECKSUM_SECONDS + max(0, size) // CHECKSUM_RATE
        status, answer = self.fs.query(self._client.flags.QueryCode.CHECKSUM, self._full(path), timeout=timeout)
        if not status.ok:
            if status.errno == _NOT_FOUND:
                raise NotFound(f"file {path} is missing on site {self.name}")
            if status.errno == _UNSUPPORTED:  # no checksum configured: never ask again
                self._algorithm = None
                return None, none
            return self._no_checksum(path, (status.message or "").strip() or f"error {status.errno}")
        try:
            if not isinstance(answer, bytes):
                raise TypeError(type(answer).__name__)
            algorithm, _, value = answer.rstrip(b"\0").decode("ascii").partition(" ")
        except (TypeError, UnicodeDecodeError):
            return self._no_checksum(path, f"an answer that is not text: {repr(answer)[:60]}")
        if algorithm.lower() != ALGORITHM:
            self._algorithm = None
            return None, none
        if not _HEX.fullmatch(value):
            return self._no_checksum(path, f"a {ALGORITHM} that is not 1 to 8 hex digits: {value[:40]!r}")
        self._algorithm = algorithm
        return f"{ALGORITHM}:{int(value, 16):08x}", ""

    def _no_checksum(self, path: str, reason: str) -> tuple[None, str]:
        return None, f"site {self.name} gave no checksum of {path}: {reason}"

    def read_checksum(self, path: str) -> str:
        """The file's CRC-32C computed here, from its bytes read through this client."""
        with self.open(path) as fh:
            summer = Checksum()
            while block := fh.read(READ_PIECE):
                summer.update(block)
        return summer.hexdigest()

    def pull(self, source: Site, path: str, size: int, checksum: str,
             advance: Callable[[int], None] | None = None) -> str | None:
        """Have this server fetch ``path`` from another XRootD server itself (a third-party copy).

        The copy lands under a temporary name and is renamed into place only
        when this server's checksum of it is ``checksum``. ``"copied"`` or
        ``"adopted"`` (the right file was already there); None when the source
        is not an XRootD server, or when one of the servers cannot copy (no
        ``ofs.tpc``, no checksums) or the copy failed ``TPC_TRIES`` times: the
        bytes must then pass through the caller. That fallback is logged as a
        warning with the servers' reason and counted (``through_here``); with
        the setting ``third_party_fallback`` off it is refused: StorageError,
        with the reason. ConflictError when another file is at ``path``.
        """
        if not isinstance(source, XRootDSite):
            return None
        try:
            found, why = self._checksum(path, size)
        except NotFound:
            found, why = "", ""
        if found is None:
            self._through_here(source, path, why)
            return None
        if found:
            if found == checksum and self.size(path) == size:
                return "adopted"
            raise ConflictError(f"another file is at {path} on site {self.name} ({found}, expected {checksum})")
        why = ""
        for _ in range(TPC_TRIES):
            tmp = _temporary(path)
            status = self._third_party(source.file_url(path), tmp)
            if status.ok:
                break
            with contextlib.suppress(*_QUIET):
                self.remove(tmp)
            if status.errno == _NOT_FOUND:
                raise NotFound(f"file {path} is missing on site {source.name}")
            with self._lock:
                self.third_party_failures += 1
            why = (status.message or "").strip() or f"error {status.errno}"
        else:
            self._through_here(source, path, f"the third-party copy failed ({TPC_TRIES} tries): {why}")
            return None
        try:
            landed = self.server_checksum(tmp, size) or self.read_checksum(tmp)
            n = self.size(tmp)
            if landed != checksum or n != size:
                raise IntegrityError(f"{path} copied from site {source.name} to site {self.name} arrived as {n} "
                                     f"bytes with {landed}, the catalog recorded {size} bytes with {checksum}")
            self._rename(tmp, path)
        except BaseException:
            with contextlib.suppress(*_QUIET):
                self.remove(tmp)
            raise
        if advance is not None:
            advance(size)
        return "copied"

    def _third_party(self, source_url: str, tmp: str) -> Any:
        """One third-party copy of ``source_url`` to ``tmp`` on this server: its status."""
        process = self._client.CopyProcess()
        process.add_job(source_url, self.file_url(tmp), thirdparty="only", mkdir=True, force=True)
        status = process.prepare()
        if status.ok:
            status, results = process.run()
            if status.ok and results and not results[0]["status"].ok:
                status = results[0]["status"]
        return status

    def _through_here(self, source: XRootDSite, path: str, why: str) -> None:
        """A copy from ``source`` that must pass through this process: said, counted, or refused."""
        if not self.third_party_fallback:
            raise StorageError(f"{path} from site {source.name} to site {self.name}: {why}; a copy through this "
                               "process is refused (setting third_party_fallback)")
        with self._lock:
            self.through_here += 1
        log.warning("%s from site %s to site %s goes through this process: %s", path, source.name, self.name, why)

    def _rename(self, tmp: str, path: str) -> None:
        status, _ = self.fs.mv(self._full(tmp), self._full(path), timeout=TIMEOUT)
        self._check(status, "cannot publish", path)
        self._sizes.pop(path, None)


_QUIET = (StorageError, NotFound, OSError)  # what a clean-up after a failure may meet


def _temporary(path: str) -> str:
    return posixpath.join(posixpath.dirname(path), f".{posixpath.basename(path)}{TMP_MARK}{uuid.uuid4().hex}")


class XRootDFile(RangeFile):
    """A seekable read-only view of a file on an XRootD server.

    ``read_many`` fetches many ranges with vectored reads, all in flight at
    once; a sequential reader gets a window of reads in flight ahead of it.
    """

    def __init__(self, site: XRootDSite, path: str, handle: Any, size: int,
                 tail: tuple[int, _Waiter] | None = None):
        super().__init__()
        self.site, self.path, self.size, self.name = site, path, size, site.file_url(path)
        self._f = handle
        self._tail = tail  # (where it starts, its read) of a tail read when the file was announced
        self._tail_counted = False
        self._pos = 0
        self._ahead: dict[int, tuple[int, _Waiter]] = {}  # offset -> (length, its read in flight)
        self._next = 0  # where the window of reads ahead ends

    def _fail(self, status: Any, what: str) -> None:
        raise StorageError(f"site {self.site.name}: {what} {self.path}: {status.message.strip()}")

    def _from_tail(self, start: int, stop: int) -> bytes | None:
        """Bytes ``start:stop`` from the tail read ahead, when they lie in it."""
        if self._tail is None or start < self._tail[0]:
            return None
        status, data = self._tail[1].wait()
        if not status.ok or stop - self._tail[0] > len(data):
            return None
        if not self._tail_counted:
            self.site.received += len(data)
            self._tail_counted = True
        return bytes(data[start - self._tail[0]:stop - self._tail[0]])

    def _read_at(self, start: int, stop: int) -> bytes:
        tail = self._from_tail(start, stop)
        if tail is not None:
            return tail
        status, data = self._f.read(start, stop - start, timeout=TIMEOUT)
        if not status.ok:
            self._fail(status, "cannot read")
        self.site.received += len(data)
        return bytes(data)

    def read(self, n: int | None = -1) -> bytes:
        stop = self.size if n is None or n < 0 else min(self.size, self._pos + n)
        start = self._pos
        if stop <= start:
            return b""
        if stop - start >= READ_PIECE // 2 or start in self._ahead:
            data = self._sequential(start, stop)
        else:
            data = self._read_at(start, stop)
        if len(data) != stop - start:
            raise IntegrityError(f"{self.path} on site {self.site.name}: {len(data)} bytes read of "
                                 f"{stop - start} (truncated?)")
        self._pos = stop
        return data

    def _sequential(self, start: int, stop: int) -> bytes:
        """Bytes ``start:stop`` of a reader going forward, from (and keeping full) a window of reads ahead."""
        if start not in self._ahead:
            self._drop_ahead()
            self._next = start
        parts: list[bytes] = []
        at = start
        while at < stop:
            self._fill(at)
            length, waiter = self._ahead.pop(at)
            status, data = waiter.wait()
            if not status.ok:
                self._drop_ahead()
                self._fail(status, "cannot read")
            data = bytes(data)
            self.site.received += len(data)
            if len(data) != length:
                raise IntegrityError(f"{self.path} on site {self.site.name}: {len(data)} bytes read of {length}")
            end = at + length
            if end > stop:  # the rest waits for the next read, as the head of the window
                self._ahead[stop] = (end - stop, _done(data[stop - at:]))
                data = data[: stop - at]
                end = stop
            parts.append(data)
            at = end
        self._fill(stop)
        return b"".join(parts)

    def _fill(self, at: int) -> None:
        while self._next < min(self.size, at + READ_AHEAD):
            length = min(READ_PIECE, self.size - self._next)
            waiter = _Waiter()
            status = self._f.read(self._next, length, timeout=TIMEOUT, callback=waiter)
            if not status.ok:
                self._fail(status, "cannot read")
            _keep(self._f, waiter)
            self._ahead[self._next] = (length, waiter)
            self._next += length

    def _drop_ahead(self) -> None:
        for _length, waiter in self._ahead.values():
            with contextlib.suppress(StorageError):
                waiter.wait()  # the handle must not close under a read in flight
        self._ahead.clear()

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, b: Any) -> int:
        data = self.read(len(memoryview(b).cast("B")))
        memoryview(b).cast("B")[: len(data)] = data
        return len(data)

    def read_many(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Several ranges of the file, in vectored reads all in flight at once."""
        for a, b in ranges:
            if not 0 <= a <= b <= self.size:
                raise IntegrityError(f"{self.path} on site {self.site.name}: range {a}-{b} outside the file "
                                     f"of {self.size} bytes")
        known = {(a, b): self._from_tail(a, b) for a, b in ranges}
        ranges_left = [r for r in ranges if known[r] is None]
        # each range in pieces the protocol takes, the pieces in requests of bounded count and bytes
        pieces = [(a, min(b, a + READV_RANGE)) for start, b in ranges_left for a in range(start, b, READV_RANGE)]
        requests: list[list[tuple[int, int]]] = [[]]
        held = 0
        for a, b in pieces:
            if requests[-1] and (len(requests[-1]) >= READV_COUNT or held + (b - a) > READV_BYTES):
                requests.append([])
                held = 0
            requests[-1].append((a, b))
            held += b - a
        waiters = []
        for req in requests:
            if not req:
                continue
            waiter = _Waiter()
            status = self._f.vector_read([(a, b - a) for a, b in req], timeout=TIMEOUT, callback=waiter)
            if not status.ok:
                self._fail(status, "cannot read")
            _keep(self._f, waiter)
            waiters.append(waiter)
        got: dict[tuple[int, int], bytes] = {}
        for waiter in waiters:
            status, answer = waiter.wait()
            if not status.ok:
                self._fail(status, "cannot read")
            self.site.vector_reads += 1
            self.site.received += int(answer.size)
            for chunk in answer.chunks:
                got[(chunk.offset, chunk.offset + chunk.length)] = bytes(chunk.buffer)
        out = []
        for start, b in ranges:
            tail = known[(start, b)]
            if tail is not None:
                out.append(tail)
                continue
            data = b"".join(got[(a, min(b, a + READV_RANGE))] for a in range(start, b, READV_RANGE))
            if len(data) != b - start:
                raise IntegrityError(f"{self.path} on site {self.site.name}: {len(data)} bytes read of "
                                     f"{b - start} (truncated?)")
            out.append(data)
        return out

    def close(self) -> None:
        if not self.closed:
            self._drop_ahead()
            if self._tail is not None:
                self._tail[1].wait()  # the handle must not close under a read in flight
            _close_later(self._f)  # nobody waits for the server's answer
        super().close()


class _Prepared:
    """A file announced to be read: its opening in flight, then the read of its tail."""

    def __init__(self, site: XRootDSite, path: str, size: int):
        self.size = size
        self.file = site._client.File()
        self.opening = _Waiter()
        self.tail: tuple[int, _Waiter] | None = None
        self.ready = threading.Event()  # set once its tail read was asked for (or will not be)
        status = self.file.open(site.file_url(path), timeout=TIMEOUT, callback=self.opening)
        if not status.ok:
            self.opening(status, None)
        else:
            _keep(self.file, self.opening)


def _read_tails(prepared: Sequence[_Prepared]) -> None:
    """Read the tail of each announced file as soon as it is open (all reads in flight at once)."""
    for p in prepared:
        try:
            status, _ = p.opening.wait()
            if not status.ok or p.size == 0:
                continue
            start = max(0, p.size - TAIL)
            waiter = _Waiter()
            if p.file.read(start, p.size - start, timeout=TIMEOUT, callback=waiter).ok:
                _keep(p.file, waiter)
                p.tail = (start, waiter)
        except Exception:  # noqa: BLE001, S112 - the reader reads the tail itself and reports the problem
            continue
        finally:
            p.ready.set()


# Every file handle with a request in flight (an open, a read, a write, a close) is kept here until the
# server answered: the XRootD client answers on its own threads, and a handle freed before that (a
# site collected with files announced, a reader dropped with reads ahead) would be answered freed.
_in_flight: list[tuple[Any, _Waiter]] = []
_in_flight_lock = threading.Lock()


def _keep(handle: Any, waiter: _Waiter) -> None:
    """Hold ``handle`` until ``waiter`` has its answer."""
    with _in_flight_lock:
        _in_flight[:] = [(f, w) for f, w in _in_flight if not w._done.is_set()]
        _in_flight.append((handle, waiter))


def _close_later(handle: Any) -> None:
    """Close a file without waiting for the answer (a round trip nobody needs)."""
    waiter = _Waiter()
    try:
        if not handle.close(timeout=TIMEOUT, callback=waiter).ok:
            return  # not open (its opening may still be in flight: _keep holds it until answered)
    except Exception:  # noqa: BLE001 - a handle that was never opened
        return
    _keep(handle, waiter)


def _done(data: bytes) -> _Waiter:
    waiter = _Waiter()
    waiter(_OK, data)
    return waiter


class _Ok:
    ok = True
    message = ""


_OK = _Ok()


class _XRootDPending(PendingFile):
    """Written under a temporary name with writes in flight, checked where it landed, then renamed into place."""

    def __init__(self, site: XRootDSite, path: str):
        self.path = path
        self._site = site
        self._tmp = _temporary(path)
        self._sum = Checksum()
        flags = site._client.flags.OpenFlags
        self._f: Any = site._client.File()
        status, _ = self._f.open(site.file_url(self._tmp), flags.NEW | flags.MAKEPATH, timeout=TIMEOUT)
        if not status.ok:
            raise StorageError(f"cannot create {path} on site {site.name}: {status.message.strip()}")
        self._open = True
        self._flight: list[_Waiter] = []

    def write(self, data: bytes | memoryview) -> int:
        if not self._open:
            raise StorageError(f"{self.path}: already published or discarded")
        block = data if isinstance(data, bytes) else bytes(data)
        if not block:
            return 0
        waiter = _Waiter()
        waiter.response = block  # the client reads the bytes while the write is in flight: keep them alive
        status = self._f.write(block, self._sum.size, timeout=TIMEOUT, callback=waiter)
        if not status.ok:
            raise StorageError(f"cannot write {self.path} on site {self._site.name}: {status.message.strip()}")
        _keep(self._f, waiter)
        self._sum.update(block)
        self._flight.append(waiter)
        if len(self._flight) >= WRITES_IN_FLIGHT:
            self._settle(self._flight.pop(0))
        return len(block)

    def _settle(self, waiter: _Waiter) -> None:
        status, _ = waiter.wait()
        if not status.ok:
            raise StorageError(f"cannot write {self.path} on site {self._site.name}: {status.message.strip()}")

    def publish(self) -> None:
        if not self._open:
            raise StorageError(f"{self.path}: already published or discarded")
        site = self._site
        try:
            while self._flight:
                self._settle(self._flight.pop(0))
            status, _ = self._f.sync(timeout=TIMEOUT)
            if status.ok:
                status, _ = self._f.close(timeout=TIMEOUT)
            self._open = False
            if not status.ok:
                raise StorageError(f"cannot write {self.path} on site {site.name}: {status.message.strip()}")
            expected = self._sum.hexdigest()
            # a server without CRC-32C (or none for this file): read the bytes back
            landed = site.server_checksum(self._tmp, self._sum.size) or site.read_checksum(self._tmp)
            if landed != expected:
                raise IntegrityError(f"{self.path} landed on site {site.name} with {landed}, written with {expected}: "
                                     "not published")
            site._rename(self._tmp, self.path)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        if self._open:
            self._open = False
            for waiter in self._flight:
                with contextlib.suppress(StorageError):
                    waiter.wait()
            self._flight.clear()
            with contextlib.suppress(Exception):
                self._f.close(timeout=TIMEOUT)
        with contextlib.suppress(*_QUIET):
            self._site.remove(self._tmp)
