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
import threading
from collections.abc import Callable, Sequence
from typing import Any

from giod.errors import GiodError, SchemaError
from giod.exchange.copy import ExchangeReport, copy_dataset
from giod.exchange.feed import Feed, open_feed

__all__ = ["follow", "follow_rules"]

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


def follow_rules(fed: Any, *, streams: int = 4, stop: threading.Event | None = None,
                 on_pass: Callable[[Any], None] | None = None, feed: Feed | None = None,
                 retry: float = RETRY) -> None:
    """Replicator passes, one as soon as the federation commits, until ``stop`` is set.

    A pass whose copies all succeeded waits for the next commit; one that
    left a rule unsatisfied (a site away) tries again after ``retry`` seconds.
    """
    from giod.replication import replicator_pass

    stop = stop or threading.Event()
    own = feed is None
    feed = feed or open_feed(fed, stop=stop)
    try:
        while not stop.is_set():
            seen = int(fed.catalog.version())  # read before the pass: a commit during it wakes the next
            try:
                result = replicator_pass(fed.catalog, fed.site, streams=streams)
            except GiodError as exc:
                log.error("replicator pass failed: %s", exc)
                feed.wait(seen, retry)
                continue
            if on_pass is not None:
                on_pass(result)
            if not result.ok:
                feed.wait(seen, retry)
            elif int(fed.catalog.version()) == seen:
                feed.wait(seen)
            # else the version moved during the pass (its own registrations, or a commit it may not
            # have seen): pass again at once; a pass with nothing to copy writes nothing, and then waits
    finally:
        if own:
            feed.close()
