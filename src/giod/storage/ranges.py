"""The read scheduler: byte ranges fetched ahead, many at once, in reading order.

A remote page server that answers one page per round trip caps a client at
page size / RTT (32 KB at 250 ms is 128 KB/s, whatever the link). The cure is
to know what will be read before it is read: a selection knows every
container and column it will touch, and a Parquet footer says where each
column chunk lies. The scheduler takes those ranges, merges neighbours
(:func:`coalesce`), cuts them into pieces of bounded size, and keeps many
pieces in flight, in the order the reader will want them, while it holds no
more than ``window`` bytes that nobody has read yet. A read that needs a
piece not yet started starts it at once, so the reader never waits behind
prefetching it does not need yet.

Small pieces (the metadata of record batches, the buffers of one column) are
grouped into one request of several ranges when a ``fetch_many`` is given,
so that a plan of many small ranges costs few requests, not one each.

The scheduler does not know HTTP: it calls ``fetch(path, start, stop)`` (and
``fetch_many(path, ranges)``).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

__all__ = ["Piece", "ReadScheduler", "coalesce", "split"]

Fetch = Callable[[str, int, int], bytes | memoryview]
FetchMany = Callable[[str, list[tuple[int, int]]], list[bytes]]


def coalesce(ranges: Iterable[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """Sorted ``[start, stop)`` ranges with neighbours closer than ``gap`` merged."""
    out: list[list[int]] = []
    for start, stop in sorted(ranges):
        if stop <= start:
            continue
        if out and start <= out[-1][1] + gap:
            out[-1][1] = max(out[-1][1], stop)
        else:
            out.append([start, stop])
    return [(a, b) for a, b in out]


def split(ranges: Iterable[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """Ranges cut into pieces of at most ``size`` bytes."""
    return [(a, min(a + size, stop)) for start, stop in ranges for a in range(start, stop, size)]


def _uncovered(spans: Sequence[tuple[int, int]], start: int, stop: int) -> list[tuple[int, int]]:
    """The parts of ``[start, stop)`` outside the sorted ``spans``."""
    out = []
    at = start
    for a, b in spans:
        if b <= at:
            continue
        if a >= stop:
            break
        if a > at:
            out.append((at, a))
        at = max(at, b)
        if at >= stop:
            break
    if at < stop:
        out.append((at, stop))
    return out


@dataclass(eq=False)
class Piece:
    path: str
    start: int
    stop: int
    order: tuple[int, int]  # (position of the file in reading order, start)
    future: Future[bytes | memoryview] = field(default_factory=Future)
    started: bool = False
    group: list[Piece] | None = None  # the pieces fetched with it in one request of several ranges

    @property
    def size(self) -> int:
        return self.stop - self.start


class ReadScheduler:
    """Prefetches byte ranges of files with ``streams`` requests in flight.

    ``schedule`` queues ranges; ``read`` answers from fetched pieces (waiting
    for those in flight, starting those still queued) or returns None when the
    range was never scheduled; ``release`` drops a file's pieces once read.
    """

    def __init__(self, fetch: Fetch, *, streams: int = 16, window: int = 256 << 20, piece: int = 4 << 20,
                 gap: int = 1 << 20, fetch_many: FetchMany | None = None, max_ranges: int = 1):
        self._fetch = fetch
        self._fetch_many = fetch_many
        self.max_ranges = max_ranges if fetch_many is not None else 1
        self.streams, self.window, self.piece, self.gap = streams, window, piece, gap
        self._pool = ThreadPoolExecutor(max_workers=streams, thread_name_prefix="giod-read")
        self._lock = threading.Condition()
        self._queue: list[tuple[tuple[int, int], int, Piece]] = []
        self._pieces: dict[str, list[Piece]] = {}
        self._held = 0  # bytes started and not released
        self._running = 0
        self._files = itertools.count()
        self._tie = itertools.count()
        self._order: dict[str, int] = {}
        self.stats = {"pieces": 0, "bytes": 0, "urgent": 0}

    def order_of(self, path: str) -> int:
        """The reading position of ``path`` (files are read in the order first scheduled)."""
        with self._lock:
            if path not in self._order:
                self._order[path] = next(self._files)
            return self._order[path]

    def schedule(self, path: str, ranges: Sequence[tuple[int, int]], *, only_if_open: bool = False,
                 gap: int | None = None, piece: int | None = None) -> None:
        """Fetch these ranges of ``path`` ahead of reading (overlaps with scheduled ranges are skipped).

        ``only_if_open``: only if ``path`` still has pieces (its reader has not released it yet).
        ``gap``: ranges closer than this are fetched as one (the scheduler's own by default); pieces
        smaller than a piece travel several to a request. ``piece``: the largest piece (the scheduler's own by
        default); a reader that asks for a whole range at once is answered without joining pieces.
        """
        rank = self.order_of(path)
        with self._lock:
            if only_if_open and path not in self._pieces:
                return
            have = self._pieces.setdefault(path, [])
            spans = sorted((p.start, p.stop) for p in have)
            # only what no piece holds yet: a range that overlaps scheduled ones costs its new bytes alone
            fresh = [part for a, b in coalesce(ranges, self.gap if gap is None else gap)
                     for part in _uncovered(spans, a, b)]
            group: list[Piece] = []
            for start, stop in split(fresh, piece or self.piece):
                p = Piece(path, start, stop, (rank, start))
                have.append(p)
                if group and (len(group) >= self.max_ranges or sum(q.size for q in group) + p.size > self.piece):
                    group = []
                if group:  # started with its group's first piece, never queued on its own
                    p.group = group
                    group.append(p)
                    continue
                group = [p]
                p.group = group
                heapq.heappush(self._queue, (p.order, next(self._tie), p))
            self._pump()

    def adopt(self, path: str, parts: Sequence[tuple[int, bytes | memoryview]]) -> None:
        """Ranges of ``path`` the caller fetched itself (``(start, data)``), read like fetched pieces; the bytes
        some piece already holds are left out."""
        rank = self.order_of(path)
        with self._lock:
            have = self._pieces.setdefault(path, [])
            for start, data in sorted(parts, key=lambda part: part[0]):
                view = memoryview(data)
                spans = sorted((p.start, p.stop) for p in have)
                for a, b in _uncovered(spans, start, start + len(view)):
                    p = Piece(path, a, b, (rank, a), started=True)
                    p.future.set_result(view[a - start:b - start])
                    have.append(p)
                    self._held += p.size

    def _pump(self) -> None:
        # called with the lock held: start queued pieces while the window and streams allow
        while self._queue and self._running < self.streams:
            p = self._queue[0][2]
            if p.started:
                heapq.heappop(self._queue)
                continue
            if self._held and self._held + sum(q.size for q in self._members(p)) > self.window:
                break
            heapq.heappop(self._queue)
            self._start(p)

    @staticmethod
    def _members(p: Piece) -> list[Piece]:
        # the pieces of p's request not yet started (a released one is marked started and skipped)
        return [q for q in (p.group or [p]) if not q.started]

    def _start(self, p: Piece) -> None:
        members = self._members(p)
        for q in members:
            q.started = True
            self._held += q.size
        self._running += 1
        self._pool.submit(self._run, members)

    def _run(self, members: list[Piece]) -> None:
        got: Sequence[bytes | memoryview]
        try:
            if len(members) == 1:
                got = [self._fetch(members[0].path, members[0].start, members[0].stop)]
            else:
                assert self._fetch_many is not None
                got = self._fetch_many(members[0].path, [(q.start, q.stop) for q in members])
        except BaseException as exc:  # noqa: BLE001 - handed to the reader through the future
            # the piece stays until a reader takes the failure (read) or gives the path up (release):
            # forgotten here, a read that came a moment later would find nothing and not see the error
            for q in members:
                q.future.set_exception(exc)
            with self._lock:
                self._running -= 1
                self._pump()
            return
        with self._lock:
            self._running -= 1
            self.stats["pieces"] += len(members)
            self.stats["bytes"] += sum(len(d) for d in got)
            self._pump()
        for q, data in zip(members, got, strict=True):
            q.future.set_result(data)

    def _forget(self, p: Piece) -> None:
        have = self._pieces.get(p.path)
        if have is not None and p in have:
            have.remove(p)
            if p.started:
                self._held -= p.size

    def _claim(self, path: str, start: int, stop: int) -> list[tuple[Piece, int]] | None:
        # with the lock held: the pieces that cover [start, stop), each with where its new bytes begin, the
        # ones not started yet started now (the reader is here: no more waiting behind prefetches)
        have = sorted(self._pieces.get(path, ()), key=lambda p: p.start)
        needed: list[tuple[Piece, int]] = []
        at = start
        for p in have:
            if p.stop <= at or p.start > at:
                continue
            needed.append((p, at))
            at = p.stop
            if at >= stop:
                break
        if at < stop:
            return None
        for p, _ in needed:
            if not p.started:
                self.stats["urgent"] += 1
                self._start(p)
        return needed

    def _collect(self, needed: list[tuple[Piece, int]], stop: int) -> bytes | memoryview:
        # one piece: a view of its bytes, never a copy (the reader wraps it as it is)
        parts = []
        for p, begin in needed:
            try:
                data = p.future.result()
            except BaseException:
                with self._lock:
                    self._forget(p)  # the reader has the failure; a new schedule fetches the range again
                raise
            parts.append(memoryview(data)[begin - p.start:min(stop, p.stop) - p.start])
        if len(parts) == 1:
            p, begin = needed[0]
            data = p.future.result()
            return data if begin == p.start and stop >= p.stop and isinstance(data, bytes) else parts[0]
        return b"".join(parts)

    def held_to(self, path: str, stop: int) -> int:
        """Where the bytes of ``path`` already arrived, without a gap, up to ``stop`` begin (``stop``: none)."""
        with self._lock:
            done = [(p.start, p.stop) for p in self._pieces.get(path, ()) if p.future.done()
                    and not p.future.cancelled() and p.future.exception() is None]
        at = stop
        for a, b in sorted(done, reverse=True, key=lambda span: span[1]):
            if a < at <= b:
                at = a
        return at

    def read(self, path: str, start: int, stop: int) -> bytes | None:
        """Bytes ``[start, stop)`` of ``path`` from scheduled pieces, or None if not all scheduled."""
        got = self.read_many(path, [(start, stop)])[0]
        return got if got is None or isinstance(got, bytes) else got.tobytes()

    def read_many(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes | memoryview | None]:
        """:meth:`read` of several ranges, as bytes or views of what arrived: every piece they need is started
        before any is waited for."""
        with self._lock:
            claims = [self._claim(path, a, b) if b > a else [] for a, b in ranges]
        return [None if c is None else b"" if b <= a else self._collect(c, b)
                for c, (a, b) in zip(claims, ranges, strict=True)]

    def wait_room(self, ready: Callable[[], bool], timeout: float) -> None:
        """Wait until the pieces held stay below the window, or ``ready()`` (checked whenever pieces are
        released or :meth:`wake` is called)."""
        with self._lock:
            self._lock.wait_for(lambda: self._held < self.window or ready(), timeout)

    def wake(self) -> None:
        """Have the waiters of :meth:`wait_room` look at their condition again."""
        with self._lock:
            self._lock.notify_all()

    def release(self, path: str) -> None:
        """Forget ``path``'s pieces (read, or no longer wanted); queued ones are not fetched."""
        with self._lock:
            self._lock.notify_all()
            for p in self._pieces.pop(path, []):
                if p.started:
                    self._held -= p.size
                else:
                    p.started = True  # dropped from the queue when it reaches the top
                    p.future.cancel()
            self._order.pop(path, None)
            self._pump()

    def close(self) -> None:
        with self._lock:
            for path in list(self._pieces):
                for p in self._pieces[path]:
                    if not p.started:
                        p.started = True
                        p.future.cancel()
            self._pieces.clear()
            self._queue.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
