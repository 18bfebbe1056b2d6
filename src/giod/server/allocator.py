"""A data server's memory: freed buffers kept for the next request instead of given back.

A server moving files allocates a buffer for every piece it reads or sends
(1 MiB) and frees it a moment later. glibc gives the top of its heap back to
the system as soon as a few MiB there are free, so the next pieces land on
fresh pages that the kernel must find, zero and map — and on a virtual
machine whose host reclaims the guest's free memory (balloon free-page
reporting), that the host must fault in again. Measured on the development
VM, replicating 1.9 GB between two servers on loopback through the latency
proxy at 250 ms, that churn was a third of all CPU time and made one run in
three twice as slow.

:func:`keep_freed_memory` sets glibc's thresholds once per process: buffers
up to 32 MiB come from the heap, and freed memory stays in the process until
more than 256 MiB of it lies unused at the top of a heap. A server thus keeps
about what its busiest moment needed; that is the price, and it is bounded.
Elsewhere than glibc it does nothing.

:func:`give_back_freed_memory` returns what is free in every heap to the
system at once (``malloc_trim``): the server calls it when its last streamed
answer ends, so that what a crowd of clients made it hold does not stay
after they have gone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "arrow_on_malloc", "give_back_freed_memory", "keep_freed_memory"]

MMAP_THRESHOLD = 32 << 20  # bytes; larger allocations get pages of their own (glibc's most)
TRIM_THRESHOLD = 256 << 20  # bytes free at a heap's top before they are given back
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_freed_memory(trim: int = TRIM_THRESHOLD, mmap_threshold: int = MMAP_THRESHOLD) -> bool:
    """Set glibc's malloc thresholds for this process; False where there is no glibc to tell."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # both, or neither helps: a fixed trim threshold also fixes the mmap threshold at its 128 KiB default
    return bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(_M_TRIM_THRESHOLD, trim))


def arrow_on_malloc() -> None:
    """Arrow's buffers from malloc, like every other buffer of the process.

    pyarrow's own pool (mimalloc) keeps what each worker thread freed until
    that thread allocates again, and the threads of a server that served a
    crowd wait idle: measured with ten clients that stopped reading a query
    answer, the server held twice the memory, and kept 150 MB after they had
    gone, which :func:`give_back_freed_memory` cannot reach.
    """
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def give_back_freed_memory() -> bool:
    """Return the free memory of every heap of this process to the system; False where there is no glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return bool(trim(0))
