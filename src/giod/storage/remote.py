"""Remote sites: container files read and written through a giod server.

A site served by ``giod serve`` at ``http://host:port`` is reached under
``http://host:port/files/<site>/<path>``. Reads never wait one round trip per
page: a selection tells the site what it will read (:meth:`RemoteSite.prefetch`),
the :class:`~giod.storage.ranges.ReadScheduler` keeps many range requests in
flight in reading order, and the file objects handed to pyarrow answer from
what arrived. Anything not announced is fetched on demand, with the server's
bounds (ranges per request, bytes per request) respected.

The connection to the server (pool, token, bounds, typed errors) is the
server's :class:`~giod.storage.http.Endpoint`, shared with the remote catalog.
"""

from __future__ import annotations

import json
import logging
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError, ThreadPoolExecutor
from typing import Any, BinaryIO
from urllib.parse import quote, unquote, urlencode, urlsplit

from giod import config
from giod.errors import AuthError, ConfigError, GiodError, IntegrityError, NotFound, StorageError
from giod.storage.checksum import Checksum
from giod.storage.footers import TAIL, parquet_column_ranges, remote_footer
from giod.storage.formats.arrow.plan import Footer, projected
from giod.storage.http import TOKEN_ENV, Endpoint, Landed, Limits, connect, endpoint_for, error_from, site_token_env
from giod.storage.kind import FileInfo, RangeFile, Site, SiteHealth, check_relpath
from giod.storage.multipart import content_range, parse_multipart
from giod.storage.pending import PendingFile
from giod.storage.ranges import ReadScheduler

# the endpoint's names stay importable from here, where the remote site uses them
__all__ = ["TOKEN_ENV", "Endpoint", "Limits", "RemoteFile", "RemoteSite", "connect", "endpoint_for",
           "site_token_env"]

PLAN_WAIT = 120.0  # seconds a read waits for its file's column plan (its footer's round trip)
WHOLE_PIECE = 32 << 20  # the largest piece of a file read whole (one request, no join of pieces)
KEPT_TAILS = 256  # footers of files read on demand kept per site (at most TAIL bytes each)
SMALL_RANGE = 256 << 10  # ranges up to this size are batched into multi-range requests
#: buffers of an Arrow batch this close travel as one range: the padding between one column's buffers (< 64
#: bytes), never a whole buffer of a column not read
BUFFER_GAP = 64
#: the longest round trip (seconds) at which dense reads are gathered: beyond it the link, not a copy, is what a
#: read waits for, and the round trip the layout costs first would show (docs/decisions.md)
GATHER_RTT = 0.020
#: files one request for heads names (``POST /files/<site>``; the server takes up to 256): a few requests in
#: flight for many files, each answer a few MB at most (a file's tail and metadata are ~64 KiB)
HEADS_PER_REQUEST = 32
HEADS_CONTENT_TYPE = "application/vnd.giod.heads"

log = logging.getLogger("giod.remote")


