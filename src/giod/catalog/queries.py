"""Queries shared by the catalog's methods, and the loading of rows into records.

Everything here runs on a SQLAlchemy ``Connection`` inside a transaction the
caller opened (``Transactions._run``). ``load_databases`` is the listing:
three queries whatever the number of databases.
"""

from __future__ import annotations

import difflib
import math
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    String,
    and_,
    bindparam,
    cast,
    exists,
    false,
    func,
    insert,
    or_,
    select,
    true,
)
from sqlalchemy import update as sql_update

from giod.catalog.listed import Parsed, database_records
from giod.catalog.records import DatabaseRecord, DatasetRecord
from giod.catalog.tables import (
    containers,
    database_parents,
    databases,
    dataset_schemas,
    datasets,
    replicas,
    schemas,
    sites,
    tag_stats,
    versions,
    visible,
)
from giod.errors import NotFound

__all__ = [
    "IN_CHUNK",
    "bound",
    "chunks",
    "dataset_record",
    "dataset_row",
    "dataset_select",
    "delete_rows",
    "load_databases",
    "log",
    "missing",
    "missing_dataset",
    "outside_bounds",
    "not_found",
    "require_databases",
    "require_schemas",
    "site_id",
]

T = TypeVar("T")

IN_CHUNK = 5_000  # ids per IN (...) list, well under SQLite's parameter limit

_SITE_ID = select(sites.c.id).where(sites.c.name == bindparam("name"))
_SCHEMA_IDS = select(schemas.c.id).where(schemas.c.id.in_(bindparam("ids", expanding=True)))


def chunks(values: Iterable[T]) -> Iterator[list[T]]:
    """Lists of at most IN_CHUNK values, for IN (...) conditions."""
    listed = list(values)
    for i in range(0, len(listed), IN_CHUNK):
        yield listed[i : i + IN_CHUNK]


def log(conn: Connection, version: int, description: str) -> None:
    """The line of the ``versions`` log for ``version``."""
    conn.execute(
        insert(versions), {"version": version, "created": time.time(), "description": description}
    )


def bound(value: float) -> float | None:
    """A finite float, or None: NaN and infinities mean "unknown, may match"."""
    value = float(value)
    return value if math.isfinite(value) else None


# -- datasets and sites -------------------------------------------------------------


def dataset_select(version: int | None) -> Any:
    """SELECT of the datasets visible at ``version``, each with its schema then."""
    if version is None:
        schema_id: Any = datasets.c.schema_id
    else:
        ds = dataset_schemas
        schema_id = (
            select(ds.c.schema_id)
            .where(ds.c.dataset_id == datasets.c.id, ds.c.version <= version)
            .order_by(ds.c.version.desc())
            .limit(1)
            .scalar_subquery()
        )
    return select(
        datasets.c.id,
        datasets.c.name,
        schema_id.label("schema_id"),
        datasets.c.created_version,
        datasets.c.created,
        datasets.c.container_format,
    ).where(visible(datasets, version))


_LIVE_DATASET = dataset_select(None).where(datasets.c.name == bindparam("name"))
# one statement for every version (its cache key made once, not a statement built per version)
_DATASET_AT = dataset_select(bindparam("version", type_=BigInteger)).where(  # type: ignore[arg-type]
    datasets.c.name == bindparam("name"))


def dataset_row(conn: Connection, name: str, version: int | None) -> Any:
    """The dataset's row at ``version``, or None."""
    if version is None:
        return conn.execute(_LIVE_DATASET, {"name": name}).first()
    return conn.execute(_DATASET_AT, {"name": name, "version": int(version)}).first()


def dataset_record(row: Any) -> DatasetRecord:
    return DatasetRecord(
        int(row.id), row.name, int(row.schema_id), int(row.created_version), float(row.created),
        row.container_format,
    )


def not_found(kind: str, name: str, candidates: list[str]) -> NotFound:
    """NotFound for ``name``, naming up to three close matches among ``candidates``."""
    close = difflib.get_close_matches(name, candidates, n=3)
    # "qcd" for "qcd_multijet" (and back) is too short a match for difflib alone
    close += [c for c in candidates if c not in close and (c in name or name in c)][
        : 3 - len(close)
    ]
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return NotFound(f"no {kind} named {name!r}{hint}")


def missing(conn: Connection, kind: str, name: str, names: Any) -> NotFound:
    """``not_found`` with the candidates that the query ``names`` lists."""
    return not_found(kind, name, list(conn.execute(names).scalars()))


def missing_dataset(conn: Connection, name: str, version: int | None) -> NotFound:
    names = select(datasets.c.name).where(visible(datasets, version))
    error = missing(conn, "dataset", name, names)
    if version is not None:
        return NotFound(f"{error} at version {version}")
    return error


def site_id(conn: Connection, name: str) -> int:
    """The id of the site ``name``; NotFound names close matches."""
    found = conn.execute(_SITE_ID, {"name": name}).scalar_one_or_none()
    if found is None:
        raise missing(conn, "site", name, select(sites.c.name))
    return int(found)


def require_schemas(conn: Connection, ids: set[int]) -> None:
    """NotFound unless every schema exists."""
    if not ids:
        return
    found = set(conn.execute(_SCHEMA_IDS, {"ids": sorted(ids)}).scalars())
    if ids - found:
        raise NotFound(f"no schema with id {min(ids - found)}")


