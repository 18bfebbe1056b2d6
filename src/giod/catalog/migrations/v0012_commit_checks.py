"""Step 12: on PostgreSQL, the commit path checks sites and schemas instead of two foreign keys.

Every container row checked that its schema exists, and every replica row
that its site does, each with a trigger that runs a query per row and locks
the row it finds (EXPLAIN ANALYZE of a group of commits: two of the five
foreign-key triggers of the tables a commit writes). The commit path now
checks both itself, inside its transaction and after the version bump that
serialises writers: schemas are never deleted, so a schema once found stays
found; a site is looked up by name in the statement that writes its
replicas, so a commit naming a site removed meanwhile is refused.

SQLite keeps both constraints: it checks a foreign key with an in-process
index lookup, and dropping one means rebuilding the two largest tables.
"""

from __future__ import annotations

from sqlalchemy import Connection, inspect

# (table, referred table) of the foreign keys this step drops (frozen: not taken from tables.py)
_DROPPED = (("containers", "schemas"), ("replicas", "sites"))


def upgrade(conn: Connection) -> None:
    if conn.dialect.name != "postgresql":
        return
    found = inspect(conn)
    quote = conn.dialect.identifier_preparer.quote
    for table, referred in _DROPPED:
        for key in found.get_foreign_keys(table):
            if key["referred_table"] == referred and key["name"]:
                conn.exec_driver_sql(f"ALTER TABLE {quote(table)} DROP CONSTRAINT {quote(key['name'])}")
