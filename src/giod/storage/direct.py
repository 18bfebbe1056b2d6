"""Direct writes: a file written to the disk past the page cache.

A copy that arrives whole from elsewhere (a third-party copy, an upload) is
not read again soon by the process writing it, yet a buffered write copies
every byte into page-cache memory that must first be found and, on a virtual
machine whose host reclaims free guest memory, faulted back in by the host:
measured on the development VM, that copy was 30 % of all CPU time in a
replication and made its speed swing threefold from run to run. With
``O_DIRECT`` the disk reads the bytes straight from a small aligned buffer
that is used over and over; the final fsync then has only metadata left to
write. The data are as durable as before (fsync still decides), and a file
system that refuses ``O_DIRECT`` (tmpfs, some network file systems) gets the
buffered path instead.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
from pathlib import Path

from giod.storage.pending import LocalPending

__all__ = ["ALIGN", "BLOCK", "DirectPending", "open_direct"]

ALIGN = 4096  # offsets, lengths and addresses of direct I/O are multiples of this (4 KiB sectors included)
BLOCK = 4 << 20  # bytes gathered before each write to the disk
_POOL_SIZE = 16  # aligned buffers kept for the next files
_pool: list[mmap.mmap] = []
_pool_lock = threading.Lock()


def open_direct(path: Path) -> int | None:
    """A new file at ``path`` opened for direct writes; None where the system or file system has none."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return None
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | flag | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):  # this file system does not do direct I/O
            return None
        raise


def _buffer() -> mmap.mmap:
    with _pool_lock:
        if _pool:
            return _pool.pop()
    return mmap.mmap(-1, BLOCK)  # anonymous mappings are page-aligned


def _give_back(buf: mmap.mmap) -> None:
    with _pool_lock:
        if len(_pool) < _POOL_SIZE:
            _pool.append(buf)
            return
    buf.close()


class DirectPending(LocalPending):
    """A temporary file written with ``O_DIRECT`` in aligned blocks; published like any other."""

    def __init__(self, path: str, fd: int, tmp: Path, final: Path):  # the file is already open: no super()
        self.path = path
        self._fd: int | None = fd
        self._tmp, self._final = tmp, final
        self._buf: mmap.mmap | None = _buffer()
        self._view = memoryview(self._buf)
        self._fill = 0  # bytes gathered in the buffer
        self._size = 0  # bytes of the file

    def write(self, data: bytes | memoryview) -> int:
        src = memoryview(data).cast("B")
        n = len(src)
        at = 0
        while at < n:
            k = min(BLOCK - self._fill, n - at)
            self._view[self._fill:self._fill + k] = src[at:at + k]
            self._fill += k
            at += k
            if self._fill == BLOCK:
                self._write_out(BLOCK)
        self._size += n
        return n

    def _write_out(self, length: int) -> None:
        assert self._fd is not None, "write after publish/discard"
        done = 0
        while done < length:  # direct writes may be cut short only by a full disk; then os.write raises
            done += os.write(self._fd, self._view[done:length])
        self._fill = 0

    def _open(self) -> bool:
        return self._fd is not None

    def _sync_and_close(self) -> None:
        assert self._fd is not None
        if self._fill:  # the tail goes out padded to a whole sector, then the file is cut to its size
            padded = -(-self._fill // ALIGN) * ALIGN
            self._view[self._fill:padded] = bytes(padded - self._fill)
            self._write_out(padded)
            os.ftruncate(self._fd, self._size)
        os.fsync(self._fd)
        self._close()

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._buf is not None:
            self._view.release()
            _give_back(self._buf)
            self._buf = None
