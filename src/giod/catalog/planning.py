"""Planning a selection: the databases whose tag statistics may match, found through indexes.

The full check (``queries.outside_bounds``) looks at every database's
statistics. A database with no statistics row for a field must be kept,
which is why a lookup of the rows in range alone is not enough. Level 11
keeps, per dataset, tag field and version, how many databases have a row
(``tag_coverage``); when that is every database of the snapshot
(``dataset_totals``), the databases with a row in range are all the
candidates, and those are found by index ranges on ``tag_stats``:

* ``field, min`` from ``lo - width`` to ``hi`` (``width``: the widest
  ``max - min`` a row of the field ever had), then ``max >= lo``;
* ``field, min`` up to ``hi`` when the range has no lower end, ``field, max``
  from ``lo`` when it has no upper end;
* unknown bounds (NULL ``min`` or ``max``), which rule nothing out.

The candidates then get the full check, so the answer is the full check's
answer; only the databases looked at differ. A snapshot without such a
field (some database lacks statistics, a row had ``min > max``, a version
from before level 11) is planned by the full check over every database.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    CompoundSelect,
    Connection,
    Double,
    and_,
    bindparam,
    exists,
    false,
    func,
    or_,
    select,
    true,
    union,
)

from giod.catalog.queries import chunks, outside_bounds
from giod.catalog.records import Bounds
from giod.catalog.tables import databases, dataset_totals, datasets, tag_coverage, tag_stats, visible

__all__ = ["Covered", "covered_field", "kept_ids", "kept_ids_by_name"]

#: the relative slack under ``lo - width``: a width rounded down must not leave out a row
_SLACK = 1e-9

Covered = tuple[str, float]  # (field, width)


def _latest(column: Any, version_column: Any, version: int | None, *where: Any) -> Any:
    """The scalar subquery of ``column`` in the latest row at or before ``version`` matching ``where``."""
    query = select(column).where(*where)
    if version is not None:
        query = query.where(version_column <= version)
    return query.order_by(version_column.desc()).limit(1).scalar_subquery()


def covered_field(conn: Connection, dataset_id: Any, version: int | None, bounds: Bounds) -> Covered | None:
    """A field of ``bounds`` with statistics in every database of the dataset at ``version``, with its width.

    One statement: the totals and each bounded field's coverage, an index lookup each; None when no
    bounded field is covered (or no dataset has the id). ``dataset_id``: the id, or a scalar subquery that
    finds it (the dataset by name: no statement of its own).
    """
    t, c = dataset_totals, tag_coverage
    # two-sided ranges first: their index range is the narrowest
    fields = sorted((name for name, (lo, hi) in bounds.items() if lo > -math.inf or hi < math.inf),
                    key=lambda name: (not math.isfinite(bounds[name][0] - bounds[name][1]), name))
    if not fields:
        return None
    looked = [_latest(t.c.n_databases, t.c.version, version, t.c.dataset_id == dataset_id)]
    for name in fields:
        at = (c.c.dataset_id == dataset_id, c.c.field == name)
        looked += [_latest(c.c.n_databases, c.c.version, version, *at), _latest(c.c.width, c.c.version, version, *at)]
    total, *found = conn.execute(select(*looked)).one()
    if total is None:
        return None  # a snapshot from before the totals: nothing to compare with
    for k, name in enumerate(fields):
        n, width = found[2 * k], found[2 * k + 1]
        if n is not None and int(n) == int(total) and width is not None:
            return name, float(width)
    return None


def _in_range(field: str, lo: float, hi: float, width: float, version: int | None) -> CompoundSelect[Any]:
    """SELECT of the ids of databases with a visible row of ``field`` that may overlap [lo, hi]."""
    t = tag_stats
    rows: list[ColumnElement[bool]] = [t.c.min.is_(None), t.c.max.is_(None)]
    if lo == -math.inf:
        rows.append(t.c.min <= hi)
    elif hi == math.inf:
        rows.append(t.c.max >= lo)
    else:
        floor = lo - width - _SLACK * (abs(lo) + width)
        rows.append(t.c.min.between(floor, hi) & (t.c.max >= lo))
    # one SELECT per index range: an OR of them would be read as one scan
    return union(*(select(t.c.database_id).where(t.c.field == field, row, visible(t, version)) for row in rows))


def kept_ids(conn: Connection, dataset_id: Any, where: ColumnElement[bool], version: int | None,
             bounds: Bounds) -> list[int]:
    """Ids of the databases matching ``where`` at ``version`` whose statistics may overlap ``bounds``.

    The full check's answer, in no particular order; through the indexes when a field of ``bounds``
    is covered (``covered_field``), else over every database that ``where`` selects. ``dataset_id``:
    the dataset's id, a scalar subquery finding it, or None (no index path).
    """
    d = databases
    full = select(d.c.id).where(where, visible(d, version), ~outside_bounds(bounds, version))
    found = None if dataset_id is None else covered_field(conn, dataset_id, version, bounds)
    if found is None:
        return list(conn.execute(full).scalars())
    name, width = found
    lo, hi = bounds[name]
    near = _in_range(name, float(lo), float(hi), width, version)
    if conn.dialect.name == "postgresql":
        # one statement, one round trip: PostgreSQL reads the candidates' index ranges first, then each
        # candidate by its key and its full check (EXPLAIN ANALYZE at 30,000 databases, no table statistics:
        # the union's ids hashed, a key lookup and an anti-join each; 0.25 ms)
        return [int(i) for i in conn.execute(full.where(d.c.id.in_(near.scalar_subquery()))).scalars()]
    ids = sorted(set(conn.execute(near).scalars()))
    # the candidates get the full check (other fields, other datasets' rows of the same field); not in the
    # same statement: SQLite reads that as a scan of the dataset's databases testing each against the ranges
    return [int(i) for chunk in chunks(ids) for i in conn.execute(full.where(d.c.id.in_(chunk))).scalars()]


# -- a selection's plan by the dataset's name, its statements built once per shape ---------------------
#
# Building the statements above (SQLAlchemy expressions, their cache keys) costs more Python than the
# server needs to run them. A selection's plan (a dataset by name, tag ranges, nothing else) takes
# statements of a few shapes only: which fields are bounded at which ends, live or pinned. Each shape's
# statements are built once per process with the values as parameters; the answers are those of
# ``kept_ids`` (the same SQL, values bound rather than built in).

_Shape = tuple[tuple[str, bool, bool], ...]  # (field, lower end finite, upper end finite), by field
_BUILT: dict[tuple[Any, ...], Any] = {}
_KEEP = 512


def _version(pinned: bool) -> Any:
    return bindparam("version", type_=BigInteger()) if pinned else None


def _dataset_id(pinned: bool) -> Any:
    d = datasets
    return select(d.c.id).where(d.c.name == bindparam("dataset"), visible(d, _version(pinned))).scalar_subquery()


def _built(key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    found = _BUILT.get(key)
    if found is None:
        if len(_BUILT) >= _KEEP:  # shapes come from users' selections: a bounded number of them is kept
            _BUILT.clear()
        found = _BUILT[key] = build()  # two threads may build one shape twice: the same statement
    return found


def _full(shape: _Shape, pinned: bool) -> Any:
    """The full check by name (``kept_ids``' ``full``): bounds ``lo_k`` and ``hi_k``, field k of ``shape``."""

    def build() -> Any:
        t, d, v = tag_stats.alias("pruning"), databases, _version(pinned)
        tests = []
        for k, (name, low, high) in enumerate(shape):
            outside = ([t.c.max < bindparam(f"lo_{k}", type_=Double())] if low else []) + (
                [t.c.min > bindparam(f"hi_{k}", type_=Double())] if high else [])
            if outside:
                tests.append(and_(t.c.field == name, or_(*outside)))
        seen = visible(t, v)  # type: ignore[arg-type]  # an alias of tag_stats, as in outside_bounds
        out = exists().where(t.c.database_id == d.c.id, seen, func.coalesce(t.c.min <= t.c.max, true()),
                             or_(*tests)).correlate(d) if tests else false()
        return select(d.c.id).where(d.c.dataset_id == _dataset_id(pinned), visible(d, v), ~out)

    return _built(("full", shape, pinned), build)


def _coverage(fields: tuple[str, ...], pinned: bool) -> Any:
    def build() -> Any:
        t, c, v = dataset_totals, tag_coverage, _version(pinned)
        ds = _dataset_id(pinned)
        looked = [_latest(t.c.n_databases, t.c.version, v, t.c.dataset_id == ds)]
        for name in fields:
            at = (c.c.dataset_id == ds, c.c.field == name)
            looked += [_latest(c.c.n_databases, c.c.version, v, *at), _latest(c.c.width, c.c.version, v, *at)]
        return select(*looked)

    return _built(("coverage", fields, pinned), build)


def _near(field: str, ends: str, pinned: bool) -> Any:
    """``_in_range`` with ``near_lo``, ``near_hi`` and ``near_floor`` as parameters."""

    def build() -> Any:
        t, v = tag_stats, _version(pinned)
        lo: Any = bindparam("near_lo", type_=Double())
        hi: Any = bindparam("near_hi", type_=Double())
        rows: list[ColumnElement[bool]] = [t.c.min.is_(None), t.c.max.is_(None)]
        if ends == "upper":
            rows.append(t.c.min <= hi)
        elif ends == "lower":
            rows.append(t.c.max >= lo)
        else:
            rows.append(t.c.min.between(bindparam("near_floor", type_=Double()), hi) & (t.c.max >= lo))
        return union(*(select(t.c.database_id).where(t.c.field == field, row, visible(t, v)) for row in rows))

    return _built(("near", field, ends, pinned), build)


def kept_ids_by_name(conn: Connection, dataset: str, version: int | None, bounds: Bounds) -> list[int]:
    """``kept_ids`` of the dataset named ``dataset`` (none: no ids) with ``where`` its databases: the same
    answer, from statements built once per shape of ``bounds``."""
    pinned = version is not None
    shape: _Shape = tuple((name, lo > -math.inf, hi < math.inf) for name, (lo, hi) in sorted(bounds.items()))
    values: dict[str, Any] = {"dataset": dataset, **({"version": version} if pinned else {})}
    for k, (_, (lo, hi)) in enumerate(sorted(bounds.items())):
        values[f"lo_{k}"], values[f"hi_{k}"] = float(lo), float(hi)
    full = _full(shape, pinned)
    fields = tuple(sorted((name for name, (lo, hi) in bounds.items() if lo > -math.inf or hi < math.inf),
                          key=lambda name: (not math.isfinite(bounds[name][0] - bounds[name][1]), name)))
    found = None
    if fields:
        total, *counted = conn.execute(_coverage(fields, pinned), values).one()
        if total is not None:
            found = next(((name, float(counted[2 * k + 1])) for k, name in enumerate(fields)
                          if counted[2 * k] is not None and int(counted[2 * k]) == int(total)
                          and counted[2 * k + 1] is not None), None)
    if found is None:
        return [int(i) for i in conn.execute(full, values).scalars()]
    name, width = found
    lo, hi = float(bounds[name][0]), float(bounds[name][1])
    ends = "upper" if lo == -math.inf else "lower" if hi == math.inf else "both"
    values.update(near_lo=lo, near_hi=hi, near_floor=lo - width - _SLACK * (abs(lo) + width))
    near = _near(name, ends, pinned)
    d = databases
    if conn.dialect.name == "postgresql":  # one statement, as in kept_ids
        checked = _built(("checked", shape, name, ends, pinned), lambda: full.where(d.c.id.in_(near.scalar_subquery())))
        return [int(i) for i in conn.execute(checked, values).scalars()]
    ids = sorted(set(conn.execute(near, values).scalars()))
    by_ids = _built(("by ids", shape, pinned), lambda: full.where(d.c.id.in_(bindparam("ids", expanding=True))))
    return [int(i) for chunk in chunks(ids) for i in conn.execute(by_ids, {**values, "ids": chunk}).scalars()]
