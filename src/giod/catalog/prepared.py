"""SQLAlchemy Core statements compiled once and run on a DB-API cursor.

The commit path runs a handful of statements per transaction, thousands of
transactions a minute. Through a SQLAlchemy ``Connection`` each statement
costs a few hundred microseconds of Python (execution context, events,
result set-up), more than SQLite needs to run it. ``Prepared`` keeps the
statement written in Core (one source of truth: ``tables.py``), compiles it
once for the engine's dialect, and executes the SQL text on the driver's
cursor. PostgreSQL's driver (psycopg) prepares it on the server after a few
executions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import BigInteger, Dialect, Double, Text, bindparam, delete, func, insert, literal_column, select
from sqlalchemy import cast as sql_cast
from sqlalchemy import update as sql_update
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from giod.catalog.tables import (
    commit_keys,
    containers,
    database_parents,
    database_summaries,
    databases,
    dataset_totals,
    datasets,
    leases,
    replicas,
    sites,
    tag_stats,
    versions,
    visible,
)

__all__ = ["KEPT_COLUMNS", "CommitStatements", "Prepared", "add_totals", "execute", "summary_names"]


class Prepared:
    """One statement compiled for one dialect; parameters by name, as in Core."""

    __slots__ = ("_order", "sql")

    def __init__(self, statement: ClauseElement, dialect: Dialect):
        compiled = cast(SQLCompiler, statement.compile(dialect=dialect))
        self.sql = compiled.string
        # qmark (SQLite) binds by position, pyformat (psycopg) by name
        names = tuple(compiled.positiontup or ()) if compiled.positional else None
        self._order: Callable[[Mapping[str, Any]], Any] | None = None
        if names is not None:
            pick = itemgetter(*names) if names else (lambda _: ())
            # itemgetter of one name returns the value, not a 1-tuple
            self._order = (lambda values: (pick(values),)) if len(names) == 1 else pick

    def params(self, values: Mapping[str, Any]) -> Sequence[Any] | Mapping[str, Any]:
        """The driver's parameters for ``values`` (bind name -> value)."""
        if self._order is None:
            return values
        return self._order(values)  # type: ignore[no-any-return]

    def execute(self, cursor: Any, values: Mapping[str, Any] | None = None) -> Any:
        """Run once; returns the cursor, to fetch from."""
        cursor.execute(self.sql, self.params(values or {}))
        return cursor

    def executemany(self, cursor: Any, rows: Iterable[Mapping[str, Any]]) -> None:
        """Run once per row, in one driver call (psycopg pipelines them)."""
        batch = [self.params(row) for row in rows]
        if batch:
            cursor.executemany(self.sql, batch)


def execute(cursor: Any, dialect: Dialect, statement: ClauseElement) -> Any:
    """Compile and run a statement whose values are bound in it (IN lists, rare paths)."""
    compiled = cast(
        SQLCompiler,
        statement.compile(dialect=dialect, compile_kwargs={"render_postcompile": True}),
    )
    values = compiled.construct_params() or {}
    if compiled.positional:
        cursor.execute(compiled.string, tuple(values[n] for n in compiled.positiontup or ()))
    else:
        cursor.execute(compiled.string, values)
    return cursor


# -- the statements of the commit path ----------------------------------------------

_DATABASE_COLUMNS = (
    "dataset_id", "first_entry", "n_events", "bytes", "created", "created_version", "writer",
    "program", "program_version", "parameters", "idempotency_key",
)  # fmt: skip
_CONTAINER_COLUMNS = (
    "database_id", "name", "path", "checksum", "size", "cluster_entries", "schema_id",
    "created_version", "program", "program_version", "parameters", "created", "format", "cluster_checksums",
)  # fmt: skip


_SUMMARY_COLUMNS = (
    "database_id", "created_version", "dataset_id", "first_entry", "n_events", "database_version", "program",
    "bytes", "containers", "record", "container_ids", "created", "writer", "program_version", "parameters",
    "idempotency_key",
)  # fmt: skip
#: a live container as a pass's new summary record keeps it (``kept.record_text``)
KEPT_COLUMNS = (
    "database_id", "id", "name", "path", "checksum", "size", "cluster_entries", "schema_id", "program",
    "program_version", "parameters", "format", "cluster_checksums", "created_version", "created",
)  # fmt: skip


