"""Positioned reads for page-level reads: a memory-mapped path or a seekable file object."""

from __future__ import annotations

import io
import mmap
import os
from typing import Any, BinaryIO

import numpy as np

from giod.errors import IntegrityError, StorageError
from giod.storage.formats.parquet.footer import MAGIC

_TAIL = 64 << 10  # the first read at the end of a file: most footers fit in it
_MERGE_GAP = 0  # byte ranges of a file object closer than this are read as one (adjacent ones always are)


class Source:
    """Positioned reads from a path (memory-mapped) or a seekable binary file object."""

    def __init__(self, source: str | os.PathLike[str] | BinaryIO):
        self._path: str | None = None
        self._map: mmap.mmap | None = None
        self._tail, self._tail_at = b"", 0  # the footer read: page indexes usually sit just before the footer
        if isinstance(source, (str, os.PathLike)):
            self._path = os.fspath(source)
            try:
                self.file: Any = open(self._path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
            except OSError as exc:
                raise StorageError(f"cannot open {self._path}: {exc}") from exc
        else:
            self.file = source
        try:
            self.size: int = self.file.seek(0, os.SEEK_END)
        except (OSError, ValueError) as exc:
            self.close()
            raise StorageError(f"cannot read {self.name}: {exc}") from exc
        if self._path is not None and self.size:
            try:  # a mapped file costs no system call per page
                self._map = mmap.mmap(self.file.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):
                self._map = None

    @property
    def name(self) -> str:
        return self._path or str(getattr(self.file, "name", "<file object>"))

    @property
    def path(self) -> str | None:
        return self._path

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a view is still alive somewhere: the collector closes it
                pass
        if self._path is not None:
            self.file.close()

    def identity(self) -> tuple[Any, ...] | None:
        """A key that changes when the file does (None for file objects)."""
        if self._path is None:
            return None
        st = os.fstat(self.file.fileno())
        return os.path.abspath(self._path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns

    def read_into(self, offset: int, view: memoryview) -> None:
        if self._map is not None:
            view[:] = self._map[offset:offset + len(view)]
            return
        if offset >= self._tail_at and offset + len(view) <= self._tail_at + len(self._tail):
            view[:] = self._tail[offset - self._tail_at:offset - self._tail_at + len(view)]
            return
        try:
            self.file.seek(offset)
            got = 0
            readinto = getattr(self.file, "readinto", None)
            while got < len(view):
                if readinto is not None:
                    n = readinto(view[got:])
                else:
                    data = self.file.read(len(view) - got)
                    n = len(data)
                    view[got:got + n] = data
                if not n:
                    raise IntegrityError(f"{self.name} is truncated: {len(view)} bytes wanted at {offset}, "
                                         f"{got} found")
                got += n
        except OSError as exc:
            raise StorageError(f"cannot read {self.name}: {exc}") from exc

    def footer(self) -> bytes:
        if self.size < 12:
            raise IntegrityError(f"{self.name} is too short ({self.size} bytes) to be a Parquet file")
        tail = bytearray(min(self.size, _TAIL))
        self.read_into(self.size - len(tail), memoryview(tail))
        self._tail, self._tail_at = bytes(tail), self.size - len(tail)
        if tail[-4:] != MAGIC:
            if tail[-4:] == b"PARE":
                raise StorageError(f"{self.name}: encrypted Parquet footers are not supported")
            raise IntegrityError(f"{self.name} does not end with the Parquet magic bytes (truncated?)")
        n = int.from_bytes(tail[-8:-4], "little")
        if n + 12 > self.size:
            raise IntegrityError(f"{self.name}: footer length {n} exceeds the file size {self.size}")
        if n + 8 <= len(tail):
            return bytes(tail[len(tail) - 8 - n:len(tail) - 8])
        footer = bytearray(n)
        self.read_into(self.size - 8 - n, memoryview(footer))
        return bytes(footer)

    def read_ranges(self, offset: np.ndarray, length: np.ndarray, *, compact: bool = True) -> tuple[Any, np.ndarray]:
        """Byte ranges, neighbours read together: a buffer and where each range is in it.

        A mapped file is its own buffer unless ``compact`` asks for a copy of just the ranges.
        """
        if len(offset) and (np.any(offset < 0) or np.any(length < 0) or np.any(offset + length > self.size)):
            raise IntegrityError(f"{self.name}: byte range outside the file (corrupt page index?)")
        if self._map is not None and not compact:
            return memoryview(self._map), offset
        if len(offset) == 0:
            return bytearray(), np.zeros(0, dtype=np.int64)
        order = np.argsort(offset, kind="stable")
        start, stop = offset[order], offset[order] + length[order]
        new = np.ones(len(start), dtype=bool)
        new[1:] = start[1:] > np.maximum.accumulate(stop)[:-1] + _MERGE_GAP
        heads = np.flatnonzero(new)
        run = np.cumsum(new) - 1
        run_start, run_stop = start[heads], np.maximum.reduceat(stop, heads)
        run_at = np.cumsum(run_stop - run_start) - (run_stop - run_start)
        buf = bytearray(int(run_at[-1] + run_stop[-1] - run_start[-1]))
        view = memoryview(buf)
        many = getattr(self.file, "read_many", None) if self._map is None else None
        if many is not None and len(heads) > 1:  # a remote file: every run in flight at once
            runs = list(zip(run_start.tolist(), run_stop.tolist(), strict=True))
            for (a, b), at, data in zip(runs, run_at.tolist(), many(runs), strict=True):
                view[at:at + b - a] = data
        else:
            for a, b, at in zip(run_start.tolist(), run_stop.tolist(), run_at.tolist(), strict=True):
                self.read_into(a, view[at:at + b - a])
        where = np.empty(len(offset), dtype=np.int64)
        where[order] = run_at[run] + start - run_start[run]
        return buf, where


class Borrowed(io.RawIOBase):
    """A caller's file object lent to pyarrow, which closes the files it is given."""

    def __init__(self, f: Any):
        super().__init__()
        self._f = f

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return int(self._f.seek(offset, whence))

    def tell(self) -> int:
        return int(self._f.tell())

    def readinto(self, b: Any) -> int:
        if hasattr(self._f, "readinto"):
            return int(self._f.readinto(b))
        data = self._f.read(len(b))
        b[:len(data)] = data
        return len(data)
