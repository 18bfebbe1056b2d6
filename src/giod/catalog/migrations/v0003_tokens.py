"""Step 3: the ``tokens`` table, the bearer tokens a giod server accepts.

Tokens are access control, not federation content: they are not versioned
and creating or revoking one does not bump the federation version. Only a
hash of each secret is stored (see ``giod.catalog.tokens``).
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
    String,
    Table,
    Text,
)

# The table as this step creates it (frozen: not taken from tables.py).
_Id = BigInteger().with_variant(Integer(), "sqlite")
_tokens = Table(
    "tokens",
    MetaData(),
    Column("id", _Id, primary_key=True),
    Column("note", Text, nullable=False, server_default=""),
    Column("scope", String(16), nullable=False),
    Column("dataset", Text),
    Column("hash", String(128), nullable=False),
    Column("created", Double, nullable=False),
    Column("expires", Double),
    Column("revoked", Double),
    CheckConstraint("scope IN ('read', 'write', 'admin')", name="tokens_scope"),
    sqlite_autoincrement=True,
)


def upgrade(conn: Connection) -> None:
    _tokens.create(conn, checkfirst=False)
