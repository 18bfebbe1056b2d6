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

from giod.catalog.records import ContainerRecord, DatabaseRecord, DatasetRecord, row_list, row_object
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
    conn: Connection, where: ColumnElement[bool], version: int | None
) -> list[DatabaseRecord]:
    """The databases matching ``where`` at ``version``, with containers and tag stats.

    Three queries whatever the number of databases. Rows are read as plain
    tuples and JSON texts shared by many rows are parsed once: building the
    records is the cost of listing a large dataset.
    """
    d, p = databases, database_parents
    cond = where & visible(d, version)
    rows = conn.execute(
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
    ).all()
    if not rows:
        return []
    heads: dict[int, Any] = {}
    parents: dict[int, list[int]] = {}
    for row in rows:
        if row[0] not in heads:
            heads[row[0]] = row
            parents[row[0]] = []
        if row[11] is not None:
            parents[row[0]].append(row[11])

    parameters: dict[str, dict[str, Any]] = {}  # JSON text -> parsed, shared by many rows
    held = _load_containers(conn, cond, version, heads, parameters)
    stats = _load_tag_stats(conn, cond, version, heads)
    out = []
    for db_id, row in heads.items():
        if row[9] not in parameters:
            parameters[row[9]] = row_object(row[9], f"parameters of database {row[0]}")
        out.append(
            DatabaseRecord(
                id=db_id,
                dataset_id=row[1],
                first_entry=row[2],
                n_events=row[3],
                bytes=sum(x.size for x in held[db_id]),
                created=row[4],
                created_version=row[5],
                writer=row[6],
                program=row[7],
                program_version=row[8],
                # a copy each: records share no mutable state
                parameters=dict(parameters[row[9]]),
                parents=tuple(parents[db_id]),
                idempotency_key=row[10],
                containers=tuple(held[db_id]),
                tag_stats=stats[db_id],
            )
        )
    return out


def _load_containers(
    conn: Connection,
    cond: ColumnElement[bool],
    version: int | None,
    heads: dict[int, Any],
    parameters: dict[str, dict[str, Any]],
) -> dict[int, list[ContainerRecord]]:
    """The containers of the databases in ``heads``, each with the sites holding a good copy."""
    c, d, r = containers, databases, replicas
    held: dict[int, list[ContainerRecord]] = {db_id: [] for db_id in heads}
    entries: dict[str, tuple[int, ...]] = {}
    holders: dict[str | None, tuple[int, ...]] = {None: ()}
    # the sites of its good copies, per container: an index lookup each, whatever the statistics say
    # (grouped over an outer join, PostgreSQL without statistics scanned every replica: 48 ms for one database)
    holding = (
        select(func.aggregate_strings(cast(r.c.site_id, String), ","))
        .where(r.c.container_id == c.c.id, r.c.state == "good")
        .correlate(c)
        .scalar_subquery()
    )
    query = (
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
        .order_by(c.c.id)
    )
    for row in conn.execute(query).all():
        text, site_ids, params = row[6], row[9], row[12]
        if text not in entries:
            entries[text] = row_list(text, f"cluster entries of container {row[0]}")
        if site_ids not in holders:
            holders[site_ids] = tuple(sorted(int(x) for x in site_ids.split(",")))
        if params not in parameters:
            parameters[params] = row_object(params, f"parameters of container {row[0]}")
        held[row[1]].append(
            ContainerRecord(
                row[0],
                row[1],
                row[2],
                row[3],
                row[4],
                row[5],
                entries[text],
                row[7],
                row[8],
                holders[site_ids],
                row[10],
                row[11],
                dict(parameters[params]),
                row[13],
                row[14],
                row_list(row[15], f"cluster checksums of container {row[0]}") if row[15] != "[]" else (),
            )
        )
    return held


def _load_tag_stats(
    conn: Connection, cond: ColumnElement[bool], version: int | None, heads: dict[int, Any]
) -> dict[int, dict[str, tuple[float, float]]]:
    """{database id: {field: (min, max)}}; unknown bounds (NULL) read as -inf/+inf."""
    t, d = tag_stats, databases
    stats: dict[int, dict[str, tuple[float, float]]] = {db_id: {} for db_id in heads}
    inf = math.inf
    for db_id, field, lo, hi in conn.execute(
        select(t.c.database_id, t.c.field, t.c.min, t.c.max)
        .select_from(t.join(d, d.c.id == t.c.database_id))
        .where(cond, visible(t, version))
    ).all():
        stats[db_id][field] = (-inf if lo is None else lo, inf if hi is None else hi)
    return stats
