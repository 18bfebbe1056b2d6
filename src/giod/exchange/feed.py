"""Change feeds: being woken when a federation commits, instead of asking it every so often.

``open_feed(fed)`` gives the feed that suits where the federation lives:

- an embedded (SQLite) federation: the catalog file is watched (inotify and
  its kin, through ``watchfiles``); a commit writes the write-ahead log, which
  wakes the follower, and the follower then reads the version;
- a PostgreSQL catalog: ``LISTEN giod_versions``; a trigger on the
  federation row notifies every version when its transaction commits
  (catalog migration 8);
- a giod server: ``GET /api/v1/feed``, a stream of server-sent events, one
  per new version, which the server itself learns from one of the two above.

Every feed answers one question, ``wait(after, timeout)``: the federation's
version once it is past ``after`` (at once if it already is), or the current
version when ``timeout`` runs out. A wake-up is only a hint to read the
version again, so a spurious one costs a read and a missed one cannot happen
between two waits: each feed starts listening before it first reads.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from giod.catalog.engine import parse_url
from giod.catalog.wire import checked, got
from giod.errors import CatalogError, GiodError, StorageError, needs_extra

__all__ = ["CHANNEL", "Feed", "FileFeed", "PostgresFeed", "ServerFeed", "open_feed"]

log = logging.getLogger("giod.exchange")

CHANNEL = "giod_versions"  # the NOTIFY channel of catalog migration 8
FOREVER = 3600.0  # the longest single wait; callers loop
MAX_EVENT = 65536  # bytes of one server-sent event: a version is a few dozen
WAL_SUFFIXES = ("", "-wal")  # a commit writes the log, a checkpoint the file; readers touch only -shm


class Feed(Protocol):
    """Wakes its caller when the federation's version moves."""

    def wait(self, after: int, timeout: float | None = None) -> int:
        """The version once it exceeds ``after``; the current one when ``timeout`` seconds pass first."""
        ...

    def close(self) -> None: ...


def open_feed(fed: Any, *, stop: threading.Event | None = None) -> Feed:
    """The change feed of federation ``fed`` (see the module docstring).

    ``stop``: setting it makes a ``wait`` in progress return soon (Ctrl-C, shutdown).
    """
    url = str(fed.catalog.url)
    if url.startswith(("http://", "https://")):
        return ServerFeed(fed, stop=stop)
    if fed.catalog.dialect == "postgresql":
        return PostgresFeed(fed, stop=stop)
    return FileFeed(fed, Path(str(parse_url(url).url.database)), stop=stop)


def _until(timeout: float | None) -> float:
    return time.monotonic() + (FOREVER if timeout is None else max(0.0, timeout))


class FileFeed:
    """An SQLite catalog watched for writes (its file and write-ahead log)."""

    def __init__(self, fed: Any, path: Path, *, stop: threading.Event | None = None):
        # watchfiles' low-level watcher (its documented RustNotify): unlike watch(), it listens from
        # the moment it is made, which a feed needs before it first reads the version
        try:
            from watchfiles._rust_notify import RustNotify
        except ImportError as exc:  # watchfiles comes with giod[server], not with the core
            raise needs_extra("server", "following an SQLite catalog's commits (--follow)", exc) from exc

        self.fed, self.path = fed, path
        self.stop = stop or threading.Event()
        self._names = {path.name + s for s in WAL_SUFFIXES}
        # changes are buffered between two waits: one that lands while the version is read is not lost
        self._notify = RustNotify([str(path.parent)], False, False, 50, False, False)

    def wait(self, after: int, timeout: float | None = None) -> int:
        deadline = _until(timeout)
        while True:
            version = int(self.fed.catalog.version())
            left = deadline - time.monotonic()
            if version > after or left <= 0 or self.stop.is_set():
                return version
            # a short step bounds how long a set ``stop`` goes unnoticed
            self._changed(min(left, 0.5))

    def _changed(self, seconds: float) -> bool:
        while seconds > 0:
            t0 = time.monotonic()
            found = self._notify.watch(1, 5, max(1, int(seconds * 1000)), None)
            if isinstance(found, set) and any(Path(p).name in self._names for _, p in found):
                return True
            seconds -= time.monotonic() - t0
        return False

    def close(self) -> None:
        self._notify.close()


