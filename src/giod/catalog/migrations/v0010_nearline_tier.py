"""Step 10: the ``tier_rules`` table, the policies that move databases to a nearline (tape) site.

A tier rule says that the databases of a dataset older than ``older_than``
seconds live on the nearline site ``site`` and nowhere else (``giod rule add
DATASET --tier nearline --sites SITE --older-than 30d``). Like replication
rules they are policy, not federation content: not versioned.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, Column, Connection, Double, Integer, MetaData, Table, Text

# The table as this step creates it (frozen: not taken from tables.py).
_Id = BigInteger().with_variant(Integer(), "sqlite")
_tier_rules = Table(
    "tier_rules",
    MetaData(),
    Column("id", _Id, primary_key=True),
    Column("dataset", Text, nullable=False),
    Column("tier", Text, nullable=False),
    Column("site", Text, nullable=False),
    Column("older_than", Double, nullable=False),
    Column("created", Double, nullable=False),
    CheckConstraint("older_than >= 0", name="tier_rules_age"),
    CheckConstraint("tier IN ('nearline')", name="tier_rules_tier"),
    sqlite_autoincrement=True,
)


def upgrade(conn: Connection) -> None:
    _tier_rules.create(conn, checkfirst=False)