def require_databases(conn: Connection, ids: set[int], *, live: bool) -> dict[int, int]:
    """{id: n_events} of the databases; NotFound for any that does not exist (or is deleted)."""
    d = databases
    found: dict[int, int] = {}
    for chunk in chunks(sorted(ids)):
        q = select(d.c.id, d.c.n_events).where(d.c.id.in_(chunk))
        if live:
            q = q.where(visible(d, None))
        found.update((int(r.id), int(r.n_events)) for r in conn.execute(q))
    if ids - found.keys():
        raise NotFound(f"no database {min(ids - found.keys())}")
    return found


def delete_rows(conn: Connection, version: int, container_cond: Any, stats_cond: Any) -> None:
    """Mark the live containers and tag statistics matching the conditions deleted."""
    conn.execute(
        sql_update(containers)
        .where(container_cond, visible(containers, None))
        .values(deleted_version=version)
    )
    conn.execute(
        sql_update(tag_stats)
        .where(stats_cond, visible(tag_stats, None))
        .values(deleted_version=version)
    )


# -- the listing --------------------------------------------------------------------


#: the listing's own queries read tag_stats too; one alias for every statement (the columns of a new alias
#: cost ~1 ms to make: a proxy each, and a listener registered for each of its foreign keys)
_PRUNING = tag_stats.alias("pruning")


def outside_bounds(bounds: dict[str, tuple[float, float]], version: int | None) -> ColumnElement[bool]:
    """True for a database with a field's statistics wholly outside its range in ``bounds``.

    The SQL form of ``records.overlaps`` (negated): unknown bounds (NULL)
    and contradictory statistics (min > max) rule nothing out.
    """
    t = _PRUNING
    tests = []
    for name, (lo, hi) in sorted(bounds.items()):
        outside = []
        if lo > -math.inf:
            outside.append(t.c.max < float(lo))
        if hi < math.inf:
            outside.append(t.c.min > float(hi))
        if outside:
            tests.append(and_(t.c.field == name, or_(*outside)))
    if not tests:
        return false()
    return exists().where(
        t.c.database_id == databases.c.id,
        visible(t, version),  # type: ignore[arg-type]
        func.coalesce(t.c.min <= t.c.max, true()),
        or_(*tests),
    ).correlate(databases)



def load_databases(
    conn: Connection, where: ColumnElement[bool], version: int | None, parsed: Parsed | None = None
) -> list[DatabaseRecord]:
    """The databases matching ``where`` at ``version``, with containers and tag stats.

    Three queries whatever the number of databases, read as the driver's
    tuples (a SQLAlchemy row each cost more than the driver's fetch); the
    records' containers and statistics are built from them when first read
    (``giod.catalog.listed``). ``parsed``: the JSON texts already parsed by
    earlier calls of the same listing.
    """
    d, p = databases, database_parents
    cond = where & visible(d, version)
    heads = _tuples(conn,
        select(
            d.c.id,
            d.c.dataset_id,
            d.c.first_entry,
            d.c.n_events,
            d.c.created,
            d.c.created_version,
            d.c.writer,
            d.c.program,
            d.c.program_version,
            d.c.parameters,
            d.c.idempotency_key,
            p.c.parent_id,
        )
        .select_from(d.outerjoin(p, p.c.database_id == d.c.id))
        .where(cond)
        .order_by(d.c.first_entry, d.c.id, p.c.position)
    )
    if not heads:
        return []
    t = tag_stats
    stats = _tuples(conn, select(t.c.database_id, t.c.field, t.c.min, t.c.max)
                    .select_from(t.join(d, d.c.id == t.c.database_id))
                    .where(cond, visible(t, version)))
    return database_records(heads, _tuples(conn, _containers_query(cond, version)), stats, parsed or Parsed())


def _tuples(conn: Connection, query: Any) -> list[Any]:
    """The rows of ``query`` as the driver's tuples (its compiled form cached by the engine, as any)."""
    result = conn.execute(query)
    try:
        return list(result.cursor.fetchall())
    finally:
        result.close()


def _containers_query(cond: ColumnElement[bool], version: int | None) -> Any:
    """The containers of the databases matching ``cond``, each with the sites holding a good copy,
    in the columns ``listed.container_record`` reads."""
    c, d, r = containers, databases, replicas
    # the sites of its good copies, per container: an index lookup each, whatever the statistics say
    # (grouped over an outer join, PostgreSQL without statistics scanned every replica: 48 ms for one database)
    holding = (
        select(func.aggregate_strings(cast(r.c.site_id, String), ","))
        .where(r.c.container_id == c.c.id, r.c.state == "good")
        .correlate(c)
        .scalar_subquery()
    )
    return (
        select(
            c.c.id,
            c.c.database_id,
            c.c.name,
            c.c.path,
            c.c.checksum,
            c.c.size,
            c.c.cluster_entries,
            c.c.schema_id,
            c.c.created_version,
            holding,
            c.c.program,
            c.c.program_version,
            c.c.parameters,
            c.c.created,
            c.c.format,
            c.c.cluster_checksums,
        )
        .select_from(c.join(d, d.c.id == c.c.database_id))
        .where(cond, visible(c, version))
    )
