"""Subscriptions: keeping a destination in step with a source, woken by the source's change feed.

``follow(src, dst, "raw")`` copies what is new (``copy_dataset``), then
waits on the source's change feed (``giod.exchange.feed``) until its version
moves, and copies again, until ``stop`` is set. ``follow_rules(fed)`` does
the same for the replication rules of one federation: each commit wakes a
replicator pass, so a rule-bound site receives a new database as soon as it
is committed, not at the replicator's next interval.

A copy or pass that fails (a site or the catalog away for a moment) is
logged and tried again at the next wake-up or after ``retry`` seconds,
whichever comes first; nothing is lost, since every copy lands once.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from giod.errors import GiodError, SchemaError
from giod.exchange.copy import ExchangeReport, copy_dataset
from giod.exchange.feed import Feed, open_feed

__all__ = ["follow", "follow_rules", "start_copies"]

log = logging.getLogger("giod.exchange")

RETRY = 5.0  # seconds before a failed copy is tried again without a wake-up


def follow(src: Any, dst: Any, dataset: str, *, select: str | None = None,
           containers: Sequence[str] | None = None, as_name: str | None = None, site: str | None = None,
           stop: threading.Event | None = None, on_copy: Callable[[ExchangeReport], None] | None = None,
           on_database: Callable[[ExchangeReport], None] | None = None, feed: Feed | None = None,
           retry: float = RETRY) -> None:
    """Copy ``dataset`` from ``src`` to ``dst`` as it grows, until ``stop`` is set (see the module docstring).

    A refusal that another try cannot cure (SchemaError, an unknown dataset
    or container) ends it by raising.
    """
    stop = stop or threading.Event()
    own = feed is None
    feed = feed or open_feed(src, stop=stop)
    seen = -1
    at: int | None = None  # the version the feed announced (a server's catalog may answer an older one)
    try:
        while not stop.is_set():
            try:
                report = copy_dataset(src, dst, dataset, select=select, containers=containers, as_name=as_name,
                                      site=site, at=at, stop=stop, on_database=on_database)
            except (SchemaError, KeyError):  # NotFound is a KeyError: no dataset, no container
                raise
            except GiodError as exc:
                log.warning("copy of %s failed, trying again: %s", dataset, exc)
                at = feed.wait(seen, retry)
                continue
            if on_copy is not None:
                on_copy(report)
            seen = max(seen, report.until)
            at = feed.wait(seen)
    finally:
        if own:
            feed.close()


def follow_rules(fed: Any, *, streams: int = 4, interval: float = 60.0, stop: threading.Event | None = None,
                 on_pass: Callable[[Any], None] | None = None, feed: Feed | None = None,
                 retry: float = RETRY) -> None:
    """Replicator passes, one as soon as the federation commits, until ``stop`` is set.

    A full pass (``replicator_pass``: sites probed, damaged replicas
    repaired) runs first and every ``interval`` seconds. Each commit in
    between starts, at once, the copies the rules now miss (``start_copies``),
    beside those still under way: a database committed while another is on
    its way does not queue behind it. Nothing is probed on that path, so a
    site away shows as failed copies, and the next pass is a full one,
    ``retry`` seconds later.
    """
    from giod.replication import replicator_pass

    stop = stop or threading.Event()
    own = feed is None
    feed = feed or open_feed(fed, stop=stop)
    planning = threading.Lock()
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

    try:
        while not stop.is_set():
            seen = int(fed.catalog.version())  # read before planning: a commit meanwhile wakes the next round
            if failed.is_set() or time.monotonic() - last_full >= interval:
                for t in running:
                    t.join()
                running.clear()
                failed.clear()
                try:
                    report(replicator_pass(fed.catalog, fed.site, streams=streams))
                except GiodError as exc:
                    log.error("replicator pass failed: %s", exc)
                    failed.set()
                last_full = time.monotonic()
            else:
                try:
                    started = start_copies(fed.catalog, fed.site, streams=streams, on_done=report, lock=planning,
                                           since=planned)
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
        if own:
            feed.close()


def start_copies(catalog: Any, open_site: Callable[[str], Any], *, streams: int = 4,
                 on_done: Callable[[Any], None] | None = None,
                 lock: threading.Lock | None = None, since: int | None = None) -> threading.Thread | None:
    """Start, in a thread, the copies every rule misses and no other copy is making; None if there are none.

    Planning and marking the copies ``copying`` happen under ``lock``, so
    two rounds never plan the same copy; a replica left ``copying`` by a
    crashed run is the full pass's to redo. ``on_done`` gets a
    ``PassReport`` of the copies when they are over. ``since``: plan only
    for what was committed after that version (what earlier rounds planned
    is under way, or failed and left to the full pass).
    """
    from giod.replication import PassReport, rule_state, run_transfers

    with lock or threading.Lock():
        sites = catalog.sites()
        planned: set[tuple[int, str]] = set()
        transfers = []
        for rule in catalog.rules():
            for t in rule_state(catalog, rule, sites, changed_since=since).transfers:
                if t.previous != "copying" and (t.container.id, t.site) not in planned:
                    planned.add((t.container.id, t.site))
                    transfers.append(t)
        if not transfers:
            return None
        catalog.set_replica_states([(t.container.id, t.site, "copying") for t in transfers])

    def run() -> None:
        try:
            result = PassReport(transfers=run_transfers(catalog, open_site, transfers, streams=streams))
        except GiodError as exc:
            log.error("copies failed: %s", exc)
            result = PassReport()
            result.transfers.failed.append(("", "", str(exc)))
        if on_done is not None:
            on_done(result)

    thread = threading.Thread(target=run, name="giod-follow-copies", daemon=True)
    thread.start()
    return thread
