"""Step 14: when each database was last read (``database_reads``), and tier rules by last read.

A tier rule moved a dataset's databases to tape by age alone; ``giod rule add
qcd --tier nearline --unread-for 30d`` keeps on disk what was read lately.
``database_reads`` holds one row per database that was read: the time of its
last read that a reader recorded (``giod.store.lastread``: batched, at most once
per database per interval, off the read's path). Like leases it is not
federation content: not versioned, and recording a read never bumps the
version. ``tier_rules.unread_for`` is the rule's age since the last read
(NULL: the rule goes by age only).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Connection, Double, Integer, MetaData, Table, text

_Id = BigInteger().with_variant(Integer(), "sqlite")
# The table as this step creates it (frozen: not taken from tables.py).
_reads = Table(
    "database_reads",
    MetaData(),
    Column("database_id", _Id, primary_key=True, autoincrement=False),
    Column("last_read", Double, nullable=False),  # unix time
)


def upgrade(conn: Connection) -> None:
    _reads.create(conn, checkfirst=False)
    kind = Double().compile(dialect=conn.dialect)
    conn.execute(text(f"ALTER TABLE tier_rules ADD COLUMN unread_for {kind}"))
