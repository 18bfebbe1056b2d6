"""Reading ahead: the next item of a source made in a thread while the caller uses this one.

Import and export both alternate between a side that reads (uproot's or giod's
decompression, numpy) and a side that writes (pyarrow's or zlib's compression);
each spends much of its time outside the GIL, so on two cores they overlap.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar, cast

__all__ = ["ReadAhead", "read_ahead"]

_T = TypeVar("_T")
_END = object()


class ReadAhead(Iterator[_T]):
    """``items`` in order, the next one made in a thread while the caller uses this one (see
    :func:`read_ahead`). The first item is asked for at once, when the object is made: the caller
    may do work of its own (an export makes its ROOT tree) while it is read."""

    def __init__(self, items: Iterable[_T]) -> None:
        self._it = iter(items)
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=1, thread_name_prefix="giod-read-ahead")
        self._pending: Future[object] | None = self._pool.submit(next, self._it, _END)

    def __iter__(self) -> ReadAhead[_T]:
        return self

    def __next__(self) -> _T:
        if self._pending is None or self._pool is None:
            raise StopIteration
        try:
            item = self._pending.result()
        except BaseException:
            self.close()
            raise
        if item is _END:
            self.close()
            raise StopIteration
        self._pending = self._pool.submit(next, self._it, _END)
        return cast(_T, item)

    def close(self) -> None:
        """Wait for the item being made, drop it and close the source (a generator cannot be
        closed while its thread runs it). Called at the end, on an error, and by ``with``."""
        pool, self._pool, self._pending = self._pool, None, None
        if pool is None:
            return
        pool.shutdown(wait=True)
        close = getattr(self._it, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> ReadAhead[_T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # dropped unfinished (a ``for`` loop left by an error): closed all the same
        if getattr(self, "_pool", None) is not None:
            self.close()


def read_ahead(items: Iterable[_T]) -> ReadAhead[_T]:
    """``items`` in order, the next one made in a thread while the caller uses this one.

    An import reads and converts a chunk (uproot's decompression, numpy) while its writer encodes,
    compresses and writes the one before (pyarrow); an export reads and takes apart the next chunk
    of the dataset while uproot compresses this one (zlib). Both sides spend much of their time
    outside the GIL, so on two cores the slower of the two sets the pace instead of their sum. At
    most one item more is held in memory. An error of the reading is raised at the item it would
    have given; when the caller stops early (its own error; ``with`` or ``close()`` say when, else
    when the object is dropped), the item being read is finished, then dropped and the source closed.
    """
    return ReadAhead(items)
