"""Step 1: create every table of the current schema and the federation row."""

from __future__ import annotations

from sqlalchemy import Connection

from giod.catalog.tables import federation, metadata


def upgrade(conn: Connection) -> None:
    metadata.create_all(conn)
    conn.execute(federation.insert().values(id=1, version=0))