def summary_names(names: Iterable[str]) -> str:
    """The ``containers`` text of a database summary (level 13): its container names, sorted, comma-separated."""
    return ",".join(sorted(names))


def live_ids(dialect: Dialect, database_id: Any) -> Any:
    """A summary's ``container_ids`` (level 17) as SQL: the ids of the database's live containers in the order of
    their names by code point (PostgreSQL's "C" collation, SQLite's BINARY; SQLite's ``group_concat`` takes an
    ordered subquery's rows in order, as level 13's fill has it), comma-separated; '' for none."""
    c = containers
    live = (c.c.database_id == database_id) & visible(c, None)
    if dialect.name == "postgresql":
        ids = select(func.string_agg(sql_cast(c.c.id, Text), aggregate_order_by(literal_column("','"),
                                                                            c.c.name.collate("C")))).where(live)
    else:
        ordered = select(c.c.id).where(live).order_by(c.c.name).subquery()
        ids = select(func.group_concat(ordered.c.id, literal_column("','")))
    return func.coalesce(ids.scalar_subquery(), literal_column("''"))


def _insert(table: Any, columns: Sequence[str]) -> ClauseElement:
    """INSERT of exactly ``columns``, each bound by its own name."""
    return insert(table).values({name: bindparam(name, type_=table.c[name].type) for name in columns})


def add_totals() -> Any:
    """A dataset's totals at ``version``: its latest totals plus ``dn`` databases, ``de`` events, ``db`` bytes."""
    t = dataset_totals
    dataset = bindparam("dataset_id", type_=BigInteger)
    last = select(func.max(t.c.version)).where(t.c.dataset_id == dataset).scalar_subquery()
    latest = select(
        t.c.dataset_id,
        bindparam("version", type_=BigInteger),
        t.c.n_databases + bindparam("dn", type_=BigInteger),
        t.c.n_events + bindparam("de", type_=BigInteger),
        t.c.bytes + bindparam("db", type_=BigInteger),
    ).where(t.c.dataset_id == dataset, t.c.version == last)
    return insert(t).from_select(["dataset_id", "version", "n_databases", "n_events", "bytes"], latest)


