"""The read scheduler: merged ranges, bounded pieces, reads equal to the bytes, urgent starts."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.storage.ranges import ReadScheduler, coalesce, split

DATA = bytes(range(256)) * 4096  # 1 MiB with a recognisable pattern


def _fetcher(log: list[tuple[str, int, int]] | None = None):
    lock = threading.Lock()

    def fetch(path: str, start: int, stop: int) -> bytes:
        if log is not None:
            with lock:
                log.append((path, start, stop))
        return DATA[start:stop]

    return fetch


ranges = st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 500)).map(lambda t: (t[0], t[0] + t[1])),
                  max_size=40)


@given(ranges, st.integers(0, 300))
def test_coalesce_covers_exactly_the_same_bytes(rs, gap):
    merged = coalesce(rs, gap)
    covered = {i for a, b in rs for i in range(a, b)}
    assert covered <= {i for a, b in merged for i in range(a, b)}
    for (a1, b1), (a2, b2) in zip(merged, merged[1:]):
        assert a2 > b1 + gap  # neighbours closer than the gap were merged
    for a, b in merged:  # nothing invented beyond gaps between asked ranges
        assert a in covered and b - 1 in covered


@given(ranges, st.integers(1, 700))
def test_split_bounds_pieces(rs, size):
    merged = coalesce(rs, 0)
    pieces = split(merged, size)
    assert all(0 < b - a <= size for a, b in pieces)
    assert sum(b - a for a, b in pieces) == sum(b - a for a, b in merged)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(DATA) - 1), st.integers(1, 70_000)), min_size=1, max_size=12),
       st.integers(4096, 1 << 16))
def test_reads_equal_the_bytes(reads, piece):
    sched = ReadScheduler(_fetcher(), streams=4, window=1 << 18, piece=piece, gap=4096)
    try:
        wanted = [(a, min(len(DATA), a + n)) for a, n in reads]
        sched.schedule("f", wanted)
        for a, b in wanted:
            assert sched.read("f", a, b) == DATA[a:b]
    finally:
        sched.close()


def test_unscheduled_range_is_not_answered():
    sched = ReadScheduler(_fetcher(), streams=2)
    try:
        sched.schedule("f", [(0, 100)])
        assert sched.read("f", 50, 200) is None
        assert sched.read("g", 0, 10) is None
        assert sched.read("f", 10, 20) == DATA[10:20]
    finally:
        sched.close()


def test_window_bounds_prefetch_and_reads_start_what_they_need():
    log: list[tuple[str, int, int]] = []
    gate = threading.Event()
    fetch = _fetcher(log)

    def slow(path: str, start: int, stop: int) -> bytes:
        gate.wait(5)
        return fetch(path, start, stop)

    sched = ReadScheduler(slow, streams=8, window=100_000, piece=50_000, gap=0)
    try:
        for i in range(10):  # ten files of 100 kB: only the first fits the window
            sched.schedule(f"f{i}", [(0, 100_000)])
        gate.set()
        assert sched.read("f0", 0, 100_000) == DATA[:100_000]
        assert {p for p, _, _ in log} == {"f0"}  # the window held the others back
        # reading a later file starts its pieces at once (no deadlock behind the window)
        assert sched.read("f7", 1000, 2000) == DATA[1000:2000]
        assert sched.stats["urgent"] >= 1
        sched.release("f0")
        assert sched.read("f1", 0, 10) == DATA[:10]
    finally:
        sched.close()


def test_failed_fetch_reaches_the_reader():
    def broken(path: str, start: int, stop: int) -> bytes:
        raise OSError("link down")

    sched = ReadScheduler(broken, streams=2)
    try:
        sched.schedule("f", [(0, 10)])
        try:
            sched.read("f", 0, 10)
        except OSError as exc:
            assert "link down" in str(exc)
        else:
            raise AssertionError("the failure was swallowed")
    finally:
        sched.close()


def test_a_fetch_that_failed_before_the_read_still_reaches_it():
    """The reader comes after the failure: it must still get the error, not 'nothing scheduled'."""
    import concurrent.futures

    def broken(path: str, start: int, stop: int) -> bytes:
        raise OSError("link down")

    sched = ReadScheduler(broken, streams=2)
    try:
        sched.schedule("f", [(0, 10)])
        concurrent.futures.wait([p.future for p in sched._pieces["f"]])
        with pytest.raises(OSError, match="link down"):
            sched.read("f", 0, 10)
        assert sched.read("f", 0, 10) is None  # taken once: a new schedule fetches the range again
    finally:
        sched.close()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200_000), st.integers(1, 100_000)), min_size=1, max_size=8),
       st.integers(0, 200_000), st.integers(1, 300_000))
def test_overlapping_schedules_answer_each_byte_once(batches, start, n):
    """Ranges scheduled in several calls overlap partly; a read across them is still exact."""
    sched = ReadScheduler(_fetcher(), streams=4, piece=1 << 15, gap=0)
    try:
        for a, m in batches:
            sched.schedule("f", [(a, min(len(DATA), a + m))])
        stop = min(len(DATA), start + n)
        got = sched.read("f", start, stop)
        assert got is None or got == DATA[start:stop]
        covered = coalesce([(a, min(len(DATA), a + m)) for a, m in batches], 0)
        if any(a <= start and stop <= b for a, b in covered):
            assert got == DATA[start:stop]
    finally:
        sched.close()


def test_a_range_scheduled_as_one_piece_is_handed_over_as_fetched():
    log: list[tuple[str, int, int]] = []
    sched = ReadScheduler(_fetcher(log), streams=2, piece=64 << 10)
    try:
        sched.schedule("whole", [(0, len(DATA))], piece=len(DATA))  # a file read whole: one request
        sched.schedule("parts", [(0, len(DATA))])  # the scheduler's own pieces
        whole, parts = sched.read_many("whole", [(0, len(DATA))])[0], sched.read_many("parts", [(0, len(DATA))])[0]
        assert whole == parts == DATA
        assert isinstance(whole, bytes)  # the fetched object itself, not a join of pieces
        assert [r for r in log if r[0] == "whole"] == [("whole", 0, len(DATA))]
        assert len([r for r in log if r[0] == "parts"]) == len(DATA) // (64 << 10)
    finally:
        sched.close()
