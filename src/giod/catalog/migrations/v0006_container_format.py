"""Step 6: the file format of every container, and a CRC-32C per cluster.

Containers may now be Arrow IPC files as well as Parquet files. Every
container registered before this level is a Parquet file, so existing rows
take ``parquet``; their integrity checks are Parquet's own page CRCs, so they
have no per-cluster checksums (``[]``).
"""

from __future__ import annotations

from sqlalchemy import Column, Connection, Text
from sqlalchemy.schema import CreateColumn

# The columns as this step adds them (frozen: not taken from tables.py).
_COLUMNS = (
    Column("format", Text, nullable=False, server_default="parquet"),
    Column("cluster_checksums", Text, nullable=False, server_default="[]"),
)


def upgrade(conn: Connection) -> None:
    for new in _COLUMNS:
        spec = CreateColumn(new).compile(dialect=conn.dialect)
        conn.exec_driver_sql(f"ALTER TABLE containers ADD COLUMN {spec}")
