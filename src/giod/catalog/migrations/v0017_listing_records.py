"""Step 17: each summary line keeps its database's whole listing record (``giod.catalog.kept``).

The listing fetched ~15 rows a database. ``database_summaries`` gains
``record`` (the visible containers and tag statistics as one text) and
``container_ids``; from here on every write that changes a database's visible
containers or statistics writes a new summary row (a pass that only restates
statistics included), so a row's record is the one valid while it is.

The database's own columns the listing reads (``created``, ``writer``,
``program_version``, ``parameters``, ``idempotency_key``) are copied beside the
record, so that it reads no databases row: a database row never changes.

The fill gives every live row its record (and those columns), from the live containers and
statistics. A live row older than its database's newest statistics (a pass
that only restated them, which did not write a row before this level) is
ended at that version and continued by a row with the record; rows that
ended before the migration keep no record (NULL): a listing pinned there
reads those databases' rows as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, Double, bindparam, text

from giod.catalog.kept import container_ids, record_text

_BATCH = 2_000
_LIVE = text("SELECT database_id, created_version FROM database_summaries WHERE deleted_version IS NULL "
             "ORDER BY database_id")
_CONTAINERS = text(
    "SELECT database_id, id, name, path, checksum, size, cluster_entries, schema_id, program, program_version, "
    "parameters, format, cluster_checksums, created_version, created FROM containers "
    "WHERE database_id IN :ids AND deleted_version IS NULL"
).bindparams(bindparam("ids", expanding=True))
_STATS = text(
    "SELECT database_id, field, min, max, created_version FROM tag_stats "
    "WHERE database_id IN :ids AND deleted_version IS NULL"
).bindparams(bindparam("ids", expanding=True))
_HEADS = text(
    "SELECT id, created, writer, program_version, parameters, idempotency_key FROM databases WHERE id IN :ids"
).bindparams(bindparam("ids", expanding=True))
_HEAD = ("created", "writer", "program_version", "parameters", "idempotency_key")
_SET = text("UPDATE database_summaries SET record = :record, container_ids = :ids, created = :created, "
            "writer = :writer, program_version = :program_version, parameters = :parameters, "
            "idempotency_key = :idempotency_key WHERE database_id = :db AND created_version = :v")
_END = text("UPDATE database_summaries SET deleted_version = :at WHERE database_id = :db AND created_version = :v")
_CONTINUE = text(
    "INSERT INTO database_summaries (database_id, created_version, deleted_version, dataset_id, first_entry, "
    "n_events, database_version, program, bytes, containers, record, container_ids, created, writer, "
    "program_version, parameters, idempotency_key) "
    "SELECT database_id, :at, NULL, dataset_id, first_entry, n_events, database_version, program, bytes, "
    "containers, :record, :ids, :created, :writer, :program_version, :parameters, :idempotency_key "
    "FROM database_summaries WHERE database_id = :db AND created_version = :v"
)


def _batches(rows: list[Any]) -> Iterator[list[Any]]:
    for i in range(0, len(rows), _BATCH):
        yield rows[i : i + _BATCH]


def fill(conn: Connection) -> None:
    """The record of every live summary row, ending and continuing those older than their statistics."""
    live = [(int(db), int(v)) for db, v in conn.execute(_LIVE)]
    for batch in _batches(live):
        ids = [db for db, _ in batch]
        held: dict[int, list[dict[str, Any]]] = {}
        for row in conn.execute(_CONTAINERS, {"ids": ids}).mappings():
            held.setdefault(int(row["database_id"]), []).append(dict(row))
        stats: dict[int, list[dict[str, Any]]] = {}
        for row in conn.execute(_STATS, {"ids": ids}).mappings():
            stats.setdefault(int(row["database_id"]), []).append(dict(row))
        heads = {int(row["id"]): {key: row[key] for key in _HEAD}
                 for row in conn.execute(_HEADS, {"ids": ids}).mappings()}
        kept, ended, continued = [], [], []
        for db, v in batch:
            values = {"db": db, "v": v, "record": record_text(held.get(db, ()), stats.get(db, ())),
                      "ids": container_ids((c["id"], c["name"]) for c in held.get(db, ())), **heads[db]}
            newest = max((int(s["created_version"]) for s in stats.get(db, ())), default=v)
            if newest > v:
                ended.append({"db": db, "v": v, "at": newest})
                continued.append({**values, "at": newest})
            else:
                kept.append(values)
        if kept:
            conn.execute(_SET, kept)
        if continued:
            conn.execute(_CONTINUE, continued)  # copies the row before the next statement ends it
            conn.execute(_END, ended)


def upgrade(conn: Connection) -> None:
    double = Double().compile(dialect=conn.dialect)  # as the table would be created
    for column, kind in (("record", "TEXT"), ("container_ids", "TEXT"), ("created", double), ("writer", "TEXT"),
                         ("program_version", "TEXT"), ("parameters", "TEXT"), ("idempotency_key", "TEXT")):
        conn.execute(text(f"ALTER TABLE database_summaries ADD COLUMN {column} {kind}"))
    fill(conn)
