"""Step 20: on PostgreSQL, the rows a registration writes are checked by the commit path, not by foreign keys.

A registration inserts a database, its containers, their replicas and its
tag statistics, and four foreign keys checked each row with a trigger that
looks up and locks the row it refers to: 120 trigger calls for a group of
eight registrations (5 containers and 6 statistics each), 0.45 of the group
statement's ~3 ms (EXPLAIN ANALYZE), every one of them inside the
transaction that holds the catalog's version lock.

Every writer of these rows already finds what they refer to itself, inside
its transaction and after the version bump that serialises writers (level
12 did the same for schemas and sites): the group statement joins each row
to the row it has just inserted, and refuses itself (a NOT NULL violation)
when a dataset is missing; one commit takes its dataset's entries first;
adding containers or statistics to databases requires them live; every
replica's writer finds its container first. Rows are deleted only by the
purge, children before parents. SQLite keeps its foreign keys: it checks
one with an in-process index lookup, and dropping one means rebuilding the
table. ``database_parents`` keeps its keys (parents are not on the hot path).
"""

from __future__ import annotations

from sqlalchemy import Connection, inspect

# (table, referred table) of the foreign keys this step drops (frozen: not taken from tables.py)
_DROPPED = (("databases", "datasets"), ("containers", "databases"), ("replicas", "containers"),
            ("tag_stats", "databases"))


def upgrade(conn: Connection) -> None:
    if conn.dialect.name != "postgresql":
        return
    found = inspect(conn)
    quote = conn.dialect.identifier_preparer.quote
    for table, referred in _DROPPED:
        for key in found.get_foreign_keys(table):
            if key["referred_table"] == referred and key["name"]:
                conn.exec_driver_sql(f"ALTER TABLE {quote(table)} DROP CONSTRAINT {quote(key['name'])}")
