"""Versioned migrations of the catalog's SQL schema.

``STEPS`` maps a schema level to the function that brings a catalog from the
level below to it; ``meta.schema_version`` records the level reached.

Every catalog, fresh or old, reaches the latest level the same way: by the
steps from the level after its own up to the latest (a fresh catalog starts
at step 1, which creates the level-1 schema). Steps are frozen history: each
defines the tables it touches itself instead of importing ``tables.py``, so
it keeps doing what it did when a later step changes the schema. To change
the schema: edit ``tables.py`` (the current schema, which the queries use),
add a module ``vNNNN_what.py`` whose ``upgrade(conn)`` alters a catalog of
the level below the same way, register it below, and add a test that opens
a catalog at the old level.

The caller runs ``migrate`` inside one write transaction that already holds
the catalog's write lock, so concurrent openers migrate once.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, inspect, select

from giod.catalog.migrations import (
    v0001_initial,
    v0002_container_provenance,
    v0003_tokens,
    v0004_rules,
    v0005_leases,
    v0006_container_format,
    v0007_dataset_format,
    v0008_exchange,
    v0009_dataset_totals,
    v0010_nearline_tier,
    v0011_tag_coverage,
    v0012_commit_checks,
    v0013_database_summaries,
    v0014_database_reads,
    v0015_coverage_per_statement,
    v0016_coverage_running_sums,
    v0017_listing_records,
    v0018_coverage_plans_kept_flat,
    v0019_coverage_looked_up_once,
    v0020_registration_keys_checked_by_commits,
    v0021_coverage_written_by_groups,
)
from giod.catalog.tables import meta
from giod.errors import CatalogError

__all__ = ["STEPS", "check_level", "latest_level", "migrate", "read_level"]

STEPS: dict[int, Callable[[Connection], None]] = {
    1: v0001_initial.upgrade,
    2: v0002_container_provenance.upgrade,
    3: v0003_tokens.upgrade,
    4: v0004_rules.upgrade,
    5: v0005_leases.upgrade,
    6: v0006_container_format.upgrade,
    7: v0007_dataset_format.upgrade,
    8: v0008_exchange.upgrade,
    9: v0009_dataset_totals.upgrade,
    10: v0010_nearline_tier.upgrade,
    11: v0011_tag_coverage.upgrade,
    12: v0012_commit_checks.upgrade,
    13: v0013_database_summaries.upgrade,
    14: v0014_database_reads.upgrade,
    15: v0015_coverage_per_statement.upgrade,
    16: v0016_coverage_running_sums.upgrade,
    17: v0017_listing_records.upgrade,
    18: v0018_coverage_plans_kept_flat.upgrade,
    19: v0019_coverage_looked_up_once.upgrade,
    20: v0020_registration_keys_checked_by_commits.upgrade,
    21: v0021_coverage_written_by_groups.upgrade,
}

_KEY = "schema_version"


def read_level(conn: Connection) -> int | None:
    """The catalog's schema level, or None when it holds no giod tables yet."""
    if not inspect(conn).has_table(meta.name):
        return None
    value = conn.execute(select(meta.c.value).where(meta.c.key == _KEY)).scalar_one_or_none()
    return None if value is None else int(value)


def latest_level() -> int:
    """The schema level this giod writes."""
    return max(STEPS)


def check_level(level: int | None) -> None:
    """Raise CatalogError when the catalog was written by a newer giod."""
    latest = latest_level()
    if level is not None and level > latest:
        raise CatalogError(
            f"catalog schema version {level} is newer than this giod ({latest}); upgrade giod"
        )


def migrate(conn: Connection, target: int | None = None) -> tuple[int | None, int]:
    """Bring the catalog to level ``target`` (default: the latest); returns (before, after).

    A catalog already at or above ``target`` is left as it is.
    """
    latest = latest_level()
    goal = latest if target is None else target
    if not 1 <= goal <= latest:
        raise CatalogError(f"no catalog schema level {goal}: this giod knows 1 to {latest}")
    before = read_level(conn)
    check_level(before)
    start = 0 if before is None else before
    if start >= goal:
        return before, start
    for level in sorted(n for n in STEPS if start < n <= goal):  # a level may be left unused
        STEPS[level](conn)
    _stamp(conn, goal, fresh=before is None)
    return before, goal


def _stamp(conn: Connection, level: int, *, fresh: bool) -> None:
    if fresh:
        conn.execute(meta.insert().values(key=_KEY, value=str(level)))
    else:
        conn.execute(meta.update().where(meta.c.key == _KEY).values(value=str(level)))
