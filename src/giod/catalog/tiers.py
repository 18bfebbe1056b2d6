"""Tier rules, and the move of a replica off a site once another site holds a good copy.

A tier rule (``TierRuleRecord``) says that the databases of a dataset older
than ``older_than`` seconds live on a nearline site and nowhere else;
``giod.tier.policy`` carries it out. Rules are policy, not federation
content: adding or removing one does not bump the version. Dropping a disk
replica does (it changes where the content is), and happens only in the
same transaction that finds the kept copy good, so the last good copy of a
container is never dropped this way.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, insert, select

from giod.catalog.engine import Transactions, Unchanged
from giod.catalog.queries import chunks, dataset_row, log, missing, missing_dataset, site_id
from giod.catalog.tables import containers, database_reads, databases, datasets, replicas, sites, tier_rules, visible
from giod.errors import ConfigError, ConflictError, NotFound

__all__ = ["TIERS", "TierMethods", "TierRuleRecord"]

TIERS = ("nearline",)


@dataclass(frozen=True)
class TierRuleRecord:
    """Databases of ``dataset`` older than ``older_than`` seconds live on ``site`` (of tier ``tier``) only."""

    id: int
    dataset: str
    tier: str
    site: str
    older_than: float
    created: float  # unix time
    unread_for: float | None = None  # and not read for this many seconds (None: by age only; level 14)


def _record(row: Any) -> TierRuleRecord:
    unread = None if row.unread_for is None else float(row.unread_for)
    return TierRuleRecord(int(row.id), row.dataset, row.tier, row.site, float(row.older_than), float(row.created),
                          unread)


def _upsert(dialect: str) -> Any:
    """The dialect's INSERT with ON CONFLICT (both spell it the same way)."""
    from sqlalchemy.dialects import postgresql, sqlite

    return postgresql.insert if dialect == "postgresql" else sqlite.insert


class TierMethods(Transactions):
    """``add_tier_rule``, ``tier_rules``, ``remove_tier_rule`` and ``drop_replica_kept_at`` of ``Catalog``."""

    def add_tier_rule(self, dataset: str, site: str, *, tier: str = "nearline",
                      older_than: float = 0.0, unread_for: float | None = None) -> TierRuleRecord:
        """Add a tier rule; NotFound for an unknown dataset or site, ConfigError for a bad tier or age.

        ``unread_for``: only databases not read for this many seconds either (their last read as readers
        recorded it, :meth:`record_reads`; a database never read counts from its creation)."""
        if tier not in TIERS:
            raise ConfigError(f"unknown tier {tier!r} (known: {', '.join(TIERS)})")
        if not older_than >= 0 or older_than == float("inf"):
            raise ConfigError(f"an age is zero seconds or more, not {older_than!r}")
        if unread_for is not None and (not unread_for >= 0 or unread_for == float("inf")):
            raise ConfigError(f"a time since the last read is zero seconds or more, not {unread_for!r}")

        def work(conn: Connection) -> TierRuleRecord:
            if dataset_row(conn, dataset, None) is None:
                raise missing_dataset(conn, dataset, None)
            url = conn.execute(select(sites.c.url).where(sites.c.name == site)).scalar_one_or_none()
            if url is None:
                raise missing(conn, "site", site, select(sites.c.name))
            if not str(url).startswith("tape://"):
                raise ConfigError(f"site {site} is not nearline ({url}): a nearline site has a tape:// URL")
            now = time.time()
            unread = None if unread_for is None else float(unread_for)
            row = {"dataset": dataset, "tier": tier, "site": site, "older_than": float(older_than), "created": now,
                   "unread_for": unread}
            new = int(conn.execute(insert(tier_rules).values(row).returning(tier_rules.c.id)).scalar_one())
            return TierRuleRecord(new, dataset, tier, site, float(older_than), now, unread)

        return self._run(work, write=True)

    def tier_rules(self, dataset: str | None = None) -> list[TierRuleRecord]:
        """Every tier rule (of ``dataset``, if given), by id."""
        q = select(tier_rules).order_by(tier_rules.c.id)
        if dataset is not None:
            q = q.where(tier_rules.c.dataset == dataset)
        return self._read(lambda conn: [_record(r) for r in conn.execute(q).all()])

    def remove_tier_rule(self, rule_id: int) -> None:
        """Remove a tier rule (its databases stay where they are); NotFound for an unknown id."""
        def work(conn: Connection) -> None:
            if not conn.execute(delete(tier_rules).where(tier_rules.c.id == rule_id)).rowcount:
                raise NotFound(f"no tier rule {rule_id} (giod rule ls)")

        self._run(work, write=True)

    # -- last reads (level 14) -------------------------------------------------

    def record_reads(self, database_ids: Iterable[int], when: float | None = None, *,
                     paths: Iterable[str] = ()) -> int:
        """Record that ``database_ids`` (and the databases of the container files ``paths``) were read at
        ``when`` (default: now), in one transaction that never bumps the version; a time older than the one
        recorded is kept out, and so are ids of no database. The number of databases given or found."""
        ids = {int(i) for i in database_ids}
        wanted = sorted(set(paths))
        at = time.time() if when is None else float(when)
        upsert = _upsert(self.dialect)

        def work(conn: Connection) -> int:
            found = set(ids)
            for names in chunks(wanted):
                found.update(int(i) for i in conn.execute(
                    select(containers.c.database_id).where(containers.c.path.in_(names))).scalars())
            for part in chunks(sorted(found)):
                known = conn.execute(select(databases.c.id).where(databases.c.id.in_(part))).scalars().all()
                if not known:
                    continue
                q = upsert(database_reads).values([{"database_id": int(i), "last_read": at} for i in known])
                conn.execute(q.on_conflict_do_update(
                    index_elements=[database_reads.c.database_id], set_={"last_read": q.excluded.last_read},
                    where=database_reads.c.last_read < q.excluded.last_read))
            return len(found)

        if not ids and not wanted:
            return 0

        return self._run(work, write=True)

    def last_reads(self, dataset: str) -> dict[int, float]:
        """database id -> the time of its last recorded read, for the live databases of ``dataset`` read at all."""
        d, r = databases, database_reads
        q = (select(r.c.database_id, r.c.last_read).select_from(r.join(d, d.c.id == r.c.database_id))
             .join(datasets, datasets.c.id == d.c.dataset_id)
             .where(datasets.c.name == dataset, visible(datasets, None), visible(d, None)))
        return self._read(lambda conn: {int(i): float(t) for i, t in conn.execute(q).all()})

    def drop_replica_kept_at(self, container_id: int, site: str, kept: str) -> bool:
        """Drop the replica of ``container_id`` at ``site`` because ``kept`` holds a good one; False if none.

        ConflictError when ``kept`` holds no good replica: nothing is dropped.
        """
        def work(conn: Connection, v: int) -> bool:
            here, there = site_id(conn, site), site_id(conn, kept)
            good = conn.execute(select(replicas.c.state).where(
                replicas.c.container_id == container_id, replicas.c.site_id == there)).scalar_one_or_none()
            if good != "good":
                raise ConflictError(f"container {container_id} has no good replica at {kept}: "
                                    f"its replica at {site} stays")
            n = conn.execute(delete(replicas).where(replicas.c.container_id == container_id,
                                                    replicas.c.site_id == here)).rowcount
            if not n:
                raise Unchanged(False)
            log(conn, v, f"move container {container_id} from {site} to {kept}")
            return True

        return self._write(work)
