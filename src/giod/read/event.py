"""One event by its entry number (``ds.event(i)``): a view of a block of events kept in the process.

Building one event through the general read path (``giod.read.projection``:
gather its rows, convert each container column to awkward, link the relations)
builds some sixty awkward layout nodes, and awkward's constructors cost tens of
microseconds each: 4-6 ms an event, paid again on every call however warm the
clusters were. Here the events of a *block* are built once through that same
path and kept; an event is then ``ak.Record(block, at)``, a view, in about ten
microseconds. A block is at most :data:`BLOCK_EVENTS` consecutive entries of
one database that lie in one cluster of every container read (so that it is
gathered from clusters read and kept anyway), aligned on multiples of
:data:`BLOCK_EVENTS` within that range, so that every entry maps to one block.
The first lookup into a cluster reads only its block's rows, block by block (a
cluster of ``hits`` of 100,000 events is 18 MB decoded: 8-20 ms, against 1-2 ms
for 64 rows); a lookup into another block of the same clusters decodes and keeps
them, as a point lookup's: in the kept clusters' probation segment, so that
lookups scattered over many databases replace one another, not the clusters that
selections read again (``clusters.Segmented``).
Blocks are kept beside the kept clusters (``clusters.keep_derived``, bounded by
``clusters.DERIVED_BYTES``), keyed by the files' paths and checksums, the
clusters, the rows and the schema and columns read: a pinned version's answer
never changes, and a file under its path and checksum never does.

Everything else is what the general path gives: the values (the same gather
and assembly, over more rows), the type, the fields, vector's behaviour. An
event is a view of its block: ``ak.to_packed(ev)`` gives a copy of its own
(awkward pickles a record with the array it is a view of). Parquet files and
containers of an older schema, and past the first lookup into a cluster reads
that are not served by kept clusters (remote files, columns with nulls or
strings, damaged clusters), and blocks whose assembly fails go through the
general path, one event at a time, as before.

Which database holds an entry is ``giod.read.locate``'s, and the read plan of
a database (its projection, the clusters' bounds) is kept per database record
(one per version): the warm path asks the catalog nothing but its version.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import awkward as ak
import numpy as np

from giod.catalog.records import ContainerRecord, DatabaseRecord
from giod.errors import GiodError, IntegrityError, NotFound
from giod.read import clusters
from giod.read.locate import database_of
from giod.read.output import behaviour, momentum_types, with_behaviour
from giod.read.projection import Projection, assemble, kept_pieces, read_entry_of, read_rows, resolve_columns
from giod.schema import Schema

if TYPE_CHECKING:
    from giod.store.snapshot import Snapshot

__all__ = ["BLOCK_EVENTS", "PLANS", "read_event"]

#: consecutive entries of a database built and kept together (the unit a cold ``ds.event`` builds)
BLOCK_EVENTS = 64
#: read plans kept (one per database record and columns read)
PLANS = 4_096


@dataclass(frozen=True)
class _Plan:
    """How the events of one database are read: the projection and, per container, its clusters' first entries."""

    schema: Schema
    proj: Projection
    containers: tuple[tuple[ContainerRecord, list[str], list[int]], ...]  # (record, columns, cluster starts)
    files: tuple[Any, ...]  # what names the bytes read: schema, columns, each file's path and checksum


_Kept = tuple["weakref.ref[DatabaseRecord]", _Plan | None]
_PLANS: OrderedDict[tuple[int, Any], _Kept] = OrderedDict()
_LOCK = threading.Lock()


def _columns_key(columns: Sequence[str] | None) -> Any:
    if columns is None or isinstance(columns, str):
        return columns
    try:
        return tuple(columns)
    except TypeError:
        return None


