"""Step 1: the catalog schema as giod first wrote it, and the federation row.

A frozen copy: later steps alter what this step created, so it must keep
creating exactly the level-1 schema whatever ``giod.catalog.tables`` (the
current schema) says today. Do not edit it; add a step instead.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Connection,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()
_Id = BigInteger().with_variant(Integer(), "sqlite")
_STATES = "state IN ('good', 'bad', 'lost', 'copying')"

meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
federation = Table(
    "federation",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("version", BigInteger, nullable=False),
    CheckConstraint("id = 1", name="federation_single_row"),
)
versions = Table(
    "versions",
    metadata,
    Column("version", BigInteger, primary_key=True, autoincrement=False),
    Column("created", Double, nullable=False),
    Column("description", Text, nullable=False),
)
schemas = Table(
    "schemas",
    metadata,
    Column("id", _Id, primary_key=True),
    Column("name", Text, nullable=False),
    Column("fingerprint", String(128), nullable=False, unique=True),
    Column("text", Text, nullable=False),
    sqlite_autoincrement=True,
)
datasets = Table(
    "datasets",
    metadata,
    Column("id", _Id, primary_key=True),
    Column("name", Text, nullable=False),
    Column("schema_id", _Id, ForeignKey("schemas.id"), nullable=False),
    Column("created_version", BigInteger, nullable=False),
    Column("deleted_version", BigInteger),
    Column("next_entry", BigInteger, nullable=False, default=0),
    Column("created", Double, nullable=False),
    sqlite_autoincrement=True,
)
dataset_schemas = Table(
    "dataset_schemas",
    metadata,
    Column("dataset_id", _Id, ForeignKey("datasets.id"), primary_key=True),
    Column("version", BigInteger, primary_key=True, autoincrement=False),
    Column("schema_id", _Id, ForeignKey("schemas.id"), nullable=False),
)
databases = Table(
    "databases",
    metadata,
    Column("id", _Id, primary_key=True),
    Column("dataset_id", _Id, ForeignKey("datasets.id"), nullable=False),
    Column("first_entry", BigInteger, nullable=False),
    Column("n_events", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("created", Double, nullable=False),
    Column("created_version", BigInteger, nullable=False),
    Column("deleted_version", BigInteger),
    Column("writer", Text, nullable=False, default=""),
    Column("program", Text, nullable=False, default=""),
    Column("program_version", Text, nullable=False, default=""),
    Column("parameters", Text, nullable=False, default="{}"),
    Column("idempotency_key", Text),
    UniqueConstraint("dataset_id", "idempotency_key", name="databases_idempotency_key"),
    Index("databases_by_dataset_version", "dataset_id", "created_version"),
    sqlite_autoincrement=True,
)
database_parents = Table(
    "database_parents",
    metadata,
    Column("database_id", _Id, ForeignKey("databases.id"), primary_key=True),
    Column("parent_id", _Id, primary_key=True, autoincrement=False),
    Column("position", Integer, nullable=False),
    Index("database_parents_by_parent", "parent_id"),
)
containers = Table(
    "containers",
    metadata,
    Column("id", _Id, primary_key=True),
    Column("database_id", _Id, ForeignKey("databases.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("path", Text, nullable=False),
    Column("checksum", Text, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("cluster_entries", Text, nullable=False),
    Column("schema_id", _Id, ForeignKey("schemas.id"), nullable=False),
    Column("created_version", BigInteger, nullable=False),
    Column("deleted_version", BigInteger),
    Index("containers_by_database", "database_id"),
    Index("containers_by_path", "path"),
    sqlite_autoincrement=True,
)
sites = Table(
    "sites",
    metadata,
    Column("id", _Id, primary_key=True),
    Column("name", Text, nullable=False, unique=True),
    Column("url", Text, nullable=False),
    Column("distance", Integer, nullable=False, default=0),
    Column("created", Double, nullable=False),
    sqlite_autoincrement=True,
)
replicas = Table(
    "replicas",
    metadata,
    Column("container_id", _Id, ForeignKey("containers.id"), primary_key=True),
    Column("site_id", _Id, ForeignKey("sites.id"), primary_key=True),
    Column("state", String(16), nullable=False),
    Column("checked", Double),
    CheckConstraint(_STATES, name="replicas_state"),
    Index("replicas_by_site", "site_id"),
)
tag_stats = Table(
    "tag_stats",
    metadata,
    Column("database_id", _Id, ForeignKey("databases.id"), primary_key=True),
    Column("field", Text, primary_key=True),
    Column("created_version", BigInteger, primary_key=True, autoincrement=False),
    Column("deleted_version", BigInteger),
    Column("min", Double),
    Column("max", Double),
)
commit_keys = Table(
    "commit_keys",
    metadata,
    Column("key", Text, primary_key=True),
    Column("version", BigInteger, nullable=False),
    Column("created", Double, nullable=False),
)
Index(
    "datasets_live_name",
    datasets.c.name,
    unique=True,
    sqlite_where=datasets.c.deleted_version.is_(None),
    postgresql_where=datasets.c.deleted_version.is_(None),
)
Index(
    "containers_live_name",
    containers.c.database_id,
    containers.c.name,
    unique=True,
    sqlite_where=containers.c.deleted_version.is_(None),
    postgresql_where=containers.c.deleted_version.is_(None),
)


def upgrade(conn: Connection) -> None:
    # checkfirst=False: a database that already holds a table of one of these
    # names is not ours; failing beats silently sharing it.
    metadata.create_all(conn, checkfirst=False)
    conn.execute(federation.insert().values(id=1, version=0))
