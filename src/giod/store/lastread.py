"""The last read of each database, recorded for the tier rules that go by it (``--unread-for``).

Every container read of a store notes its database here (:meth:`ReadLog.note`: a
dictionary look-up under a lock, nothing else on the read's path). A timer
thread writes what was noted, in ONE transaction (``Catalog.record_reads``)
some seconds after the first read of a batch; a database noted once is not noted
again for :data:`INTERVAL_S`, so a job reading a database many times, or many
jobs reading it within the interval, cost one row written. A server notes the
files it serves by path (its clients' reads), resolved to their databases in the
same batched write. Closing the federation writes what is left.

Nothing is written by a reader without the right to: a remote catalog (its
server records what it serves), a SQLite catalog file or directory this process
cannot write, or a catalog that refused the first write (then the log stops for
the process). A read of a pinned snapshot is a read of the database like any
other: it is recorded, and the write, not versioned, changes no snapshot.
The ``record_reads`` setting turns it off.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["FLUSH_S", "INTERVAL_S", "ReadLog", "may_write"]

INTERVAL_S = 3600.0  # a database's reads are recorded at most once per this many seconds (per process)
FLUSH_S = 5.0  # what was noted is written this long after the first note of a batch

log = logging.getLogger("giod.tier")


def may_write(catalog: Any) -> bool:
    """Whether this process may write the last reads to ``catalog`` (asked once, without writing)."""
    if getattr(catalog, "record_reads", None) is None:
        return False  # a remote catalog: its server records the reads it serves
    if getattr(catalog, "dialect", None) == "sqlite":
        parts = urlsplit(str(getattr(catalog, "url", "")))
        path = unquote(parts.path)
        if not path or path == "/:memory:":
            return True
        return os.access(path, os.W_OK) and os.access(os.path.dirname(path) or ".", os.W_OK)
    return True


class ReadLog:
    """Databases (and served files) read, written to the catalog in batches, at most once per interval each."""

    def __init__(self, catalog: Any, *, enabled: bool = True, interval_s: float = INTERVAL_S, flush_s: float = FLUSH_S):
        self.catalog = catalog
        self.interval_s, self.flush_s = interval_s, flush_s
        self.enabled = enabled and may_write(catalog)
        self.written = 0  # rows handed to the catalog (databases and paths), for the curious and the tests
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # one write at a time: a flush returns after any under way
        self._ids: dict[int, float] = {}  # database id -> unix time of the read, waiting for the next write
        self._paths: dict[str, float] = {}  # served file -> unix time, the same
        self._seen: dict[Any, float] = {}  # id or path -> monotonic time it was last noted
        self._timer: threading.Timer | None = None
        self._pid = os.getpid()

    def note(self, database_id: int) -> None:
        """A read of database ``database_id`` (cheap: written later, by another thread)."""
        if self.enabled:
            self._note(database_id, self._ids)

    def note_path(self, path: str) -> None:
        """A read of the container file ``path`` (a server serving it), resolved to its database when written."""
        if self.enabled:
            self._note(path, self._paths)

    def _note(self, key: Any, into: dict[Any, float]) -> None:
        now = time.monotonic()
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the timer stayed with the parent
                self._ids, self._paths, self._seen, self._timer, self._pid = {}, {}, {}, None, os.getpid()
            last = self._seen.get(key)
            if last is not None and now - last < self.interval_s:
                return
            self._seen[key] = now
            into[key] = time.time()
            if self._timer is None:
                self._timer = threading.Timer(self.flush_s, self.flush)
                self._timer.daemon = True
                self._timer.name = "giod-read-log"
                self._timer.start()

    def flush(self) -> int:
        """Write what was noted now, in one transaction; the number of rows handed over. Returns once every
        read noted before the call is written (a write under way in the timer's thread is waited for)."""
        with self._writing:
            return self._flush()

    def _flush(self) -> int:
        with self._lock:
            ids, paths = self._ids, self._paths
            self._ids, self._paths, self._timer = {}, {}, None
            if len(self._seen) > 100_000:  # forget what the interval no longer covers
                cut = time.monotonic() - self.interval_s
                self._seen = {k: t for k, t in self._seen.items() if t >= cut}
        if not ids and not paths:
            return 0
        try:
            record: Callable[..., int] = self.catalog.record_reads
            record(ids.keys(), max([*ids.values(), *paths.values()]), paths=paths.keys())
        except Exception as exc:  # noqa: BLE001 - whatever the catalog says, a read must never fail for it
            log.info("last reads are not recorded by this process: %s", exc)
            self.enabled = False
            return 0
        self.written += len(ids) + len(paths)
        return len(ids) + len(paths)

    def close(self) -> None:
        """Write what is left (the federation closes)."""
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        if self.enabled:
            self.flush()
