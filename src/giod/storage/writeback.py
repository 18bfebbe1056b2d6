"""Early write-back: start writing a file's pages to the disk while it is still being written.

A file is made durable with ``fsync`` before it is published. Without help the
kernel keeps everything written so far in memory (its background write-back
starts only at 10 % of memory), so that fsync alone writes the whole file while
the writer waits. Asking the kernel every few MiB to *start* writing what has
arrived (Linux ``sync_file_range(SYNC_FILE_RANGE_WRITE)``, as PostgreSQL's
``backend_flush_after`` and RocksDB's ``bytes_per_sync`` do) overlaps the disk
with the network or the encoder, and the final fsync waits only for the last
pieces. Elsewhere this is a no-op: fsync still does all the work, correctly.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable

__all__ = ["AFTER", "WritebackRange", "start_writeback"]

AFTER = 8 << 20  # bytes written between two requests to start write-back
_SYNC_FILE_RANGE_WRITE = 2


def _load() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_sync_file_range = _load()


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing ``[offset, offset + length)`` of ``fd`` to the disk, without waiting.

    Failures are ignored: this only moves work that fsync does anyway.
    """
    if _sync_file_range is not None and length > 0:
        _sync_file_range(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


class WritebackRange:
    """Counts the bytes written to one file and starts their write-back every ``after`` bytes."""

    __slots__ = ("after", "done", "written")

    def __init__(self, after: int = AFTER):
        self.after, self.done, self.written = after, 0, 0

    def add(self, n: int, fd: int, flush: Callable[[], None] | None = None) -> None:
        self.written += n
        if self.written - self.done >= self.after:
            if flush is not None:
                flush()  # what the file object still buffers must reach the kernel first
            start_writeback(fd, self.done, self.written - self.done)
            self.done = self.written
