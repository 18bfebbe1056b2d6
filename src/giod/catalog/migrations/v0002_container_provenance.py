"""Step 2: provenance per container (program, program version, parameters, creation time).

A reconstruction pass adds containers to a database written by another
program; from level 2 on each container records who wrote it. Existing rows
are filled from what level 1 knew: a container registered by the database's
own commit takes the database's program, version and parameters; one added
later (``add_containers``) keeps them empty, because level 1 never recorded
its writer. Every container gets the time of the version that created it,
from the ``versions`` log.
"""

from __future__ import annotations

from sqlalchemy import Column, Connection, Double, Text, column, func, select, table, text
from sqlalchemy.schema import CreateColumn

# The columns as this step adds them (frozen: not taken from tables.py).
_COLUMNS = (
    Column("program", Text, nullable=False, server_default=""),
    Column("program_version", Text, nullable=False, server_default=""),
    Column("parameters", Text, nullable=False, server_default="{}"),
    Column("created", Double, nullable=False, server_default=text("0")),
)

_containers = table(
    "containers",
    column("database_id"),
    column("created_version"),
    *(column(c.name) for c in _COLUMNS),
)
_databases = table(
    "databases",
    column("id"),
    column("created_version"),
    column("program"),
    column("program_version"),
    column("parameters"),
)
_versions = table("versions", column("version"), column("created"))


def upgrade(conn: Connection) -> None:
    for new in _COLUMNS:
        spec = CreateColumn(new).compile(dialect=conn.dialect)
        conn.exec_driver_sql(f"ALTER TABLE containers ADD COLUMN {spec}")
    c, d, v = _containers, _databases, _versions
    own = d.c.id == c.c.database_id
    conn.execute(
        c.update()
        .where(c.c.created_version == select(d.c.created_version).where(own).scalar_subquery())
        .values(
            program=select(d.c.program).where(own).scalar_subquery(),
            program_version=select(d.c.program_version).where(own).scalar_subquery(),
            parameters=select(d.c.parameters).where(own).scalar_subquery(),
        )
    )
    when = select(v.c.created).where(v.c.version == c.c.created_version).scalar_subquery()
    conn.execute(c.update().values(created=func.coalesce(when, 0.0)))
