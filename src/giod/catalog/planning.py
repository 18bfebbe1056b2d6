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
from typing import Any

from sqlalchemy import ColumnElement, CompoundSelect, Connection, select, union

from giod.catalog.queries import chunks, outside_bounds
from giod.catalog.records import Bounds
from giod.catalog.tables import databases, dataset_totals, tag_coverage, tag_stats, visible

__all__ = ["Covered", "covered_field", "kept_ids"]

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
