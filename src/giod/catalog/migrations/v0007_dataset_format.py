"""Step 7: a dataset may fix the format of its containers.

``datasets.container_format`` names the container format every writer of
the dataset uses (``arrow`` or ``parquet``); NULL, as every dataset created
before this level has, leaves the choice to each writer's settings, as before.
"""

from __future__ import annotations

from sqlalchemy import Column, Connection, Text
from sqlalchemy.schema import CreateColumn

# The column as this step adds it (frozen: not taken from tables.py).
_COLUMN = Column("container_format", Text, nullable=True)


def upgrade(conn: Connection) -> None:
    spec = CreateColumn(_COLUMN).compile(dialect=conn.dialect)
    conn.exec_driver_sql(f"ALTER TABLE datasets ADD COLUMN {spec}")
