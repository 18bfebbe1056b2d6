"""The server's caches, each bounded: least recently used entries go first.

:class:`QueryCache` holds answers of server-side queries. A query names a
dataset, an expression, columns and a limit, and is answered at one
federation version. Versions never change once committed, so the answer is
exact for every user who asks the same thing at the same version: no
invalidation, only eviction.

:class:`EntriesCache` holds the entry numbers of the selections the event
display steps through (8 bytes per selected event), so that "next" does not
evaluate the expression again.

:class:`ETagCache` holds the ETag of each file served (its catalog checksum),
keyed by path, size and modification time, so that a client's thousands of
range requests do not each cost a catalog query. A server sees every file
of its sites over its life: without a bound the cache would grow with them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

import numpy as np

__all__ = ["ENTRIES_BYTES", "ENTRIES_KEPT", "ETAG_ENTRIES", "ETAG_BYTES", "QUERY_BYTES", "QUERY_LARGEST",
           "ETagCache", "EntriesCache", "LRU", "QueryCache"]

QUERY_BYTES = 256 << 20  # bytes of query answers held in all
QUERY_LARGEST = 2 << 20  # answers bigger than this are not kept (nor held while they stream out: per client)
ETAG_ENTRIES = 100_000  # files whose ETag is kept
ETAG_BYTES = 32 << 20  # bytes of keys and ETags kept, as counted by ETagCache.cost
ENTRIES_KEPT = 32  # selections whose entry numbers the event display keeps
ENTRIES_BYTES = 256 << 20  # bytes of those entry numbers (8 per selected event)

V = TypeVar("V")


class LRU(Generic[V]):
    """A thread-safe map bounded in entries and in bytes (``cost`` of each entry), least recently used out."""

    def __init__(self, capacity: int, *, max_entries: int | None = None, largest: int | None = None):
        self.capacity = capacity  # bytes held in all
        self.max_entries = max_entries
        self.largest = capacity if largest is None else largest  # entries costing more are not kept
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def cost(self, key: Hashable, value: V) -> int:
        raise NotImplementedError

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: V) -> None:
        size = self.cost(key, value)
        if size > self.largest:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._held -= old[1]
            self._items[key] = (value, size)
            self._held += size
            while self._items and (self._held > self.capacity or
                                   (self.max_entries is not None and len(self._items) > self.max_entries)):
                _, (_, dropped) = self._items.popitem(last=False)
                self._held -= dropped

    def __len__(self) -> int:
        return len(self._items)

    @property
    def held(self) -> int:
        """Bytes held, as counted by :meth:`cost`."""
        return self._held


class QueryCache(LRU[bytes]):
    """Query answers (Arrow IPC bytes), bounded in bytes; answers over ``largest`` are not kept."""

    def __init__(self, capacity: int = QUERY_BYTES, largest: int = QUERY_LARGEST):
        super().__init__(capacity, largest=largest)

    def cost(self, key: Hashable, value: bytes) -> int:
        return len(value)


class ETagCache(LRU[str]):
    """ETags of served files by (site, path, size, mtime), bounded in entries and bytes."""

    OVERHEAD = 200  # bytes of Python objects around each entry: tuple, ints, dict slot

    def __init__(self, max_entries: int = ETAG_ENTRIES, capacity: int = ETAG_BYTES):
        super().__init__(capacity, max_entries=max_entries)

    def cost(self, key: Hashable, value: str) -> int:
        parts = key if isinstance(key, tuple) else (key,)
        return self.OVERHEAD + len(value) + sum(len(p) for p in parts if isinstance(p, str))


class EntriesCache(LRU[np.ndarray]):
    """Entry numbers of selections by (dataset, version, expression), bounded in selections and bytes."""

    def __init__(self, max_entries: int = ENTRIES_KEPT, capacity: int = ENTRIES_BYTES):
        super().__init__(capacity, max_entries=max_entries)

    def cost(self, key: Hashable, value: np.ndarray) -> int:
        return int(value.nbytes)
