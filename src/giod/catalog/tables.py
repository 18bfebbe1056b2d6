"""The catalog's SQL schema, as SQLAlchemy Core tables.

Versioned rows carry ``created_version`` and ``deleted_version``: a row is
visible at version V when ``created_version <= V`` and ``deleted_version`` is
NULL or greater than V. Nothing versioned is ever updated in place; a change
marks the old row deleted and inserts a new one, so a reader pinned at an old
version keeps a consistent snapshot.

This module describes the *current* schema, which the queries use.
``giod.catalog.migrations`` builds it, on a fresh catalog as on an old one,
by running its steps in order; a test checks that the two agree.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.sql.elements import ColumnElement

from giod.catalog.records import TOKEN_SCOPES

__all__ = [
    "REPLICA_STATES",
    "commit_keys",
    "containers",
    "database_parents",
    "database_reads",
    "database_summaries",
    "databases",
    "dataset_schemas",
    "dataset_totals",
    "datasets",
    "exchange_cursors",
    "federation",
    "leases",
    "meta",
    "metadata",
    "replicas",
    "rules",
    "schemas",
    "sites",
    "tag_coverage",
    "tag_stats",
    "tier_rules",
    "tokens",
    "versions",
    "visible",
]

REPLICA_STATES = ("good", "bad", "lost", "copying")

metadata = MetaData()

# SQLite only auto-increments a column declared exactly INTEGER PRIMARY KEY.
_Id = BigInteger().with_variant(Integer(), "sqlite")

# Ids end up in object ids (db42/tracks/1234#7): sqlite_autoincrement (SQLite's
# AUTOINCREMENT) keeps a purged id from being handed to a new row.

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
    # the format of every container of the dataset; NULL: each writer's setting (level 7)
    Column("container_format", Text),
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
    # no foreign key on PostgreSQL from level 20: the commit path finds the dataset (SQLite keeps it)
    Column("dataset_id", _Id, nullable=False),
    Column("first_entry", BigInteger, nullable=False),
    Column("n_events", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),  # written by the commit itself
    Column("created", Double, nullable=False),
    Column("created_version", BigInteger, nullable=False),
    Column("deleted_version", BigInteger),
    Column("writer", Text, nullable=False, default=""),
    Column("program", Text, nullable=False, default=""),
    Column("program_version", Text, nullable=False, default=""),
    Column("parameters", Text, nullable=False, default="{}"),  # JSON
    Column("idempotency_key", Text),
    UniqueConstraint("dataset_id", "idempotency_key", name="databases_idempotency_key"),
    Index("databases_by_dataset_version", "dataset_id", "created_version"),
    Index("databases_by_dataset_entry", "dataset_id", "first_entry"),  # level 9: database_at, listing
    sqlite_autoincrement=True,
)

# A dataset's totals after each version that changed its content (level 9): the
# summary at version V is the latest row at or before V, not a count of its databases.
# No foreign key: written with every commit, read by key only.
dataset_totals = Table(
    "dataset_totals",
    metadata,
    Column("dataset_id", _Id, primary_key=True, autoincrement=False),
    Column("version", BigInteger, primary_key=True, autoincrement=False),
    Column("n_databases", BigInteger, nullable=False),
    Column("n_events", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
)

# One line of the listing per database and version that changed its containers (level 13):
# what ``Catalog.database_rows`` prints, kept by every write that adds, replaces or deletes
# containers, so that listing reads one row per database instead of grouping its containers.
# Versioned like containers (visible while the database and that set of containers are, and from
# level 17 that set of tag statistics); the database's own columns are copied, since a database row
# never changes. ``containers``: the names of its visible containers, sorted (by code point),
# comma-separated. No foreign key: written with every commit, purged with the rows it sums.
database_summaries = Table(
    "database_summaries",
    metadata,
    Column("database_id", _Id, primary_key=True, autoincrement=False),
    Column("created_version", BigInteger, primary_key=True, autoincrement=False),
    Column("deleted_version", BigInteger),
    Column("dataset_id", _Id, nullable=False),
    Column("first_entry", BigInteger, nullable=False),
    Column("n_events", BigInteger, nullable=False),
    Column("database_version", BigInteger, nullable=False),  # the database's created_version
    Column("program", Text, nullable=False),
    Column("bytes", BigInteger, nullable=False),  # of its visible containers
    Column("containers", Text, nullable=False),
    # level 17: the listing's whole record of the database while this row is visible (``giod.catalog.kept``):
    # its containers and tag statistics as one text, and its containers' ids; a stats-only pass writes a row
    # too. NULL on the rows that ended before the migration: the listing reads their databases' rows.
    Column("record", Text),
    Column("container_ids", Text),
    # level 17: the rest of the database's own columns, so that the listing reads no databases row
    Column("created", Double),
    Column("writer", Text),
    Column("program_version", Text),
    Column("parameters", Text),
    Column("idempotency_key", Text),
    Index("database_summaries_by_entry", "dataset_id", "first_entry", "database_id"),
)

# No foreign key on parent_id: lineage outlives a purged parent.
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
    # no foreign key on PostgreSQL from level 20: the commit path finds the database (SQLite keeps it)
    Column("database_id", _Id, nullable=False),
    Column("name", Text, nullable=False),
    Column("path", Text, nullable=False),
    Column("checksum", Text, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("cluster_entries", Text, nullable=False),  # JSON list of ints
    # no foreign key on PostgreSQL from level 12: the commit path checks the schema (SQLite keeps it)
    Column("schema_id", _Id, nullable=False),
    Column("created_version", BigInteger, nullable=False),
    Column("deleted_version", BigInteger),
    # Provenance per container (level 2): a later pass writes its containers
    # with another program than the one that wrote the database.
    Column("program", Text, nullable=False, server_default=""),
    Column("program_version", Text, nullable=False, server_default=""),
    Column("parameters", Text, nullable=False, server_default="{}"),  # JSON
    Column("created", Double, nullable=False, server_default=text("0")),  # unix time
    # The file format (level 5): every container before it is Parquet.
    Column("format", Text, nullable=False, server_default="parquet"),
    Column("cluster_checksums", Text, nullable=False, server_default="[]"),  # JSON: CRC-32C per batch, then footer
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
    # no foreign key on PostgreSQL from level 20: every writer finds the container (SQLite keeps it)
    Column("container_id", _Id, primary_key=True),
    # no foreign key on PostgreSQL from level 12: the commit path checks the site (SQLite keeps it)
    Column("site_id", _Id, primary_key=True),
    Column("state", String(16), nullable=False),
    Column("checked", Double),
    CheckConstraint(
        "state IN (" + ", ".join(f"'{s}'" for s in REPLICA_STATES) + ")",
        name="replicas_state",
    ),
    Index("replicas_by_site", "site_id"),
)

# Versioned like containers: a reader pinned before a reconstruction pass must
# prune with the statistics of the tag container it reads, not the new one.
# NULL min/max means "unknown" (the value was NaN or infinite).
tag_stats = Table(
    "tag_stats",
    metadata,
    # no foreign key on PostgreSQL from level 20: the commit path finds the database (SQLite keeps it)
    Column("database_id", _Id, primary_key=True),
    Column("field", Text, primary_key=True),
    Column("created_version", BigInteger, primary_key=True, autoincrement=False),
    Column("deleted_version", BigInteger),
    Column("min", Double),
    Column("max", Double),
    # level 11: the candidates of a selection by a range of min (and of max), per field
    Index("tag_stats_by_field_min", "field", "min"),
    Index("tag_stats_by_field_max", "field", "max"),
)

# Per dataset and tag field after each version that changed them (level 11): how many of
# the dataset's databases have a visible statistics row for the field, and the widest
# max - min any row had (NULL once one had min > max). Kept by triggers on tag_stats
# (``migrations.v0011_tag_coverage``; on PostgreSQL, inserts once per statement from level 15,
# ``migrations.v0015_coverage_per_statement``; a group of registrations writes its own rows from level 21,
# ``migrations.v0021_coverage_written_by_groups``); read by ``giod.catalog.planning``.
tag_coverage = Table(
    "tag_coverage",
    metadata,
    Column("dataset_id", _Id, primary_key=True, autoincrement=False),
    Column("field", Text, primary_key=True),
    Column("version", BigInteger, primary_key=True, autoincrement=False),
    Column("n_databases", BigInteger, nullable=False),
    Column("width", Double),
)

commit_keys = Table(
    "commit_keys",
    metadata,
    Column("key", Text, primary_key=True),
    Column("version", BigInteger, nullable=False),
    Column("created", Double, nullable=False),
)

# Bearer tokens of the server (level 3). Not versioned: access control is not
# federation content, and a revoked token must stop working for every reader.
# ``dataset`` NULL means every dataset; ``hash`` is "sha256:<hex>" of the secret.
tokens = Table(
    "tokens",
    metadata,
    Column("id", _Id, primary_key=True),
    Column("note", Text, nullable=False, server_default=""),
    Column("scope", String(16), nullable=False),
    Column("dataset", Text),
    Column("hash", String(128), nullable=False),
    Column("created", Double, nullable=False),  # unix time
    Column("expires", Double),  # unix time; NULL: never
    Column("revoked", Double),  # unix time; NULL: not revoked
    CheckConstraint(
        "scope IN (" + ", ".join(f"'{s}'" for s in TOKEN_SCOPES) + ")", name="tokens_scope"
    ),
    sqlite_autoincrement=True,
)

# Replication rules (level 4). Not versioned, like tokens: a rule is policy about
# where copies live, not federation content. ``sites`` and ``containers`` are
# JSON lists of names; NULL means any site / every container.
rules = Table(
    "rules",
    metadata,
    Column("id", _Id, primary_key=True),
    Column("dataset", Text, nullable=False),
    Column("copies", Integer, nullable=False),
    Column("sites", Text),
    Column("containers", Text),
    Column("created", Double, nullable=False),  # unix time
    CheckConstraint("copies >= 1", name="rules_copies"),
    sqlite_autoincrement=True,
)

# Tier rules (level 10): databases of ``dataset`` older than ``older_than`` seconds live
# on the nearline site ``site`` only. Not versioned: policy, like replication rules.
tier_rules = Table(
    "tier_rules",
    metadata,
    Column("id", _Id, primary_key=True),
    Column("dataset", Text, nullable=False),
    Column("tier", Text, nullable=False),
    Column("site", Text, nullable=False),
    Column("older_than", Double, nullable=False),
    Column("created", Double, nullable=False),  # unix time
    Column("unread_for", Double),  # level 14: seconds since the last read (NULL: by age only)
    CheckConstraint("older_than >= 0", name="tier_rules_age"),
    CheckConstraint("tier IN ('nearline')", name="tier_rules_tier"),
    sqlite_autoincrement=True,
)

# When each database was last read (level 14), as readers recorded it (``giod.store.lastread``: batched, at
# most once per database per interval). Not versioned: an access time, not federation content.
database_reads = Table(
    "database_reads",
    metadata,
    Column("database_id", _Id, primary_key=True, autoincrement=False),
    Column("last_read", Double, nullable=False),  # unix time
)

# Writers' leases on the files they are writing (level 5). Not versioned: liveness,
# not federation content. ``prefix`` is a path prefix at ``site``; ``created`` and
# ``expires`` are unix times on the catalog's own clock, so that hosts whose clocks
# disagree still agree on whether a lease is live.
leases = Table(
    "leases",
    metadata,
    Column("id", _Id, primary_key=True),
    Column("site", Text, nullable=False),
    Column("prefix", Text, nullable=False),
    Column("holder", Text, nullable=False),
    Column("created", Double, nullable=False),
    Column("expires", Double, nullable=False),
    Index("leases_by_site", "site"),
    sqlite_autoincrement=True,
)

# How far a federation has copied from each source dataset (level 8). Not
# versioned: bookkeeping of the exchange, like leases (giod.catalog.exchanges).
exchange_cursors = Table(
    "exchange_cursors",
    metadata,
    Column("key", Text, primary_key=True),
    Column("source", Text, nullable=False),
    Column("dataset", Text, nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("updated", Double, nullable=False),
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


def visible(table: Table, version: int | None) -> ColumnElement[bool]:
    """The condition that selects ``table``'s rows visible at ``version`` (None: current)."""
    if version is None:
        return table.c.deleted_version.is_(None)
    return (table.c.created_version <= version) & (
        table.c.deleted_version.is_(None) | (table.c.deleted_version > version)
    )
