"""The values a catalog keeps beside its rows, written anew from the rows (``giod fsck --repair``).

Writes keep a dataset's totals (``dataset_totals``), a summary per database
(``database_summaries``: the listing's line and record) and each tag field's
coverage (``tag_coverage``) so that reads look them up instead of counting.
``giod fsck`` compares them with the rows; one that disagrees (a hand edit, a
bug) is written again here, in one transaction at a new version, from the
rows of that version: the totals and every field's coverage always (a row
each), the summaries of the databases named, and any visible summary of the
dataset whose database is not one of its visible databases is ended. Older
versions keep what they had: a reader pinned before the repair sees the old
values, as it sees the old rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, insert, select, update

from giod.catalog.kept import container_ids, record_text
from giod.catalog.prepared import KEPT_COLUMNS, summary_names
from giod.catalog.queries import chunks
from giod.catalog.tables import (
    containers,
    database_summaries,
    databases,
    dataset_totals,
    tag_coverage,
    tag_stats,
    visible,
)

__all__ = ["rebuild_kept"]

_HEAD = ("id", "first_entry", "n_events", "created_version", "program", "created", "writer", "program_version",
         "parameters", "idempotency_key")


def rebuild_kept(conn: Connection, dataset_id: int, version: int, summaries: Iterable[int]) -> dict[str, int]:
    """Write the kept values of dataset ``dataset_id`` at ``version`` from its visible rows: the totals, the
    coverage of every field a row or a kept coverage names, and the summaries of the databases ``summaries``
    (those of them still visible). Returns what was written: ``{"summaries", "ended", "fields"}``."""
    d, m = databases, database_summaries
    live = select(d.c.id).where(d.c.dataset_id == dataset_id, visible(d, None))
    heads = {row[0]: dict(zip(_HEAD, row, strict=True)) for row in conn.execute(
        select(*(d.c[name] for name in _HEAD)).where(d.c.dataset_id == dataset_id, visible(d, None)))}
    size = sum(int(s) for (s,) in conn.execute(
        select(containers.c.size).where(containers.c.database_id.in_(live), visible(containers, None))))
    conn.execute(insert(dataset_totals).values(
        dataset_id=dataset_id, version=version, n_databases=len(heads),
        n_events=sum(int(h["n_events"]) for h in heads.values()), bytes=size))
    fields = _coverage(conn, dataset_id, version, live)
    ended = conn.execute(update(m).where(m.c.dataset_id == dataset_id, visible(m, None), m.c.database_id.not_in(live))
                         .values(deleted_version=version)).rowcount
    wanted = sorted({i for i in summaries if i in heads})
    for chunk in chunks(wanted):
        conn.execute(update(m).where(m.c.database_id.in_(chunk), visible(m, None)).values(deleted_version=version))
        held: dict[int, list[dict[str, Any]]] = {i: [] for i in chunk}
        for row in conn.execute(select(*(containers.c[n] for n in KEPT_COLUMNS))
                                .where(containers.c.database_id.in_(chunk), visible(containers, None))):
            held[row[0]].append(dict(zip(KEPT_COLUMNS, row, strict=True)))
        stats: dict[int, list[dict[str, Any]]] = {i: [] for i in chunk}
        t = tag_stats
        for db_id, name, lo, hi in conn.execute(select(t.c.database_id, t.c.field, t.c.min, t.c.max)
                                                .where(t.c.database_id.in_(chunk), visible(t, None))):
            stats[db_id].append({"field": name, "min": lo, "max": hi})
        conn.execute(insert(m), [_summary(heads[i], held[i], stats[i], dataset_id, version) for i in chunk])
    return {"summaries": len(wanted), "ended": ended, "fields": fields}


def _summary(head: dict[str, Any], held: list[dict[str, Any]], stats: list[dict[str, Any]], dataset_id: int,
             version: int) -> dict[str, Any]:
    """A database's summary row as a commit writes it: a container's version and time only where they are
    not the database's own (a later pass's containers)."""
    own = [{**c, "created_version": None if c["created_version"] == head["created_version"] else c["created_version"],
            "created": None if c["created"] == head["created"] else c["created"]} for c in held]
    return {
        "database_id": head["id"], "created_version": version, "deleted_version": None, "dataset_id": dataset_id,
        "first_entry": head["first_entry"], "n_events": head["n_events"], "database_version": head["created_version"],
        "program": head["program"], "bytes": sum(int(c["size"]) for c in held),
        "containers": summary_names(c["name"] for c in held), "record": record_text(own, stats),
        "container_ids": container_ids((c["id"], c["name"]) for c in held), "created": head["created"],
        "writer": head["writer"], "program_version": head["program_version"], "parameters": head["parameters"],
        "idempotency_key": head["idempotency_key"],
    }


def _coverage(conn: Connection, dataset_id: int, version: int, live: Any) -> int:
    """A coverage row at ``version`` for every field the dataset's visible statistics or its kept coverage
    name: the databases with a row of it, and the widest ``max - min`` of those rows (NULL when one has
    ``min > max``; unknown bounds widen nothing), as the triggers keep them. Returns the number of fields."""
    t, c = tag_stats, tag_coverage
    counts: dict[str, int] = {}
    widths: dict[str, float | None] = {}
    for name, lo, hi in conn.execute(select(t.c.field, t.c.min, t.c.max)
                                     .where(t.c.database_id.in_(live), visible(t, None))):
        counts[name] = counts.get(name, 0) + 1
        width = widths.setdefault(name, 0.0)
        if width is not None and lo is not None and hi is not None:
            widths[name] = None if lo > hi else max(width, float(hi) - float(lo))
    for (name,) in conn.execute(select(c.c.field).where(c.c.dataset_id == dataset_id).distinct()):
        counts.setdefault(name, 0)  # a field no database has a row of any more
    if counts:
        conn.execute(insert(c), [{"dataset_id": dataset_id, "field": name, "version": version, "n_databases": n,
                                  "width": widths.get(name, 0.0)} for name, n in sorted(counts.items())])
    return len(counts)