class PostgresFeed:
    """``LISTEN giod_versions`` on a connection of its own (autocommit: notifications arrive at once)."""

    def __init__(self, fed: Any, *, stop: threading.Event | None = None):
        import psycopg

        self.fed = fed
        self.stop = stop or threading.Event()
        target = parse_url(str(fed.catalog.url)).url.set(drivername="postgresql")
        try:
            self._conn = psycopg.connect(target.render_as_string(hide_password=False), autocommit=True)
            self._conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error as exc:
            raise CatalogError(f"cannot listen to catalog {fed.catalog.url}: {exc}") from exc

    def wait(self, after: int, timeout: float | None = None) -> int:
        import psycopg

        deadline = _until(timeout)
        while True:
            version = int(self.fed.catalog.version())
            left = deadline - time.monotonic()
            if version > after or left <= 0 or self.stop.is_set():
                return version
            try:
                for note in self._conn.notifies(timeout=min(left, 0.5), stop_after=1):
                    if int(note.payload) > after:
                        break
            except psycopg.Error as exc:
                raise CatalogError(f"listening to catalog {self.fed.catalog.url}: {exc}") from exc

    def close(self) -> None:
        self._conn.close()


class ServerFeed:
    """The server-sent events of ``GET /api/v1/feed``, read by a thread that keeps the latest version."""

    def __init__(self, fed: Any, *, stop: threading.Event | None = None):
        self.fed = fed
        self.endpoint = fed.catalog.endpoint
        self.stop = stop or threading.Event()
        self.latest = int(fed.catalog.version())
        self._changed = threading.Condition()
        self._closed = threading.Event()
        self._response: Any = None  # the stream being read, closed from another thread by close()
        self._thread = threading.Thread(target=self._listen, name="giod-feed", daemon=True)
        self._thread.start()

    def wait(self, after: int, timeout: float | None = None) -> int:
        deadline = _until(timeout)
        with self._changed:
            while self.latest <= after and not self.stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(min(left, 0.5))
            return self.latest

    def _saw(self, version: Any) -> None:
        """Take a version the server announced; it is a hint: no further than the server's catalog says
        (an announcement past it, garbled or not, made a follower copy at that version again and again,
        waiting on nothing, or would have pinned its reads past every later commit)."""
        announced = checked(version, "int", "a change feed's version")
        with self._changed:
            if announced <= self.latest:
                return
        current = self.fed.catalog.fresh_version()  # not the version a catalog reuses for a while
        with self._changed:
            version = min(announced, current)
            if version > self.latest:
                self.latest = version
                self._changed.notify_all()

    def _listen(self) -> None:
        delay = 0.1
        while not self._closed.is_set():
            try:
                self._stream()
                delay = 0.1
            except (GiodError, OSError, ValueError) as exc:
                log.warning("change feed of %s interrupted: %s", self.endpoint.base, exc)
            except Exception as exc:  # noqa: BLE001 - urllib3's errors while reading: reconnect
                log.warning("change feed of %s interrupted: %s", self.endpoint.base, exc)
            if self._closed.wait(delay):
                return
            delay = min(delay * 2, 5.0)

    def _stream(self) -> None:
        r = self.endpoint.stream("GET", f"/api/v1/feed?after={self.latest}", what="change feed",
                                 headers={"accept": "text/event-stream"})
        self._response = r
        try:
            buffer = b""
            while not self._closed.is_set():
                chunk = r.read1(65536)
                if not chunk:
                    raise StorageError("the server closed the change feed")
                buffer += chunk
                while b"\n\n" in buffer:
                    event, buffer = buffer.split(b"\n\n", 1)
                    for line in event.decode("utf-8", "replace").splitlines():
                        if line.startswith("data:"):
                            self._saw(got(json.loads(line[5:]), "version"))
                if len(buffer) > MAX_EVENT:  # an event never ended: not held whole, however long it grows
                    raise StorageError(f"an event of the change feed runs past {MAX_EVENT} bytes")
        finally:
            self._response = None
            r.close()  # never back to the pool: the server would still be streaming on it

    def close(self) -> None:
        self._closed.set()
        response = self._response
        if response is not None:
            # wakes the reading thread at once; one that is closing the stream meanwhile (the server ended
            # it) may have closed its socket already: nothing is left to wake
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                response.shutdown()
