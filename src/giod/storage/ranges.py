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

The scheduler does not know HTTP: it calls ``fetch(path, start, stop)``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

__all__ = ["Piece", "ReadScheduler", "coalesce", "split"]

Fetch = Callable[[str, int, int], bytes]


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


@dataclass(eq=False)
class Piece:
    path: str
    start: int
    stop: int
    order: tuple[int, int]  # (position of the file in reading order, start)
    future: Future[bytes] = field(default_factory=Future)
    started: bool = False

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
                 gap: int = 1 << 20):
        self._fetch = fetch
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

    def schedule(self, path: str, ranges: Sequence[tuple[int, int]], *, only_if_open: bool = False) -> None:
        """Fetch these ranges of ``path`` ahead of reading (overlaps with scheduled ranges are skipped).

        ``only_if_open``: only if ``path`` still has pieces (its reader has not released it yet).
        """
        rank = self.order_of(path)
        with self._lock:
            if only_if_open and path not in self._pieces:
                return
            have = self._pieces.setdefault(path, [])
            todo = split(coalesce(ranges, self.gap), self.piece)
            for start, stop in todo:
                if any(p.start <= start and stop <= p.stop for p in have):
                    continue
                p = Piece(path, start, stop, (rank, start))
                have.append(p)
                heapq.heappush(self._queue, (p.order, next(self._tie), p))
            self._pump()

    def _pump(self) -> None:
        # called with the lock held: start queued pieces while the window and streams allow
        while self._queue and self._running < self.streams:
            p = self._queue[0][2]
            if p.started:
                heapq.heappop(self._queue)
                continue
            if self._held and self._held + p.size > self.window:
                break
            heapq.heappop(self._queue)
            self._start(p)

    def _start(self, p: Piece) -> None:
        p.started = True
        self._held += p.size
        self._running += 1
        self._pool.submit(self._run, p)

    def _run(self, p: Piece) -> None:
        try:
            data = self._fetch(p.path, p.start, p.stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the reader through the future
            # the piece stays until a reader takes the failure (read) or gives the path up (release):
            # forgotten here, a read that came a moment later would find nothing and not see the error
            p.future.set_exception(exc)
            with self._lock:
                self._running -= 1
                self._pump()
            return
        with self._lock:
            self._running -= 1
            self.stats["pieces"] += 1
            self.stats["bytes"] += len(data)
            self._pump()
        p.future.set_result(data)

    def _forget(self, p: Piece) -> None:
        have = self._pieces.get(p.path)
        if have is not None and p in have:
            have.remove(p)
            if p.started:
                self._held -= p.size

    def read(self, path: str, start: int, stop: int) -> bytes | None:
        """Bytes ``[start, stop)`` of ``path`` from scheduled pieces, or None if not all scheduled."""
        if stop <= start:
            return b""
        with self._lock:
            have = sorted(self._pieces.get(path, ()), key=lambda p: p.start)
            needed: list[tuple[Piece, int]] = []  # each piece with where its new bytes begin
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
                if not p.started:  # the reader is here: no more waiting behind prefetches
                    self.stats["urgent"] += 1
                    self._start(p)
        parts = []
        for p, begin in needed:
            try:
                data = p.future.result()
            except BaseException:
                with self._lock:
                    self._forget(p)  # the reader has the failure; a new schedule fetches the range again
                raise
            parts.append(memoryview(data)[begin - p.start:min(stop, p.stop) - p.start])
        return parts[0].tobytes() if len(parts) == 1 else b"".join(parts)

    def release(self, path: str) -> None:
        """Forget ``path``'s pieces (read, or no longer wanted); queued ones are not fetched."""
        with self._lock:
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