class RemoteSite(Site):
    """A site of a giod server, at ``http(s)://host:port/files/<site>``."""

    networked = True
    checks_uploads = True  # the server checks X-Giod-Checksum before it publishes
    replaces_on_publish = False  # a giod server never overwrites a file

    def __init__(self, name: str, url: str):
        super().__init__(name, url)
        parts = urlsplit(url)
        prefix = parts.path.rstrip("/")
        if not prefix.startswith("/files/") or prefix.count("/") != 2:
            raise ConfigError(f"site {name}: {url!r} is not a giod server site (…/files/<site>)")
        # a token for this site alone (GIOD_TOKEN_<NAME>) gets its own connections
        token = config.token(name, fallback=False)
        self.endpoint = Endpoint(url, token) if token else endpoint_for(url)
        self.prefix = prefix
        self.remote_name = unquote(prefix.rsplit("/", 1)[1])  # the site's name on its server
        # pieces stay within what the server answers in one request
        lim = self.endpoint.limits
        self.scheduler = ReadScheduler(self._receive, streams=self.endpoint.streams,
                                       piece=max(64 << 10, min(4 << 20, lim.max_request_bytes)),
                                       fetch_many=self._fetch_ranges, max_ranges=lim.max_ranges)
        self.whole_piece = max(self.scheduler.piece, min(WHOLE_PIECE, lim.max_request_bytes))
        self._sizes: dict[str, int] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._plans: ThreadPoolExecutor | None = None  # planned reads of files, in reading order
        self._planning: dict[str, threading.Event] = {}  # files whose column chunks are being planned
        self._urgent: set[str] = set()  # files a reader waits for: their planned read needs no room
        self._tails: OrderedDict[str, tuple[int, bytes]] = OrderedDict()  # footers read on demand, by file
        self._lock = threading.Lock()  # the kept footers, the planned reads' pool
        self._many_heads = True  # the server answers heads of many files at once (an older one does not)

    def _url(self, path: str) -> str:
        return f"{self.prefix}/{quote(check_relpath(path))}"

    # ----------------------------------------------------------- reading

    def _fetch(self, path: str, start: int, stop: int) -> bytes:
        r = self.endpoint.request("GET", self._url(path), headers={"range": f"bytes={start}-{stop - 1}"},
                                  ok=(206, 200), what=f"reading {path} on site {self.name}")
        data: bytes = self._ranged(path, start, stop, r.status, r.data)
        return data

    def _receive(self, path: str, start: int, stop: int) -> bytes | memoryview:
        """A range for the scheduler, received straight into a buffer of its own (:meth:`Endpoint.receive`)."""
        status, data = self.endpoint.receive(self._url(path), stop - start,
                                             headers={"range": f"bytes={start}-{stop - 1}"},
                                             what=f"reading {path} on site {self.name}")
        out: bytes | memoryview = self._ranged(path, start, stop, status, data)
        return out

    def _ranged(self, path: str, start: int, stop: int, status: int, data: Any) -> Any:
        """The bytes ``[start, stop)`` of an answer to a range request, checked for their length."""
        if status == 200:  # the server ignored the range (it may for tiny files)
            data = data[start:stop]
        if len(data) != stop - start:
            raise IntegrityError(f"{path} on site {self.name}: {len(data)} bytes received for a range of "
                                 f"{stop - start} (truncated in flight)")
        return data

    def read_range(self, path: str, start: int, stop: int, *, wait_plan: bool = True) -> bytes:
        got = self.scheduler.read(path, start, stop)
        if got is not None:
            return got
        planning = self._waiting_for(path) if wait_plan else None
        if planning is not None:  # its column chunks are about to be scheduled: fetch them once, not twice
            planning.wait(PLAN_WAIT)
            got = self.scheduler.read(path, start, stop)
            if got is not None:
                return got
        if stop - start <= self.scheduler.piece:
            return self._fetch_tail(path, start, stop)
        # larger than one request may be: in pieces, in parallel
        self.scheduler.schedule(path, [(start, stop)])
        got = self.scheduler.read(path, start, stop)
        return got if got is not None else self._fetch(path, start, stop)

    def _fetch_tail(self, path: str, start: int, stop: int) -> bytes:
        """A range fetched on demand; a file's tail (its footer) is kept, since a file read without a plan
        is often opened twice (to route the read, then to read), and files never change once published."""
        if stop != self._sizes.get(path) or stop - start > TAIL:
            return self._fetch(path, start, stop)
        with self._lock:
            kept = self._tails.get(path)
            if kept is not None:
                self._tails.move_to_end(path)
        if kept is not None and kept[0] <= start:
            return kept[1][start - kept[0]:]
        data = self._fetch(path, start, stop)
        with self._lock:
            self._tails[path] = (start, data)
            while len(self._tails) > KEPT_TAILS:
                self._tails.popitem(last=False)
        return data

    def read_many(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes | memoryview]:
        """Several ranges of one file, fetched in parallel.

        Ranges fetched ahead (:meth:`prefetch`) come from the scheduler. Of
        the others, many small ones (the pages of a sparse selection) travel
        as multi-range requests within the server's bounds, all in flight at
        once; large ones go through the scheduler.
        """
        planning = self._waiting_for(path)
        if planning is not None:  # the plan schedules these ranges: fetch them once, not twice
            planning.wait(PLAN_WAIT)
        got = self.scheduler.read_many(path, ranges)
        missing = [r for r, d in zip(ranges, got, strict=True) if d is None]
        if not missing:
            return [d for d in got if d is not None]
        fetched = iter(self._read_unplanned(path, missing))
        return [d if d is not None else next(fetched) for d in got]

    def _read_unplanned(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        if len(ranges) == 1 and ranges[0][1] - ranges[0][0] <= TAIL:  # a footer: kept, if it is one
            data = self._fetch_tail(path, *ranges[0])
            # the reader's next ranges may lie in it (a small file is its own tail): read from it while open
            self.scheduler.adopt(path, [(ranges[0][0], data)])
            return [data]
        small = [r for r in ranges if r[1] - r[0] <= SMALL_RANGE]
        if len(small) < 4:
            self.scheduler.schedule(path, ranges)
            return [self.read_range(path, a, b) for a, b in ranges]
        lim = self.endpoint.limits
        batches: list[list[tuple[int, int]]] = [[]]
        held = 0
        for a, b in ranges:
            if batches[-1] and (len(batches[-1]) >= lim.max_ranges or held + (b - a) > lim.max_request_bytes):
                batches.append([])
                held = 0
            batches[-1].append((a, b))
            held += b - a
        parts = self._ranges_pool().map(lambda batch: self._fetch_multi(path, batch), batches)
        return [data for part in parts for data in part]

    def _fetch_ranges(self, path: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Ranges of one file in as few requests as the server's bounds allow, one after the other."""
        lim = self.endpoint.limits
        out: list[bytes] = []
        batch: list[tuple[int, int]] = []
        held = 0
        for a, b in [*ranges, (-1, -1)]:
            if batch and (a < 0 or len(batch) >= lim.max_ranges or held + (b - a) > lim.max_request_bytes):
                out += self._fetch_multi(path, batch)
                batch, held = [], 0
            batch.append((a, b))
            held += b - a
        return out

    def _fetch_multi(self, path: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        if len(ranges) == 1:
            return [self._fetch(path, *ranges[0])]
        spec = ",".join(f"{a}-{b - 1}" for a, b in ranges)
        r = self.endpoint.request("GET", self._url(path), headers={"range": f"bytes={spec}"}, ok=(206,),
                                  what=f"reading {path} on site {self.name}")
        kind = r.headers.get("content-type", "")
        if not kind.startswith("multipart/byteranges"):  # one range answered (the server merged them)
            got = {content_range(r.headers.get("content-range", ""))[0]: r.data}
        else:
            got = parse_multipart(r.data, kind.split("boundary=", 1)[-1].strip().strip('"'))
        out = []
        for a, b in ranges:
            data = next((d[a - s:b - s] for s, d in got.items() if s <= a and b <= s + len(d)), None)
            if data is None or len(data) != b - a:
                raise IntegrityError(f"{path} on site {self.name}: the server's answer lacks bytes {a}-{b - 1}")
            out.append(data)
        return out

    def prefetch(self, items: Sequence[tuple[str, int, Sequence[str] | None]]) -> None:
        """Announce reads: ``(path, size, columns)`` in reading order; ``columns=None`` is the whole file.

        With columns, footers are fetched first (all at once), then only the
        column chunks those columns need.
        """
        tails: list[tuple[str, int, Sequence[str]]] = []
        for path, size, columns in items:
            self._sizes[path] = size
            if columns is None:
                # a reader of a whole file asks for its batches in one range: fetched as one piece (within the
                # server's bound), it is handed over as it arrived, where pieces would be joined (a copy)
                self.scheduler.schedule(path, [(0, size)], piece=self.whole_piece)
                continue
            self._planning[path] = threading.Event()
            if path.endswith(".arrow") and self.scheduler.held_to(path, size) == size:
                # the server plans the read where the file is: footer, batches' metadata and the columns'
                # buffers come in one round trip, not three (unless footer and metadata came already)
                self._plans_pool().submit(self._fetch_served, path, size, list(columns))
            else:
                self.scheduler.schedule(path, [(max(0, size - TAIL), size)])
                tails.append((path, size, columns))
        if tails:
            threading.Thread(target=self._plan_columns, args=(tails,), daemon=True,
                             name="giod-footers").start()

    @property
    def gathers(self) -> bool:
        """Whether a dense read of many files from here is gathered (``giod.storage.formats.ContainerFormat.
        gather``): near enough that the round trip its layout costs first is less than the copy it saves."""
        rtt = self.endpoint.round_trip
        return rtt is not None and rtt <= GATHER_RTT

    @property
    def max_request(self) -> int:
        """The most bytes one request may ask for (the server's bound)."""
        return self.endpoint.limits.max_request_bytes

    def read_heads(self, items: Sequence[tuple[str, int]]) -> dict[str, list[tuple[int, memoryview]] | None]:
        """The footers and batch metadata of Arrow files ``(path, size)``, all in flight at once and held for
        their readers' opening (:meth:`hold`): each file's in one request the server plans (``?buffers=no``);
        None for a file of which only its tail came (a plain server) or nothing (a failure)."""
        for path, size in items:
            self._sizes[path] = size
        pool = self._plans_pool()
        if self._many_heads and len(items) > 1:
            asked = [list(items[i:i + HEADS_PER_REQUEST]) for i in range(0, len(items), HEADS_PER_REQUEST)]
            try:
                return {path: held for got in pool.map(self._fetch_many_heads, asked) for path, held in got.items()}
            except NotFound:
                self._many_heads = False  # an older server: a request a file from now on
            except GiodError as exc:
                log.info("heads of %d files from site %s, asked together, failed: %s; asked one by one",
                         len(items), self.name, exc)
        futures = {path: pool.submit(self._fetch_heads, path, size) for path, size in items}
        return {path: fut.result() for path, fut in futures.items()}

    def _fetch_many_heads(self, items: list[tuple[str, int]]) -> dict[str, list[tuple[int, memoryview]] | None]:
        """Heads of ``items`` in one request (``POST /files/<site>``), each checked to lie in its file and held;
        None for a file the server named an error for, or whose size is not the one expected."""
        r = self.endpoint.request("POST", self.prefix, body=json.dumps({"paths": [p for p, _ in items]}).encode(),
                                  headers={"content-type": "application/json"}, idempotent=True,
                                  what=f"reading the heads of {len(items)} files on site {self.name}")
        out: dict[str, list[tuple[int, memoryview]] | None] = {}
        for (path, _), held in zip(items, _heads_answer(r, items, self.name), strict=True):
            if held is not None:
                self.hold(path, held)
            out[path] = held
        return out

    def hold(self, path: str, parts: list[tuple[int, memoryview]]) -> None:
        """Bytes of ``path`` fetched already (``(start, data)``), read from here until ``release(path)``."""
        self.scheduler.adopt(path, parts)

    def _fetch_heads(self, path: str, size: int) -> list[tuple[int, memoryview]] | None:
        try:
            parts, plan = self._served(path, size, "buffers=no")
            held = [(a, memoryview(d)) for a, d in parts.items()]
            self.hold(path, held)
            # a server that did not plan (an older level) answered the tail alone: the metadata would cost a
            # round trip per file, so such files are read the ordinary way
            return held if plan == "metadata" else None
        except GiodError:
            return None  # the reader fetches on demand and reports the problem itself

    def receive_into(self, path: str, start: int, stop: int, views: list[memoryview],
                     landed: Landed | None = None) -> None:
        """The bytes ``[start, stop)`` of ``path`` written into ``views``, in order (a scatter read);
        ``landed`` as :meth:`Endpoint.receive_into` tells it."""
        if sum(len(v) for v in views) != stop - start:
            raise StorageError(f"{path}: {sum(len(v) for v in views)} bytes of memory for a range of {stop - start}")
        self.endpoint.receive_into(self._url(path), views, headers={"range": f"bytes={start}-{stop - 1}"},
                                   what=f"reading {path} on site {self.name}", landed=landed)

    def _plans_pool(self) -> ThreadPoolExecutor:
        # apart from the ranges' pool: a planned read waiting for room never holds up a reader's own ranges
        with self._lock:
            if self._plans is None:
                self._plans = ThreadPoolExecutor(max_workers=self.endpoint.streams, thread_name_prefix="giod-plans")
            return self._plans

    def _ranges_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.endpoint.streams, thread_name_prefix="giod-ranges")
        return self._pool

    def _fetch_served(self, path: str, size: int, columns: list[str]) -> None:
        """A planned read of ``columns`` of ``path``, in one request the server plans (in reading order,
        while the window has room or a reader waits for it); a server that does not plan answers the tail
        alone, and the plan is then made here, step by step."""
        try:
            self.scheduler.wait_room(lambda: path in self._urgent or path not in self._planning, PLAN_WAIT)
            if path not in self._planning:
                return  # released meanwhile: its reader is gone
            parts, plan = self._served(path, size, urlencode({"columns": ",".join(columns)}))
            if path not in self._planning:
                return
            self.scheduler.adopt(path, list(parts.items()))
            if plan != "whole":  # the buffers are planned here, from what came
                self._plan_columns([(path, size, columns)])
        except (GiodError, CancelledError):
            pass  # a failed fetch: the reader fetches on demand and reports the problem itself
        finally:
            self._urgent.discard(path)
            self._planned(path)

    def _served(self, path: str, size: int, query: str) -> tuple[dict[int, Any], str | None]:
        """A read the server plans (``query``), with ``Range`` the file's tail (what a plain server answers):
        the ranges that came, by start, checked to lie in the file, and the server's ``X-Giod-Plan``."""
        tail = max(0, size - TAIL)
        r = self.endpoint.request("GET", f"{self._url(path)}?{query}", headers={"range": f"bytes={tail}-{size - 1}"},
                                  ok=(206,), what=f"reading {path} on site {self.name}")
        kind = r.headers.get("content-type", "")
        if kind.startswith("multipart/byteranges"):
            parts = parse_multipart(r.data, kind.split("boundary=", 1)[-1].strip().strip('"'), view=True)
        else:
            parts = {content_range(r.headers.get("content-range", ""))[0]: r.data}
        if any(a < 0 or a + len(d) > size for a, d in parts.items()):
            raise IntegrityError(f"{path} on site {self.name}: the server sent bytes beyond the file")
        return parts, r.headers.get("x-giod-plan")

    def _waiting_for(self, path: str) -> threading.Event | None:
        """The plan a read of ``path`` waits for (None: none under way); its fetch goes first from now on."""
        planning = self._planning.get(path)
        if planning is not None and not planning.is_set():
            self._urgent.add(path)
            self.scheduler.wake()
        return planning

    def _tail_reader(self, path: str) -> Callable[[int, int], bytes]:
        """Ranges of ``path`` read now, not waiting for a plan (the plan is what they are read for)."""
        return lambda start, stop: self.read_range(path, start, stop, wait_plan=False)

    def _plan_columns(self, tails: list[tuple[str, int, Sequence[str]]]) -> None:
        # step by step over all files at once, so that each step costs one round trip, not one per file:
        # footers (already in flight), then Arrow batches' metadata, then the buffers they point to
        arrow: list[tuple[str, Footer, Sequence[str]]] = []
        try:
            for path, size, columns in tails:
                footer = None
                try:
                    read = self._tail_reader(path)
                    footer = remote_footer(read, path, size)
                    if footer is None:
                        wanted = parquet_column_ranges(read, path, size, columns)
                        self.scheduler.schedule(path, wanted, only_if_open=True)
                    else:
                        self.scheduler.schedule(path, footer.meta_ranges(), only_if_open=True, gap=0)
                        arrow.append((path, footer, columns))
                except GiodError:
                    footer = None  # the reader fetches on demand and reports the problem itself
                if footer is None:
                    self._planned(path)
            for path, footer, columns in arrow:
                try:
                    metas = self.scheduler.read_many(path, footer.meta_ranges())
                    if any(m is None for m in metas):
                        continue  # released meanwhile: its reader is gone
                    ranges = projected(footer, metas, columns)  # type: ignore[arg-type]
                    self.scheduler.schedule(path, [(0, self._sizes[path])] if ranges is None else ranges,
                                            only_if_open=True, gap=BUFFER_GAP)
                except (GiodError, CancelledError):
                    pass  # a failed fetch, or the file released meanwhile: the reader fetches on demand
                finally:
                    self._planned(path)
        finally:
            for path, _, _ in tails:
                self._planned(path)

    def _planned(self, path: str) -> None:
        done = self._planning.pop(path, None)
        if done is not None:
            done.set()

    def release(self, path: str) -> None:
        self._planned(path)  # a planned read not yet sent is not sent
        self.scheduler.release(path)

    def open(self, path: str) -> BinaryIO:
        return RemoteFile(self, path, self.size(path))  # type: ignore[return-value]

    def size(self, path: str) -> int:
        if path not in self._sizes:
            r = self.endpoint.request("HEAD", self._url(path), what=f"{path} on site {self.name}")
            self.endpoint.limits = Limits.from_headers(r.headers)
            self._sizes[path] = int(r.headers.get("content-length", 0))
        return self._sizes[path]

    def expect_size(self, path: str, size: int) -> None:
        """Record a size the catalog vouches for, sparing a HEAD request."""
        self._sizes[path] = size

    def forget(self, path: str) -> None:
        """Drop the size known for ``path``: the next ``size`` asks the server (the file may have changed)."""
        self._sizes.pop(path, None)
        with self._lock:
            self._tails.pop(path, None)

    # ----------------------------------------------------------- writing

    def create(self, path: str, *, direct: bool = False) -> PendingFile:
        return _RemotePending(self, check_relpath(path))

    def pull(self, source: Site, path: str, size: int, checksum: str,
             advance: Callable[[int], None] | None = None) -> str | None:
        """Have this site's server fetch ``path`` from ``source``'s server itself (a third-party copy).

        The server publishes the file only when it has ``size`` bytes with
        ``checksum``; it reads a file already there and keeps it when it is
        the right one. ``"copied"`` or ``"adopted"``; None when the source is
        not a giod server or this server cannot copy (an older one): the bytes
        must then pass through here. ConflictError when another file is at
        ``path`` (never overwritten).
        """
        import urllib3

        if not isinstance(source, RemoteSite):  # only a giod server's files can be fetched server to server
            return None

        what = f"copying {path} from site {source.name} to site {self.name}"
        headers = {"x-giod-source": source.url, "x-giod-size": str(size), "x-giod-checksum": checksum}
        if source.endpoint.token:
            headers["x-giod-source-authorization"] = f"Bearer {source.endpoint.token}"
        r = self.endpoint.stream("POST", self._url(path), headers=headers, ok=(200, 405), what=what)
        if r.status == 405:
            r.drain_conn()
            r.release_conn()
            return None
        done = 0
        outcome: dict[str, Any] = {}
        try:
            for line in r:
                doc = json.loads(line)
                if "bytes" in doc:
                    if advance is not None:
                        advance(int(doc["bytes"]) - done)
                    done = int(doc["bytes"])
                else:
                    outcome = doc
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise StorageError(f"{what}: the answer broke off after {done} bytes: {exc}") from exc
        finally:
            r.release_conn()
        if "error" in outcome:
            raise error_from(400, json.dumps(outcome).encode(), what)
        if outcome.get("how") not in ("copied", "adopted"):
            raise StorageError(f"{what}: the server's answer ended without an outcome")
        if advance is not None and outcome["how"] == "copied":
            advance(size - done)
        self._sizes[path] = size
        return str(outcome["how"])

    def health(self) -> SiteHealth:
        try:
            self.endpoint.request("HEAD", "/healthz", what=f"site {self.name}")  # liveness: no catalog statement
            self.endpoint.json("GET", f"/api/v1/sites/{quote(self.remote_name, safe='')}", what=f"site {self.name}")
        except AuthError as exc:
            return SiteHealth(True, f"server answers; the token cannot see the site ({exc})")
        except NotFound:
            return SiteHealth(False, f"the server has no site {self.remote_name!r}")
        except GiodError as exc:
            return SiteHealth(False, str(exc))
        return SiteHealth(True, "")

    def remove(self, path: str) -> None:
        self.forget(path)
        self.endpoint.request("DELETE", self._url(path), ok=(200, 204, 404), idempotent=True,
                              what=f"removing {path} on site {self.name}")

    def walk(self) -> Iterator[FileInfo]:
        doc = self.endpoint.json("GET", f"/api/v1/sites/{quote(self.remote_name, safe='')}/files")
        for f in doc.get("files", []):
            yield FileInfo(str(f["path"]), int(f["size"]), float(f["mtime"]))


def _heads_answer(r: Any, items: list[tuple[str, int]], site: str) -> list[list[tuple[int, memoryview]] | None]:
    """The parts of each of ``items`` in an answer of ``POST /files/<site>``, in order (None: the server named an
    error, or the file's size is not the one asked); IntegrityError for an answer not made as documented."""
    def bad(why: str) -> IntegrityError:
        return IntegrityError(f"site {site}: the server's answer to a request for heads {why}")

    data = memoryview(r.data)
    if r.headers.get("content-type", "") != HEADS_CONTENT_TYPE or len(data) < 4:
        raise bad("is not of its type")
    n = int.from_bytes(data[:4], "big")
    try:
        files = json.loads(bytes(data[4:4 + n]))["files"] if 4 + n <= len(data) else None
    except (ValueError, TypeError, KeyError) as exc:
        raise bad("has no readable index") from exc
    if not isinstance(files, list) or len(files) != len(items):
        raise bad("lists other files than asked")
    at = 4 + n
    out: list[list[tuple[int, memoryview]] | None] = []
    for (path, size), entry in zip(items, files, strict=True):
        if not isinstance(entry, dict) or entry.get("path") != path:
            raise bad("lists other files than asked")
        if "error" in entry:
            out.append(None)
            continue
        told, parts = entry.get("size"), entry.get("parts")
        if not _count(told) or not isinstance(parts, list) or not all(
                isinstance(p, list) and len(p) == 2 and _count(p[0]) and _count(p[1]) and p[0] + p[1] <= told
                for p in parts):
            raise bad(f"lists parts of {path} that are not ranges of it")
        held = []
        for a, length in parts:
            if at + length > len(data):
                raise bad("is shorter than its index")
            held.append((a, data[at:at + length]))
            at += length
        out.append(held if told == size else None)
    if at != len(data):
        raise bad("is longer than its index")
    return out


def _count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


class RemoteFile(RangeFile):
    """A seekable read-only view of a remote file, served by the site's scheduler."""

    def __init__(self, site: RemoteSite, path: str, size: int):
        super().__init__()
        self.site, self.path, self.size, self.name = site, path, size, f"{site.url}/{path}"
        self._pos = 0

    def __repr__(self) -> str:
        return f"<RemoteFile {self.name}>"

    def read(self, n: int = -1) -> bytes:
        stop = self.size if n is None or n < 0 else min(self.size, self._pos + n)
        if stop <= self._pos:
            return b""
        data = self.site.read_range(self.path, self._pos, stop)
        self._pos = stop
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        memoryview(b).cast("B")[: len(data)] = data
        return len(data)

    def read_many(self, ranges: Sequence[tuple[int, int]]) -> list[bytes | memoryview]:
        return self.site.read_many(self.path, ranges)

    def close(self) -> None:
        if not self.closed:
            self.site.release(self.path)
        super().close()


class _RemotePending(PendingFile):
    """Spooled locally, uploaded with its checksum in ``publish``; the server renames it into place."""

    def __init__(self, site: RemoteSite, path: str):
        self.path = path
        self._site = site
        self._spool: Any = tempfile.TemporaryFile()  # noqa: SIM115 - closed in publish/discard
        self._sum = Checksum()
        self._n = 0

    def write(self, data: bytes | memoryview) -> int:
        self._spool.write(data)
        self._sum.update(data)
        self._n += len(data)
        return len(data)

    def tell(self) -> int:
        return self._n

    def publish(self) -> None:
        self._spool.flush()
        self._spool.seek(0)
        try:
            self._site.endpoint.request(
                "PUT", self._site._url(self.path), body=self._spool,
                headers={"x-giod-checksum": self._sum.hexdigest(), "content-length": str(self._n),
                         "content-type": "application/octet-stream"},
                ok=(200, 201), idempotent=False, what=f"uploading {self.path} to site {self._site.name}")
            self._site._sizes[self.path] = self._n
        finally:
            self.discard()

    def discard(self) -> None:
        if not self._spool.closed:
            self._spool.close()

