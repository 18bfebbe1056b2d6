"""Reading through replicas: the best copy first, the next one when it fails.

The order is: sites not found down in the last :data:`DOWN_SECONDS`, then
the nearest (``distance``), then the least loaded (reads in flight from
this process). A read that fails on one copy goes on with the next, and the
caller never sees the failure unless every copy fails. That covers the
failures found when the file is opened (missing, wrong size, unreadable
footer, server down) and those found while it is read (a page whose CRC
does not match, a connection cut in the middle).

What a failure says about the copy:

- the site is away (a server that does not answer, a local directory that
  vanished): the site is skipped for a while; its replicas are not touched;
- the file is missing or corrupt on a site that is there: the replica is
  marked *bad* when another good copy exists; the replicator repairs it
  later from a good copy (reads do not wait for repairs). When it was the
  last good copy, the whole file is checked first (a cut connection must not
  condemn the only copy), and only a confirmed damage marks it *lost*.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from giod.catalog.records import ContainerRecord, SiteRecord
from giod.errors import GiodError, IntegrityError, NotFound, StorageError
from giod.replication.sites import site_gone
from giod.replication.transfer import file_state
from giod.storage.container import ContainerReader
from giod.storage.site import Site

__all__ = ["DOWN_SECONDS", "ReadBalancer", "mark_damaged", "read_replica"]

log = logging.getLogger("giod.replication")

T = TypeVar("T")
DOWN_SECONDS = 30.0  # a site that did not answer is tried last for this long


class ReadBalancer:
    """Per federation: reads in flight per site, and sites recently found down. Thread-safe.

    ``here`` names the site this process runs at (a Dask worker that declared
    its site): its replicas come first, as a job sent to the data reads the
    copy beside it. ``served`` counts the reads each site answered.
    """

    def __init__(self, here: str | None = None) -> None:
        self._lock = threading.Lock()
        self.in_flight: Counter[str] = Counter()
        self.served: Counter[str] = Counter()
        self._down: dict[str, float] = {}
        self.here = here

    def order(self, sites: Sequence[SiteRecord]) -> list[SiteRecord]:
        """Healthy before recently down, then this process's own site, then nearest, then least loaded."""
        now = time.monotonic()
        with self._lock:
            down = {name for name, until in self._down.items() if until > now}
            load = dict(self.in_flight)
        return sorted(sites, key=lambda s: (s.name in down, s.name != self.here, s.distance,
                                            load.get(s.name, 0), s.name))

    def begin(self, site: str) -> None:
        with self._lock:
            self.in_flight[site] += 1

    def end(self, site: str) -> None:
        with self._lock:
            self.in_flight[site] -= 1
            if self.in_flight[site] <= 0:
                del self.in_flight[site]

    def down(self, site: str) -> None:
        with self._lock:
            self._down[site] = time.monotonic() + DOWN_SECONDS

    def up(self, site: str) -> None:
        """``site`` answered a read."""
        with self._lock:
            self._down.pop(site, None)
            self.served[site] += 1

    def is_down(self, site: str) -> bool:
        with self._lock:
            return self._down.get(site, 0.0) > time.monotonic()


def mark_damaged(catalog: Any, container: ContainerRecord, site: Site, exc: GiodError) -> str | None:
    """Record that ``site``'s copy of ``container`` is missing or corrupt; returns the state set (None: none).

    The last good copy is checked whole before it is given up. Errors while
    marking (a read-only token, a catalog away) are logged, never raised: the
    reader has its data from another copy, or its own error to report.
    """
    try:
        states = catalog.replicas(container.id)
        others = [rec.name for rec, state in states if state == "good" and rec.name != site.name]
        if not others:
            found = file_state(site, container.path, container.size, container.checksum)
            if found.intact:
                log.warning("container %s at site %s failed to read (%s) but checks whole: kept good",
                            container.path, site.name, exc)
                return None
        state = catalog.mark_damaged(container.id, site.name)
    except GiodError as failure:
        log.warning("could not mark container %s at site %s damaged: %s", container.path, site.name, failure)
        return None
    if state == "lost":
        log.error("container %s: its last copy (site %s) is damaged: %s; the data are lost unless a copy "
                  "is found (giod verify)", container.path, site.name, exc)
    else:
        log.warning("container %s at site %s is damaged (%s): marked bad, the replicator repairs it",
                    container.path, site.name, exc)
    return str(state) if state is not None else None


def read_replica(catalog: Any, open_site: Callable[[str], Site], candidates: Sequence[SiteRecord],
                 container: ContainerRecord, read: Callable[[ContainerReader], T],
                 balancer: ReadBalancer, keep: Callable[[ContainerReader], bool] | None = None) -> T:
    """``read(reader)`` on the best copy of ``container``, failing over to the next on any failure. The reader
    is closed after the read, unless ``keep(reader)``, asked once it has read, takes it (the caller's now)."""
    if not candidates:
        raise NotFound(f"container {container.path} has no good replica on any site")
    failures: list[GiodError] = []
    for rec in balancer.order(candidates):
        site: Site | None = None
        opened = False
        try:
            site = open_site(rec.name)
            site.expect_size(container.path, container.size)  # a remote site: spares a request
            balancer.begin(rec.name)
            try:
                reader = ContainerReader.of(site, container)
                opened = True
                taken = False
                try:
                    result = read(reader)
                    taken = keep is not None and keep(reader)
                finally:
                    if not taken:
                        reader.close()
            finally:
                balancer.end(rec.name)
        except (NotFound, IntegrityError, StorageError) as exc:
            if opened and isinstance(exc, NotFound):
                raise  # a column or row the file does not have: the request is wrong, not the copy
            failures.append(exc)
            if site is None or site_gone(site, exc):
                balancer.down(rec.name)
                log.warning("site %s is unreachable (%s): reading %s elsewhere", rec.name, exc, container.path)
            else:
                mark_damaged(catalog, container, site, exc)
            continue
        balancer.up(rec.name)
        return result
    if len(failures) == 1:
        raise failures[0]
    kinds = {type(f) for f in failures}
    cls = kinds.pop() if len(kinds) == 1 else StorageError
    raise cls(f"no replica of {container.path} could be read: " + "; ".join(str(f) for f in failures))
