"""Step 4: the ``rules`` table, the replication rules that ``giod replicator`` satisfies.

Rules are policy about where copies live, not federation content: they are
not versioned and adding or removing one does not bump the federation
version (see ``giod.catalog.rules``).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Connection,
    Double,
    Integer,
    MetaData,
    Table,
    Text,
)

# The table as this step creates it (frozen: not taken from tables.py).
_Id = BigInteger().with_variant(Integer(), "sqlite")
_rules = Table(
    "rules",
    MetaData(),
    Column("id", _Id, primary_key=True),
    Column("dataset", Text, nullable=False),
    Column("copies", Integer, nullable=False),
    Column("sites", Text),
    Column("containers", Text),
    Column("created", Double, nullable=False),
    CheckConstraint("copies >= 1", name="rules_copies"),
    sqlite_autoincrement=True,
)


def upgrade(conn: Connection) -> None:
    _rules.create(conn, checkfirst=False)
