"""Early write-back: a file's pages start for the disk while it is written, and what lands is exact."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from giod.storage import writeback
from giod.storage.site import LocalSite


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=5000), max_size=40), st.integers(min_value=1, max_value=4096))
def test_started_ranges_tile_what_was_written(sizes, after):
    started: list[tuple[int, int]] = []
    flushed = []
    original = writeback.start_writeback
    writeback.start_writeback = lambda fd, offset, length: started.append((offset, length))
    try:
        wb = writeback.WritebackRange(after)
        for n in sizes:
            wb.add(n, 3, lambda: flushed.append(wb.written))
    finally:
        writeback.start_writeback = original
    at = 0
    for offset, length in started:  # contiguous, in order, each at least `after` bytes
        assert offset == at and length >= after
        at += length
    assert at == wb.done <= wb.written == sum(sizes)
    assert wb.written - wb.done < after  # what is left for fsync is less than one step
    assert len(flushed) == len(started)  # the file object's buffer reaches the kernel before each request


def test_a_file_written_with_early_writeback_is_published_whole(tmp_path: Path, monkeypatch):
    calls: list[tuple[int, int]] = []
    real = writeback.start_writeback
    monkeypatch.setattr(writeback, "start_writeback", lambda fd, o, n: (calls.append((o, n)), real(fd, o, n)))
    site = LocalSite("disk", str(tmp_path))
    pending = site.create("ds/a.parquet")
    pending._writeback = writeback.WritebackRange(1 << 16)  # small steps: many requests in a small file
    blocks = [os.urandom(n) for n in (1000, 70_000, 3, 200_000, 65_536, 12)]
    for b in blocks:
        pending.write(b)
    pending.publish()
    assert (tmp_path / "ds" / "a.parquet").read_bytes() == b"".join(blocks)
    assert calls == [(0, 71_000), (71_000, 200_003), (271_003, 65_536)]


def test_start_writeback_ignores_what_it_cannot_do(tmp_path: Path):
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        os.write(fd, b"x" * 10_000)
        writeback.start_writeback(fd, 0, 10_000)
        writeback.start_writeback(fd, 0, 0)  # nothing to start
    finally:
        os.close(fd)
    writeback.start_writeback(fd, 0, 10)  # a closed descriptor: no error, fsync would report the real one
    assert (tmp_path / "f").read_bytes() == b"x" * 10_000
