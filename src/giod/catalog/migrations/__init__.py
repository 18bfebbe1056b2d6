"""Versioned migrations of the catalog's SQL schema.

``STEPS`` maps a schema level to the function that brings a catalog from the
level below to it; ``meta.schema_version`` records the level reached.

Step 1 creates everything. Because it builds the tables from
``giod.catalog.tables`` (the *current* schema), a fresh catalog runs step 1
alone and is stamped at the latest level; a catalog at level n runs steps n+1 up to
the latest. To change the schema: edit ``tables.py``, add a module
``vNNNN_what.py`` whose ``upgrade(conn)`` alters an existing catalog the same
way, and register it below.

The caller runs ``migrate`` inside one write transaction that already holds
the catalog's write lock, so concurrent openers migrate once.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, inspect, select

from giod.catalog.migrations import v0001_initial
from giod.catalog.tables import meta
from giod.errors import CatalogError

__all__ = ["STEPS", "check_level", "latest_level", "migrate", "read_level"]

STEPS: dict[int, Callable[[Connection], None]] = {
    1: v0001_initial.upgrade,
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


def migrate(conn: Connection) -> tuple[int | None, int]:
    """Bring the catalog to the latest level; returns (level before, level after)."""
    latest = latest_level()
    before = read_level(conn)
    check_level(before)
    if before == latest:
        return before, latest
    if before is None:
        STEPS[1](conn)
    else:
        for level in range(before + 1, latest + 1):
            STEPS[level](conn)
    _stamp(conn, latest, fresh=before is None)
    return before, latest


def _stamp(conn: Connection, level: int, *, fresh: bool) -> None:
    if fresh:
        conn.execute(meta.insert().values(key=_KEY, value=str(level)))
    else:
        conn.execute(meta.update().where(meta.c.key == _KEY).values(value=str(level)))
