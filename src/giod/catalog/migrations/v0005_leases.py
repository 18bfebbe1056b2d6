"""Step 5: the ``leases`` table, by which writers keep gc away from the files they are writing.

Leases are liveness, not federation content: they are not versioned and
taking, renewing or releasing one does not bump the federation version (see
``giod.catalog.leases``).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Double,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
)

# The table as this step creates it (frozen: not taken from tables.py).
_Id = BigInteger().with_variant(Integer(), "sqlite")
_leases = Table(
    "leases",
    MetaData(),
    Column("id", _Id, primary_key=True),
    Column("site", Text, nullable=False),
    Column("prefix", Text, nullable=False),
    Column("holder", Text, nullable=False),
    Column("created", Double, nullable=False),
    Column("expires", Double, nullable=False),
    Index("leases_by_site", "site"),
    sqlite_autoincrement=True,
)


def upgrade(conn: Connection) -> None:
    _leases.create(conn, checkfirst=False)
