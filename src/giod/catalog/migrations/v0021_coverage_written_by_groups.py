"""Step 21: on PostgreSQL, a group of registrations writes its own coverage rows; the trigger leaves them.

The statement trigger of level 19 is general: rows of any versions, deleted
ones, rows before kept ones, each version's total made from the statement's
transition table after the rows are in. A group of registrations (the one
statement of ``giod.catalog.bulk``) is its simplest case: every row at a new
version, above every kept one (the group holds the version's lock), none
deleted. Yet the trigger was 28 % of the server's CPU for a group of eight
registrations of six statistics (``perf``, 1.3 of ~4.7 ms): the transition
table, the function's call and its plan of a dozen nodes, a lookup of the
dataset per row, a check of each of 48 rows against the kept ones before it
is written (``ON CONFLICT``).

From this level the group statement computes the same rows itself (one
window over its statistics along the versions, the kept row looked up once
per dataset and field) and then sets ``giod.coverage_written`` for its
transaction: the trigger, at the end of that statement, finds the setting,
clears it and returns. Any other statement (a later pass, a purge, a group
of the savepoint path, a commit of an older giod) finds it unset and is
counted by the trigger as before.
"""

from __future__ import annotations

from sqlalchemy import Connection

from giod.catalog.migrations import v0019_coverage_looked_up_once as _level19

# the setting a statement that wrote its own coverage rows sets for its transaction (``bulk._GROUP``)
SETTING = "giod.coverage_written"

_ANCHOR = "AS $$\n    BEGIN\n"
_GUARD = (f"AS $$\n    BEGIN\n      IF current_setting('{SETTING}', true) = 'on' THEN  -- written by the statement\n"
          f"        PERFORM set_config('{SETTING}', '', true);\n        RETURN NULL;\n      END IF;\n")


def _function() -> str:
    """Level 19's function (frozen) with the guard first."""
    body = _level19._POSTGRES[0]
    if body.count(_ANCHOR) != 1:  # cannot be: level 19 is frozen
        raise RuntimeError("level 19's coverage function is not as written")
    return body.replace(_ANCHOR, _GUARD)


def upgrade(conn: Connection) -> None:
    if conn.dialect.name != "postgresql":
        return
    conn.exec_driver_sql(_function())
