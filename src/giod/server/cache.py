"""The shared result cache of server-side queries.

A query names a dataset, an expression, columns and a limit, and is answered
at one federation version. Versions never change once committed, so the
answer is exact for every user who asks the same thing at the same version:
no invalidation, only eviction (least recently used, bounded in bytes).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

__all__ = ["QueryCache"]


class QueryCache:
    def __init__(self, capacity: int = 256 << 20, largest: int = 64 << 20):
        self.capacity = capacity  # bytes held in all
        self.largest = largest  # answers bigger than this are not kept
        self._items: OrderedDict[Hashable, bytes] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> bytes | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: bytes) -> None:
        if len(value) > self.largest:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._held -= len(old)
            self._items[key] = value
            self._held += len(value)
            while self._held > self.capacity and self._items:
                _, dropped = self._items.popitem(last=False)
                self._held -= len(dropped)

    def __len__(self) -> int:
        return len(self._items)

    @property
    def held(self) -> int:
        return self._held
