"""Subscriptions: keeping a destination in step with a source, woken by the source's change feed.

``follow(src, dst, "raw")`` copies what is new (``copy_dataset``), then
waits on the source's change feed (``giod.exchange.feed``) until its version
moves, and copies again, until ``stop`` is set. ``follow_rules(fed)`` does
the same for the replication rules of one federation: each commit wakes a
replicator pass, so a rule-bound site receives a new database as soon as it
is committed, not at the replicator's next interval.

A copy that fails for a reason another try may cure (a site or a catalog
away, a commit that lost a race: :func:`permanent` says which) is logged and
tried again after a wait that doubles from try to try, up to a cap
(:class:`Backoff`); nothing is lost, since every copy lands once. Any other
error (bad input, a refused source) ends the follower by raising it. A skim
that stopped before a source database it cannot read yet waits for the
source's next version. A replicator pass that fails is tried again at the
next wake-up or after ``retry`` seconds, whichever comes first.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from giod.errors import CatalogError, GiodError, QuotaExceeded, StorageError, TooLarge
from giod.exchange.copy import ExchangeReport, copy_dataset
from giod.exchange.feed import Feed, open_feed
from giod.replication.rules import Claims

__all__ = ["Backoff", "follow", "follow_rules", "permanent", "start_copies"]

log = logging.getLogger("giod.exchange")

RETRY = 5.0  # seconds before a failed copy is tried again without a wake-up


@dataclass(frozen=True)
class Backoff:
    """Waits between the tries of a copy that keeps failing: ``first`` seconds, doubling, at most ``cap``."""

    first: float = 1.0
    cap: float = 60.0

    def delay(self, failures: int) -> float:
        """The wait after the ``failures``-th failure in a row (1 for the first)."""
        return min(self.cap, self.first * 2.0 ** min(max(failures - 1, 0), 64))


def permanent(exc: GiodError) -> bool:
    """Whether another try cannot cure ``exc``: anything but a site or a catalog that did not answer, a commit
    that lost a race, or a quota not yet freed (bad input, a refused source, a bound exceeded)."""
    if isinstance(exc, QuotaExceeded):
        return False
    return isinstance(exc, TooLarge) or not isinstance(exc, (StorageError, CatalogError))


def follow(src: Any, dst: Any, dataset: str, *, select: str | None = None,
           containers: Sequence[str] | None = None, as_name: str | None = None, site: str | None = None,
           stop: threading.Event | None = None, on_copy: Callable[[ExchangeReport], None] | None = None,
           on_database: Callable[[ExchangeReport], None] | None = None, feed: Feed | None = None,
           backoff: Backoff | None = None, pause: Callable[[float], bool] | None = None) -> None:
    """Copy ``dataset`` from ``src`` to ``dst`` as it grows, until ``stop`` is set (see the module docstring).

    A permanent error (:func:`permanent`) ends it by raising; a transient
    one is retried after ``backoff``'s waits. ``pause(seconds)`` waits
    (default: on ``stop``) and says whether ``stop`` is set: tests count the
    tries against a clock of their own.
    """
    stop = stop or threading.Event()
    backoff = backoff or Backoff()
    pause = pause or stop.wait
    own = feed is None
    feed = feed or open_feed(src, stop=stop)
    seen = -1
    at: int | None = None  # the version the feed announced (a server's catalog may answer an older one)
    failures = 0
    try:
        while not stop.is_set():
            try:
                report = copy_dataset(src, dst, dataset, select=select, containers=containers, as_name=as_name,
                                      site=site, at=at, stop=stop, on_database=on_database)
            except GiodError as exc:
                if permanent(exc):
                    raise
                failures += 1
                delay = backoff.delay(failures)
                log.warning("copy of %s failed (%d in a row), trying again in %g s: %s", dataset, failures, delay,
                            exc)
                at = None
                if pause(delay):
                    break
                continue
            failures = 0
            if on_copy is not None:
                on_copy(report)
            # a skim waiting for a source database to be reconstructed waits for the source's next version
            seen = max(seen, report.source_version if report.pending else report.until)
            at = feed.wait(seen)
    finally:
        if own:
            feed.close()


def follow_rules(fed: Any, *, streams: int = 4, interval: float = 60.0, stop: threading.Event | None = None,
                 on_pass: Callable[[Any], None] | None = None, feed: Feed | None = None,
                 retry: float = RETRY) -> None:
    """Replicator passes, one as soon as the federation commits, until ``stop`` is set.

    A full pass (``replicator_pass``: sites probed, damaged replicas
    repaired, every replica listed) runs first and every ``interval``
    seconds, in a thread of its own, so that a commit never waits for it:
    every round, the one that starts a full pass included, starts at once
    the copies the rules now miss (``start_copies``), beside those still
    under way, so a database committed while another is on its way does not
    queue behind it. The full pass and these copies share only their claims
    (``Claims``: which copies are under way), never a lock held while the
    catalog is read, so a pass reading thousands of databases holds back no
    copy. Nothing is probed on the commits' path, so a site away shows as
    failed copies, and the next pass is a full one, ``retry`` seconds later.
    """
    from giod.replication import replicator_pass

    stop = stop or threading.Event()
    own = feed is None
    feed = feed or open_feed(fed, stop=stop)
    claims = Claims()  # copies under way in this process, full pass or commits'
    running: list[threading.Thread] = []
    failed = threading.Event()
    last_full = -math.inf
    planned = None  # the version the last round planned at: the next plans what came after it

    def report(result: Any) -> None:
        # a rule still unsatisfied after a pass may only mean that databases were committed meanwhile:
        # what calls for a full pass is a copy that failed or a site that did not answer
        if not result.transfers.ok or result.away:
            failed.set()
        if on_pass is not None:
            on_pass(result)

    full: threading.Thread | None = None

    def full_pass() -> None:
        try:
            report(replicator_pass(fed.catalog, fed.site, streams=streams, claims=claims))
        except GiodError as exc:
            log.error("replicator pass failed: %s", exc)
            failed.set()

    try:
        while not stop.is_set():
            seen = int(fed.catalog.version())  # read before planning: a commit meanwhile wakes the next round
            if (full is None or not full.is_alive()) and (failed.is_set()
                                                          or time.monotonic() - last_full >= interval):
                failed.clear()
                full = threading.Thread(target=full_pass, name="giod-full-pass", daemon=True)
                full.start()
                last_full = time.monotonic()
            # the commits' copies, every round, beside a full pass and never behind it (what both plan,
            # the first to claim it copies)
            try:
                started = start_copies(fed.catalog, fed.site, streams=streams, on_done=report, since=planned,
                                       claims=claims)
            except GiodError as exc:
                log.error("planning copies failed: %s", exc)
                failed.set()
                started = None
            running[:] = [t for t in running if t.is_alive()] + ([started] if started is not None else [])
            # what was committed up to ``seen`` is planned (or, if planning failed, the full pass's next)
            planned = seen
            if failed.is_set():
                feed.wait(seen, retry)
            elif int(fed.catalog.version()) == seen:
                feed.wait(seen, max(0.0, last_full + interval - time.monotonic()))
            # else the version moved meanwhile (copies marked or registered, or a commit): plan again at
            # once; a round that finds nothing new writes nothing, and then waits
    finally:
        for t in running:
            t.join()
        if full is not None:
            full.join()
        if own:
            feed.close()


def start_copies(catalog: Any, open_site: Callable[[str], Any], *, streams: int = 4,
                 on_done: Callable[[Any], None] | None = None, since: int | None = None,
                 claims: Claims | None = None) -> threading.Thread | None:
    """Start, in a thread, the copies every rule misses and no other copy is making; None if there are none.

    Planning reads the catalog without a lock; the copies are then claimed
    (``claims``, a ``giod.replication.rules.Claims`` shared with the other
    threads of this process: a full pass, earlier rounds) and marked
    ``copying``, so two threads never make the same copy; a replica left
    ``copying`` by a crashed run is the full pass's to redo. ``on_done``
    gets a ``PassReport`` of the copies when they are over. ``since``: plan
    only for what was committed after that version (what earlier rounds
    planned is under way, or failed and left to the full pass).
    """
    from giod.replication import PassReport, rule_state, run_transfers

    claims = claims if claims is not None else Claims()
    mark = claims.mark()
    planned: list[Any] = []
    try:
        sites = catalog.sites()
        seen: set[tuple[int, str]] = set()
        for rule in catalog.rules():
            for t in rule_state(catalog, rule, sites, changed_since=since).transfers:
                if t.previous != "copying" and (t.container.id, t.site) not in seen:
                    seen.add((t.container.id, t.site))
                    planned.append(t)
    except BaseException:
        claims.claim(mark, ())
        raise
    transfers = claims.claim(mark, planned)
    if not transfers:
        return None
    try:
        catalog.set_replica_states([(t.container.id, t.site, "copying") for t in transfers])
    except BaseException:
        claims.release(transfers)
        raise

    def run() -> None:
        try:
            result = PassReport(transfers=run_transfers(catalog, open_site, transfers, streams=streams))
        except GiodError as exc:
            log.error("copies failed: %s", exc)
            result = PassReport()
            result.transfers.failed.append(("", "", str(exc)))
        finally:
            claims.release(transfers)
        if on_done is not None:
            on_done(result)

    thread = threading.Thread(target=run, name="giod-follow-copies", daemon=True)
    thread.start()
    return thread
