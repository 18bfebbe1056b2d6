"""The containers of one read, read side by side on the machine's cores.

Decoding a container is mostly work that lets go of Python's lock: Arrow's
decompression and IPC decoding, the memory map's page faults, CRC-32C over
large buffers. So the containers a read needs (``raw.tracker``, ``reco``,
``tag`` of one database) are read by a few threads at once, one container
each, and handed back in order; a failure is raised as if the reads had run
one after the other (the first in order wins).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["READ_THREADS", "map_reads"]

T = TypeVar("T")
R = TypeVar("R")

#: threads that read the containers of one read: one per core, at most four (more only contend)
READ_THREADS = max(1, min(4, os.cpu_count() or 1))


def map_reads(fn: Callable[[T], R], items: Sequence[T], threads: int | None = None) -> list[R]:
    """``[fn(i) for i in items]``, the calls running in up to ``threads`` threads."""
    n = min(len(items), READ_THREADS if threads is None else threads)
    if n < 2:
        return [fn(i) for i in items]
    # a pool per read: reads may nest (a Dask task in a thread), and a shared pool could starve itself
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="giod-read") as pool:
        futures = [pool.submit(fn, i) for i in items]
        return [f.result() for f in futures]
