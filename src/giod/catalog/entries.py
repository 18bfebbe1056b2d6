"""The database that holds an entry: four index lookups on the driver's cursor.

``ds.event(i)`` asks the catalog for one database. Through SQLAlchemy the
listing's three queries cost several milliseconds of Python, most of it
compiling them again for every newly opened catalog (the compiled cache is
per engine). Here the statements are compiled once per process and dialect
(``prepared.Prepared``) and run on a DB-API cursor in one read transaction;
the record is the one ``queries.load_databases`` builds.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import BigInteger, Dialect, String, bindparam, cast, func, literal_column, select

from giod.catalog.listed import Parsed, container_record
from giod.catalog.prepared import Prepared
from giod.catalog.records import DatabaseRecord, check_head, row_bounds, row_object
from giod.catalog.tables import containers, database_parents, databases, datasets, replicas, tag_stats, visible

__all__ = ["EntryStatements", "find", "find_pipelined", "statements"]

_KEPT: dict[tuple[str, str, bool], EntryStatements] = {}
_LOCK = threading.Lock()


def _visible(table: Any, pinned: bool) -> Any:
    if not pinned:
        return visible(table, None)
    v = bindparam("version", type_=BigInteger)
    return (table.c.created_version <= v) & (table.c.deleted_version.is_(None) | (table.c.deleted_version > v))


class EntryStatements:
    """The statements of ``find`` for one dialect, at a pinned version or the live state."""

    def __init__(self, dialect: Dialect, pinned: bool):
        d, c, r, t, p = databases, containers, replicas, tag_stats, database_parents

        def prepared(statement: Any) -> Prepared:
            return Prepared(statement, dialect)

        self.dataset = prepared(select(datasets.c.id).where(datasets.c.name == bindparam("name"),
                                                            _visible(datasets, pinned)))
        dataset_id = (select(datasets.c.id).where(datasets.c.name == bindparam("name"), _visible(datasets, pinned))
                      .scalar_subquery())
        self.database = prepared(  # the dataset found in the same statement: one round trip fewer
            select(d.c.id, d.c.dataset_id, d.c.first_entry, d.c.n_events, d.c.created, d.c.created_version,
                   d.c.writer, d.c.program, d.c.program_version, d.c.parameters, d.c.idempotency_key)
            .where(d.c.dataset_id == dataset_id, d.c.first_entry <= bindparam("entry"), _visible(d, pinned))
            .order_by(d.c.first_entry.desc())
            .limit(literal_column("1")).offset(literal_column("0"))  # values would be parameters of their own
        )
        self.parents = prepared(
            select(p.c.parent_id).where(p.c.database_id == bindparam("id")).order_by(p.c.position))
        sites = (  # an index lookup per container (as in queries._load_containers)
            select(func.aggregate_strings(cast(r.c.site_id, String), literal_column("','")))  # type: ignore[arg-type]
            .where(r.c.container_id == c.c.id, r.c.state == literal_column("'good'"))
            .correlate(c)
            .scalar_subquery()
        )
        self.containers = prepared(
            select(c.c.id, c.c.database_id, c.c.name, c.c.path, c.c.checksum, c.c.size, c.c.cluster_entries,
                   c.c.schema_id, c.c.created_version, sites,
                   c.c.program, c.c.program_version, c.c.parameters, c.c.created, c.c.format,
                   c.c.cluster_checksums)
            .where(c.c.database_id == bindparam("id"), _visible(c, pinned))
            .order_by(c.c.id)
        )
        self.tag_stats = prepared(
            select(t.c.field, t.c.min, t.c.max).where(t.c.database_id == bindparam("id"), _visible(t, pinned)))
        # PostgreSQL: the same three keyed by the entry (the database found again in each, an index
        # lookup), so that all of them travel in one pipeline with the first: one round trip in all
        holder = (
            select(d.c.id)
            .where(d.c.dataset_id == dataset_id, d.c.first_entry <= bindparam("entry"), _visible(d, pinned))
            .order_by(d.c.first_entry.desc())
            .limit(literal_column("1"))
            .scalar_subquery()
        )
        self.parents_at = prepared(
            select(p.c.parent_id).where(p.c.database_id == holder).order_by(p.c.position))
        self.containers_at = prepared(
            select(c.c.id, c.c.database_id, c.c.name, c.c.path, c.c.checksum, c.c.size, c.c.cluster_entries,
                   c.c.schema_id, c.c.created_version, sites,
                   c.c.program, c.c.program_version, c.c.parameters, c.c.created, c.c.format,
                   c.c.cluster_checksums)
            .where(c.c.database_id == holder, _visible(c, pinned))
            .order_by(c.c.id)
        )
        self.tag_stats_at = prepared(
            select(t.c.field, t.c.min, t.c.max).where(t.c.database_id == holder, _visible(t, pinned)))


def statements(dialect: Dialect, pinned: bool) -> EntryStatements:
    """The statements for ``dialect``, compiled once per process."""
    key = (dialect.name, str(dialect.paramstyle), pinned)
    with _LOCK:
        found = _KEPT.get(key)
    if found is None:
        found = EntryStatements(dialect, pinned)
        with _LOCK:
            _KEPT[key] = found
    return found


def find(cursor: Any, s: EntryStatements, dataset: str, entry: int, version: int | None
         ) -> tuple[bool, DatabaseRecord | None]:
    """Whether ``dataset`` exists at ``version``, and its database holding ``entry`` then (None when none
    does). ``s`` must be the statements for ``version`` (pinned or not)."""
    at = {} if version is None else {"version": version}
    row = s.database.execute(cursor, {"name": dataset, "entry": entry, **at}).fetchone()
    if row is not None:
        check_head(row)
    if row is None or entry >= row[2] + row[3]:
        return s.dataset.execute(cursor, {"name": dataset, **at}).fetchone() is not None, None
    key = {"id": row[0], **at}
    parents = s.parents.execute(cursor, key).fetchall()
    held = s.containers.execute(cursor, key).fetchall()
    return True, _record(row, parents, held, s.tag_stats.execute(cursor, key).fetchall())


def find_pipelined(connection: Any, s: EntryStatements, dataset: str, entry: int, version: int | None, *,
                   snapshot: bool) -> tuple[bool, DatabaseRecord | None]:
    """``find`` on a psycopg connection: its statements sent together in one transaction (with
    ``snapshot``, a repeatable-read one) and its COMMIT after them, one round trip."""
    given = {"name": dataset, "entry": entry, **({} if version is None else {"version": version})}
    cursors = [connection.cursor() for _ in range(5)]
    with connection.pipeline():
        if snapshot:
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        for cursor, statement in zip(cursors, (s.database, s.dataset, s.parents_at, s.containers_at,
                                               s.tag_stats_at), strict=True):
            statement.execute(cursor, given)
        connection.commit()  # in the pipeline too: the transaction ends with the answers, no round trip of its own
    row, known, parents, held, stats = (cursors[0].fetchone(), cursors[1].fetchone(), cursors[2].fetchall(),
                                        cursors[3].fetchall(), cursors[4].fetchall())
    if row is not None:
        check_head(row)
    if row is None or entry >= row[2] + row[3]:
        return known is not None, None
    return True, _record(row, parents, held, stats)


def _record(row: Any, parents: Any, held_rows: Any, stats_rows: Any) -> DatabaseRecord:
    parsed = Parsed()  # the listing's reading of a container row: one way to read it
    held = tuple(container_record(c, parsed) for c in held_rows)
    stats = {field: row_bounds(field, lo, hi, f"database {row[0]}") for field, lo, hi in stats_rows}
    return DatabaseRecord(
        id=row[0], dataset_id=row[1], first_entry=row[2], n_events=row[3], bytes=sum(c.size for c in held),
        created=row[4], created_version=row[5], writer=row[6], program=row[7], program_version=row[8],
        parameters=row_object(row[9], f"parameters of database {row[0]}"), parents=tuple(int(p) for (p,) in parents),
        idempotency_key=row[10], containers=held,
        tag_stats=stats,
    )
