"""Queries shared by the catalog's methods, and the loading of rows into records.

Everything here runs on a SQLAlchemy ``Connection`` inside a transaction the
caller opened (``Transactions._run``). ``load_databases`` is the listing:
three queries whatever the number of databases.
"""

from __future__ import annotations

import contextlib
import difflib
import gc
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

from giod.catalog.kept import GoodCopies
from giod.catalog.listed import Parsed, database_records, kept_records
from giod.catalog.records import DatabaseRecord, DatasetRecord
from giod.catalog.tables import (
    containers,
    database_parents,
    database_summaries,
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
from giod.errors import CatalogError, NotFound

__all__ = [
    "IN_CHUNK",
    "bound",
    "chunks",
    "dataset_record",
    "dataset_row",
    "dataset_select",
    "delete_rows",
    "load_databases",
    "load_kept",
    "uncollected",
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
    """The record of a dataset's row; CatalogError when a value is not of its column's type."""
    if not (type(row.id) is int and type(row.name) is str and type(row.schema_id) is int
            and type(row.created_version) is int and type(row.created) in (float, int)
            and (row.container_format is None or type(row.container_format) is str)):
        raise CatalogError(f"malformed catalog row: dataset {str(row.name)[:40]} is not as written: "
                           f"{str(tuple(row))[:160]}")
    return DatasetRecord(row.id, row.name, row.schema_id, row.created_version, float(row.created),
                         row.container_format)


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


def load_kept(conn: Connection, dataset_id: Any, after: int, chunk: int, version: int | None, parsed: Parsed
              ) -> tuple[list[DatabaseRecord] | None, int | None]:
    """The next ``chunk`` databases of a dataset after first entry ``after`` (and the last one's first entry,
    None when fewer were left) from the records the summaries keep (level 17): one summary row a database,
    with the database's own columns, read in entry order along the summaries' index (its end found by the
    same statement), the parents of those databases by the range of their ids, and the sites of the good
    copies of their containers by ranges of container ids. The records are None when a summary has no
    record (it ended before the migration that fills them): the caller reads the databases' rows of that
    entry range instead.
    """
    m = database_summaries
    # a summary is visible while its database is (a deletion ends both): no databases row is read; a database
    # has one summary visible at a version, and first entries are unique in a dataset: the chunk is an entry range
    query = (
        _kept_select()
        .where(m.c.dataset_id == dataset_id, m.c.first_entry > after, visible(m, version))
        .order_by(m.c.first_entry, m.c.database_id)
        .limit(chunk)
    )
    rows = _tuples(conn, query)
    last = rows[-1][2] if len(rows) == chunk else None
    if any(row[11] is None for row in rows):
        return None, last
    return kept_records(rows, _parents(conn, [row[0] for row in rows]),
                        _good_copies(conn, [row[12] for row in rows]), parsed), last


def _kept_select() -> Any:
    """The columns ``listed.kept_records`` reads, from the summaries alone."""
    m = database_summaries
    return select(
        m.c.database_id, m.c.dataset_id, m.c.first_entry, m.c.n_events, m.c.created, m.c.database_version,
        m.c.writer, m.c.program, m.c.program_version, m.c.parameters, m.c.idempotency_key, m.c.record,
        m.c.container_ids,
    )


def _parents(conn: Connection, ids: list[Any]) -> dict[Any, tuple[Any, ...]]:
    """{database id: its parents in order} of the databases in ``ids`` that have any: the parents' key read
    as the range of those ids, one probe when none has a parent (joined to each summary, the probe a row was
    ~30 % of SQLite's fetch); by the ids themselves when they are spread over a range more than four times
    their number (another dataset's databases between them), so that a chunk never reads much more than its
    own."""
    if not ids:
        return {}
    p = database_parents
    query = select(p.c.database_id, p.c.parent_id).order_by(p.c.database_id, p.c.position)
    lo, hi = min(ids), max(ids)
    if hi - lo < _SPREAD * len(ids) + _GAP:
        rows = _tuples(conn, query.where(p.c.database_id.between(lo, hi)))
    else:
        rows = [r for part in chunks(sorted(ids)) for r in _tuples(conn, query.where(p.c.database_id.in_(part)))]
    found: dict[Any, list[Any]] = {}
    for db_id, parent in rows:
        found.setdefault(db_id, []).append(parent)
    return {db_id: tuple(parents) for db_id, parents in found.items()}


@contextlib.contextmanager
def uncollected() -> Iterator[None]:
    """The cyclic garbage collector paused while a chunk's rows and records are made (and resumed as it
    was): they are many new objects, none in a cycle, and the collections they set off walked every one
    of them (and the caller's) again, ~40 % of a listing's CPU. The pause spans no yield to the caller."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()




#: container ids further apart than this start another range of the replicas read for a chunk
_GAP = 256
#: a chunk's parents are read by its databases' ids, not their range, when that range is wider than this many
#: times their number (plus ``_GAP``)
_SPREAD = 4


def _good_copies(conn: Connection, ids: list[Any]) -> GoodCopies:
    """The good copies of the containers in ``ids`` (``container_ids`` texts), and of any other container
    between them: the replicas' key read as ranges, not looked up one by one. Each range is counted first
    (its good copies, their sites' least and greatest): one where every container has one good copy, at one
    site, is kept as that site alone; the others' copies are read as texts ``container:site,…`` (or None:
    none), one a range, split when a record is first read."""
    ranges = _id_ranges(ids)
    if ranges is None:
        return GoodCopies()
    lo, hi = ranges
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        counts = _driver_rows(conn, _GOOD_COUNTS_PG, {"lo": lo, "hi": hi})
    else:
        counts = [one for a, b in zip(lo, hi, strict=True) for one in _driver_rows(conn, _GOOD_COUNTS, (a, b))]
    uniform: list[tuple[int, int, int]] = []
    rest_lo: list[int] = []
    rest_hi: list[int] = []
    for a, b, (n, least, greatest) in zip(lo, hi, counts, strict=True):
        if n == 0:
            continue
        # (container, site) is the replicas' key: one site and as many copies as ids is one copy an id
        if n == b - a + 1 and type(least) is int and least == greatest:
            uniform.append((a, b, least))
        else:  # the texts (a site that is not an id is an error when a record is read, as before)
            rest_lo.append(a)
            rest_hi.append(b)
    texts: list[Any] = []
    if rest_lo and postgres:
        texts = _driver_rows(conn, _GOOD_COPIES_PG, {"lo": rest_lo, "hi": rest_hi})
    else:
        for a, b in zip(rest_lo, rest_hi, strict=True):
            texts += _driver_rows(conn, _GOOD_COPIES, (a, b))
    return GoodCopies(texts, uniform)


_GOOD_COUNTS = ("SELECT count(*), min(site_id), max(site_id) FROM replicas "
                "WHERE container_id BETWEEN ? AND ? AND state = 'good'")
_GOOD_COPIES = ("SELECT group_concat(container_id || ':' || site_id, ',') FROM replicas "
                "WHERE container_id BETWEEN ? AND ? AND state = 'good'")
_GOOD_COUNTS_PG = ("SELECT g.n, g.least, g.greatest FROM unnest(%(lo)s::bigint[], %(hi)s::bigint[]) "
                   "WITH ORDINALITY AS u(lo, hi, k) CROSS JOIN LATERAL (SELECT count(*) AS n, "
                   "min(r.site_id) AS least, max(r.site_id) AS greatest FROM replicas r "
                   "WHERE r.container_id BETWEEN u.lo AND u.hi AND r.state = 'good') AS g ORDER BY u.k")
_GOOD_COPIES_PG = ("SELECT (SELECT string_agg(r.container_id || ':' || r.site_id, ',') FROM replicas r "
                   "WHERE r.container_id BETWEEN u.lo AND u.hi AND r.state = 'good') "
                   "FROM unnest(%(lo)s::bigint[], %(hi)s::bigint[]) WITH ORDINALITY AS u(lo, hi, k) ORDER BY u.k")


def _id_ranges(ids: list[Any]) -> tuple[list[int], list[int]] | None:
    """The ranges (first ids, last ids) the container ids in ``ids`` (``container_ids`` texts) fall in, split
    where two are more than ``_GAP`` apart; None when there is none. The ids are parsed by numpy's text
    reader in one call (~0.2 µs an id less than splitting them in Python)."""
    import numpy as np

    joined = ",".join(filter(None, ids))
    if not joined:
        return None
    try:
        found = np.fromstring(joined, dtype=np.int64, sep=",")
    except (ValueError, OverflowError):  # a text that does not parse (its record says so when read): the others
        found = np.array([x for x in joined.split(",") if x.isdigit() and len(x) < 19], dtype=np.int64)
        if not len(found):
            return None
    found.sort()
    cuts = np.flatnonzero(np.diff(found) > _GAP)
    return [int(found[0]), *(int(x) for x in found[cuts + 1])], [*(int(x) for x in found[cuts]), int(found[-1])]


def _driver_rows(conn: Connection, sql: str, values: Any) -> list[Any]:
    cursor: Any = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql, values)
        return list(cursor.fetchall())
    finally:
        cursor.close()


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