def _plan(schema: Schema, snapshot: Snapshot, db: DatabaseRecord, columns: Sequence[str] | None) -> _Plan | None:
    """The read plan of ``db``, kept per record (the same object for a version's calls); None when its
    containers cannot be served from kept clusters (not Arrow, no cluster list, an older schema)."""
    key = (id(db), _columns_key(columns))
    with _LOCK:
        kept = _PLANS.get(key)
        if kept is not None and kept[0]() is db and (kept[1] is None or kept[1].schema is schema):
            _PLANS.move_to_end(key)
            return kept[1]
    proj = resolve_columns(schema, columns, {c.name for c in db.containers})
    parts: list[tuple[ContainerRecord, list[str], list[int]]] = []
    plan: _Plan | None = None
    for name, paths in proj.columns.items():
        rec = db.container(name)
        if rec is None or rec.format != "arrow" or not rec.cluster_entries or rec.schema_id != snapshot.schema_id:
            break
        parts.append((rec, paths, [0, *np.cumsum(rec.cluster_entries, dtype=np.int64).tolist()]))
    else:
        if parts:  # nothing to read (no column asked): the general path says what that is
            files = (schema, snapshot.store.catalog.url, key[1], tuple((rec.path, rec.checksum) for rec, _, _ in parts))
            plan = _Plan(schema, proj, tuple(parts), files)
    with _LOCK:
        _PLANS[key] = (weakref.ref(db), plan)
        while len(_PLANS) > PLANS:
            _PLANS.popitem(last=False)
    return plan


def _block(plan: _Plan, local: int, n_events: int) -> tuple[tuple[Any, ...], int, int] | None:
    """The key, first and stop local entry of the block holding ``local``; None when a container's clusters
    do not hold it."""
    lo, hi = 0, n_events
    batches = []
    for _, _, starts in plan.containers:
        b = bisect.bisect_right(starts, local) - 1
        if b < 0 or b + 1 >= len(starts):
            return None
        batches.append(b)
        lo, hi = max(lo, starts[b]), min(hi, starts[b + 1])
    if not lo <= local < hi:
        return None
    first = lo + (local - lo) // BLOCK_EVENTS * BLOCK_EVENTS
    stop = min(hi, first + BLOCK_EVENTS)
    return ("event block", plan.files, tuple(batches), first, stop), first, stop


def _build(snapshot: Snapshot, db: DatabaseRecord, plan: _Plan, first: int, stop: int) -> tuple[Any, Any, int] | None:
    """The linked events ``first``..``stop - 1`` of a database (layout, behaviour, bytes), through the general
    path's gather (or, for the first lookup into a cluster, block-level read) and assembly; None when a
    container is not served by kept clusters, or a block among these rows is damaged."""
    rows = np.arange(first, stop, dtype=np.int64)
    tables = {}
    for rec, paths, _ in plan.containers:
        pieces = clusters.kept(snapshot.store.catalog.url, rec, paths, rows, lookup=True)
        if pieces is None and not clusters.touched(snapshot.store.catalog.url, rec, paths, rows):
            # the first lookup into these clusters: only the block's rows (the blocks of the file holding
            # them), not the clusters whole; the next lookup into them decodes and keeps them
            try:
                tables[rec.name] = read_rows(snapshot, db, rec.name, paths, rows)
            except IntegrityError:  # damage among the block's rows: the event alone says if it is its own
                return None
            continue
        if pieces is None:
            pieces = kept_pieces(snapshot, rec, paths, rows, lookup=True)  # enters probation
        if pieces is None:
            return None
        tables[rec.name] = clusters.gather(pieces)
    try:
        events = assemble(plan.schema, plan.proj, tables)
    except GiodError:  # a bad relation elsewhere in the block: the event alone, as before, says if it is its own
        return None
    return events.layout, behaviour(momentum_types(plan.schema, events)), int(events.nbytes)


def read_event(snapshot: Snapshot, entry: int, columns: Sequence[str] | None = None) -> ak.Record:
    """Event ``entry`` of ``snapshot`` (pinned at the current version first when it follows the catalog),
    relations navigable, with its schema's behaviours; NotFound when no database holds it."""
    snap = snapshot.pinned()
    db = database_of(snap, entry)
    if db is None:
        n = int(snap.store.catalog.dataset_summary(snap.name, snap.version)["n_events"])
        raise NotFound(f"dataset {snap.name} has no entry {entry} (entries 0..{n - 1})")
    schema = snap.schema
    plan = _plan(schema, snap, db, columns)
    local = entry - db.first_entry
    found = None if plan is None else _block(plan, local, db.n_events)
    if plan is not None and found is not None:
        key, first, stop = found
        built: Any = clusters.derived(key)
        if built is None:
            built = _build(snap, db, plan, first, stop)
            if built is not None:
                clusters.keep_derived(key, built, built[2])
        if built is not None:
            return ak.Record(ak.record.Record(built[0], local - first), behavior=built[1])
    return with_behaviour(read_entry_of(snap, db, entry, columns), schema)
