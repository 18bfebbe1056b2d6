"""Databases moved to a nearline site by the tier rules: copied to tape, then dropped from disk.

For each rule, every database of its dataset older than the rule's age gets a
good replica of each container on the rule's nearline site (the ordinary
verified copy of ``giod.replication``, then the library's write queue flushed
and waited for: a mount per cartridge), and only then loses its replicas on
disk sites: the catalog drops a disk replica in the transaction that finds
the tape copy good, and the disk file goes after that. A kill at any point
leaves every container with at least one good, registered copy: before the
drop both copies count, after it the disk file is an orphan (``giod fsck``,
``giod gc``); running the rules again finishes the move.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from giod.errors import ConfigError, GiodError
from giod.replication.copy import plan_copies, run_transfers
from giod.storage.tape.site import SCHEME, NearlineSite
from giod.store.snapshot import Store

__all__ = ["TierReport", "apply_tier_rules", "is_nearline", "move_to_nearline"]


def is_nearline(url: str) -> bool:
    """Whether a site URL names a nearline (tape) site."""
    return url.startswith(f"{SCHEME}://")


@dataclass
class TierReport:
    """What a move did: databases and containers moved, files copied, disk replicas dropped."""

    databases: int = 0
    copied: int = 0
    dropped: int = 0
    bytes: int = 0
    tape_s: float = 0.0  # simulated seconds until the last file copied was written to tape
    failed: list[str] = field(default_factory=list)

    def add(self, other: TierReport) -> None:
        self.databases += other.databases
        self.copied += other.copied
        self.dropped += other.dropped
        self.bytes += other.bytes
        self.tape_s += other.tape_s
        self.failed += other.failed


def move_to_nearline(store: Store, dataset: str, site: str, *, older_than: float = 0.0, now: float | None = None,
                     streams: int = 2, on_database: Callable[[int], None] | None = None,
                     unread_for: float | None = None) -> TierReport:
    """Move the databases of ``dataset`` older than ``older_than`` seconds to the nearline site ``site``.

    ``unread_for``: only those not read for that many seconds either (the last reads the catalog
    recorded, ``giod.store.lastread``; a database never read counts from its creation). ConfigError when
    ``site`` is not nearline; files that fail to copy are listed in the report and keep their disk replicas.
    """
    catalog = store.catalog
    drop = getattr(catalog, "drop_replica_kept_at", None)
    if drop is None:
        raise ConfigError("databases move between tiers where the catalog is, not over a server")
    rec = catalog.site(site)
    if not is_nearline(rec.url):
        raise ConfigError(f"site {site} is not nearline ({rec.url}): a nearline site has a tape:// URL")
    at = time.time() if now is None else now
    cutoff = at - older_than
    old = [db for db in catalog.databases(dataset) if db.created <= cutoff]
    if unread_for is not None and old:
        store.read_log.flush()  # this process's own reads count too
        last = getattr(catalog, "last_reads")(dataset)  # noqa: B009 - a local catalog's (drop_replica_kept_at too)
        old = [db for db in old if max(db.created, last.get(db.id, 0.0)) <= at - unread_for]
    ids = {db.id for db in old}
    report = TierReport(databases=len(old))
    transfers, _ = plan_copies(catalog, dataset, site)
    transfers = [t for t in transfers if t.container.database_id in ids]
    if transfers:
        done = run_transfers(catalog, store.site, transfers, streams=streams)
        report.copied, report.bytes = done.copied + done.adopted, done.bytes
        report.failed += [path for path, _s, _why in done.failed]
    nearline = store.site(site)
    if isinstance(nearline, NearlineSite):  # the queue on tape, a mount per cartridge, before any disk copy goes
        start = nearline.library.now()
        report.tape_s = max(0.0, nearline.library.flush() - start)
    disk = {s.name for s in store.sites() if not is_nearline(s.url)}
    states = catalog.replica_states(dataset)
    for db in old:
        for c in db.containers:
            held = {r.site: r.state for r in states.get(c.id, [])}
            if held.get(site) != "good":
                continue
            for other in sorted(disk & set(held)):
                if drop(c.id, other, site):
                    report.dropped += 1
                    with contextlib.suppress(GiodError):  # left behind, the file is an orphan gc removes
                        store.site(other).remove(c.path)
        if on_database is not None:
            on_database(db.id)
    return report


def apply_tier_rules(store: Store, *, now: float | None = None, streams: int = 2) -> TierReport:
    """Carry out every tier rule once (``giod tier apply``)."""
    listing = getattr(store.catalog, "tier_rules", None)
    if listing is None:
        raise ConfigError("tier rules live in the catalog itself: run this where the catalog is, not over a server")
    total = TierReport()
    for rule in listing():
        total.add(move_to_nearline(store, rule.dataset, rule.site, older_than=rule.older_than, now=now,
                                   streams=streams, unread_for=rule.unread_for))
    return total
