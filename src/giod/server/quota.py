"""What one token may hold on a server's disks in uploads not yet committed.

A writer uploads its containers first and commits them after; until then
they are files no catalog row references. Without a bound, one write token
could fill a site with uploads it never commits. :class:`UploadQuota` counts,
per token, the bytes of its uploads in progress and of the files it uploaded
that are not registered yet, and refuses (``QuotaExceeded``, HTTP 429) an
upload that would take the token over its quota.

The count is kept in the server's memory. A file leaves it when its upload
fails, and, looked at again only when the token reaches its quota, when the
catalog has registered it or it is gone from the site (``giod gc`` removed
it): so the commit routes need not report to it, and a refusal is never
based on a stale count.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from giod.errors import QuotaExceeded

__all__ = ["UploadQuota"]

Item = tuple[str, str]  # (site, path)


class UploadQuota:
    """Bytes held per token in uploads not yet committed, at most ``per_token`` each."""

    def __init__(self, per_token: int):
        self.per_token = per_token
        self._held: dict[int, dict[Item, int]] = {}
        self._total: dict[int, int] = {}  # the sum of each token's items, kept as they change
        self._arriving: set[tuple[int, Item]] = set()  # uploads in progress: held whatever the site shows
        self._lock = threading.Lock()

    def held(self, token: int) -> int:
        with self._lock:
            return self._total.get(token, 0)

    def reserve(self, token: int, item: Item, size: int, still_held: Callable[[Item], bool]) -> None:
        """Count ``item`` as ``size`` bytes (it grows as an upload arrives); QuotaExceeded over the quota.

        ``still_held(item)`` tells whether a file counted earlier is still
        uncommitted; it is asked (outside the lock: it may query the catalog)
        only when the quota would be exceeded.
        """
        if self._try(token, item, size):
            return
        with self._lock:
            others = [i for i in self._held.get(token, {}) if i != item and (token, i) not in self._arriving]
        gone = [i for i in others if not still_held(i)]
        for i in gone:
            self.release(token, i)
        if not self._try(token, item, size):
            held = self.held(token) - self._size(token, item)
            raise QuotaExceeded(f"token {token} holds {held} bytes in uploads not yet committed; "
                                f"{size} more would exceed its quota of {self.per_token}: commit them first")

    def _size(self, token: int, item: Item) -> int:
        with self._lock:
            return self._held.get(token, {}).get(item, 0)

    def _try(self, token: int, item: Item, size: int) -> bool:
        with self._lock:
            mine = self._held.get(token, {})
            total = self._total.get(token, 0) - mine.get(item, 0) + size
            if total > self.per_token:
                return False
            mine[item] = size
            self._held[token] = mine
            self._total[token] = total
            self._arriving.add((token, item))
            return True

    def arrived(self, token: int, item: Item) -> None:
        """``item`` is published: it counts until the catalog registers it or it leaves the site."""
        with self._lock:
            self._arriving.discard((token, item))

    def release(self, token: int, item: Item) -> None:
        """``item`` no longer counts (its upload failed, or it was committed or removed)."""
        with self._lock:
            self._arriving.discard((token, item))
            mine = self._held.get(token)
            if mine is not None and item in mine:
                self._total[token] -= mine.pop(item)
                if not mine:
                    del self._held[token], self._total[token]