class CommitStatements:
    """The statements of the commit path, compiled once for one dialect."""

    def __init__(self, dialect: Dialect):
        d, c, t = databases, containers, tag_stats

        def prepared(statement: ClauseElement) -> Prepared:
            return Prepared(statement, dialect)

        # a writer's lease released in its last commit's transaction (giod.catalog.leases)
        self.release_lease = prepared(delete(leases).where(leases.c.id == bindparam("id")))
        self.take_entries = prepared(
            sql_update(datasets)
            .where(datasets.c.name == bindparam("name"), visible(datasets, None))
            .values(next_entry=datasets.c.next_entry + bindparam("n", type_=BigInteger))
            .returning(datasets.c.id, datasets.c.next_entry)
        )
        # the single commit's: also the id of its site (NULL when there is none), with no round trip of its own
        self.take_entries_at_site = prepared(
            sql_update(datasets)
            .where(datasets.c.name == bindparam("name"), visible(datasets, None))
            .values(next_entry=datasets.c.next_entry + bindparam("n", type_=BigInteger))
            .returning(
                datasets.c.id,
                datasets.c.next_entry,
                select(sites.c.id).where(sites.c.name == bindparam("site")).scalar_subquery(),
            )
        )
        upsert = pg_dialect.insert if dialect.name == "postgresql" else sqlite_dialect.insert
        self.insert_database = prepared(
            upsert(d)
            .values({name: bindparam(name, type_=d.c[name].type) for name in _DATABASE_COLUMNS})
            .on_conflict_do_nothing(index_elements=["dataset_id", "idempotency_key"])
            .returning(d.c.id)
        )
        self.landed = prepared(
            select(d.c.id, d.c.first_entry, d.c.created_version).where(
                d.c.dataset_id == bindparam("dataset_id"), d.c.idempotency_key == bindparam("key")
            )
        )
        self.insert_parents = prepared(
            _insert(database_parents, ("database_id", "parent_id", "position"))
        )
        self.insert_containers = prepared(_insert(c, _CONTAINER_COLUMNS))
        # one good replica per container just inserted: no ids travel back to Python
        self.insert_replicas = prepared(
            insert(replicas).from_select(
                ["container_id", "site_id", "state", "checked"],
                select(
                    c.c.id,
                    bindparam("site_id", type_=BigInteger),
                    literal_column("'good'"),
                    bindparam("checked", type_=Double),
                ).where(
                    c.c.database_id == bindparam("database_id"),
                    c.c.created_version == bindparam("version"),
                ),
            )
        )
        self.retire_tag_stats = prepared(
            sql_update(t)
            .where(
                t.c.database_id == bindparam("database_id"),
                t.c.field == bindparam("field"),
                visible(t, None),
            )
            .values(deleted_version=bindparam("version"))
        )
        self.insert_tag_stats = prepared(
            _insert(t, ("database_id", "field", "created_version", "min", "max"))
        )
        self.log = prepared(_insert(versions, ("version", "created", "description")))
        self.add_totals = prepared(add_totals())
        self.site_id = prepared(select(sites.c.id).where(sites.c.name == bindparam("name")))
        self.live_database = prepared(
            select(d.c.n_events, datasets.c.name, datasets.c.id)
            .join(datasets, datasets.c.id == d.c.dataset_id)
            .where(d.c.id == bindparam("id"), visible(d, None))
        )
        self.live_containers = prepared(
            select(c.c.id, c.c.database_id, c.c.name, c.c.size).where(
                c.c.database_id == bindparam("id"), visible(c, None)
            )
        )
        self.retire_container = prepared(
            sql_update(c).where(c.c.id == bindparam("id")).values(deleted_version=bindparam("v"))
        )
        self.landed_key = prepared(
            select(commit_keys.c.version).where(commit_keys.c.key == bindparam("key"))
        )
        self.insert_key = prepared(_insert(commit_keys, ("key", "version", "created")))
        m = database_summaries
        # its containers' ids (level 17) made in the statement from the rows just inserted: nothing read back
        self.insert_summary = prepared(insert(m).values({
            **{name: bindparam(name, type_=m.c[name].type) for name in _SUMMARY_COLUMNS if name != "container_ids"},
            "container_ids": live_ids(dialect, bindparam("database_id", type_=BigInteger)),
        }))
        # a later pass's summary: the live one's database columns with new bytes and names
        self.extend_summary = prepared(
            insert(m).from_select(
                list(_SUMMARY_COLUMNS),
                select(
                    m.c.database_id, bindparam("version", type_=BigInteger), m.c.dataset_id, m.c.first_entry,
                    m.c.n_events, m.c.database_version, m.c.program, bindparam("bytes", type_=BigInteger),
                    bindparam("containers", type_=m.c.containers.type),
                    bindparam("record", type_=m.c.record.type),
                    bindparam("container_ids", type_=m.c.container_ids.type),
                    d.c.created, d.c.writer, d.c.program_version, d.c.parameters, d.c.idempotency_key,
                ).select_from(m.join(d, d.c.id == m.c.database_id))
                .where(m.c.database_id == bindparam("database_id"), visible(m, None)),
            )
        )
        # level 17: a live container's row and statistics as a pass's new summary keeps them
        self.live_rows = prepared(
            select(*(c.c[name] for name in KEPT_COLUMNS)).where(c.c.database_id == bindparam("id"), visible(c, None))
        )
        self.live_stats = prepared(
            select(t.c.field, t.c.min, t.c.max).where(t.c.database_id == bindparam("id"), visible(t, None))
        )
        # the summary a pass (``extend_summary``) or a deletion ends
        self.retire_summary = prepared(
            sql_update(m)
            .where(m.c.database_id == bindparam("database_id"), visible(m, None),
                   m.c.created_version < bindparam("version"))
            .values(deleted_version=bindparam("version"))
        )
