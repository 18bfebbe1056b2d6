"""Reading stored events: projection, column resolution, database reads and assembly.

The one read path below selections, passes and parallel tasks: a
:class:`Projection` names the container columns that a list of collection,
``collection.field``, tag and counter names needs (:func:`resolve_columns`);
:func:`read_database` reads them from one database (only some entries if
asked, from whichever replica answers, adapting containers written under an
older schema version); :func:`assemble` turns the container tables of the same
events into one awkward Array with its relations linked. ``giod.read.selection``
decides *which* events; this module only reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import awkward as ak
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from giod.catalog.records import ContainerRecord, DatabaseRecord
from giod.columns import column_content
from giod.errors import IntegrityError, NotFound
from giod.read import clusters
from giod.read.locate import database_of
from giod.read.objects import link
from giod.schema import TAG_CONTAINER, Schema
from giod.storage.numpyview import chunked_values
from giod.storage.parallel import map_reads

if TYPE_CHECKING:
    from giod.storage.container import ContainerReader
    from giod.store.snapshot import Snapshot

__all__ = ["Projection", "RangeReader", "assemble", "empty_table", "gather", "kept_pieces", "read_database",
           "read_databases", "read_entry", "read_entry_of", "read_rows", "resolve_columns", "stored_containers"]


#: rows of a database up to which its containers are read one after the other, not side by side
FEW_ROWS = 64


@dataclass(frozen=True)
class Projection:
    """Which Parquet columns to read from which container."""

    columns: dict[str, list[str]]  # container -> Parquet column paths
    names: tuple[str, ...]  # the top-level fields of the result, in order
    counters: dict[str, str] = field(default_factory=dict)  # counter -> its collection (nJet -> Jet)


def resolve_columns(schema: Schema, columns: Sequence[str] | None, available: set[str]) -> Projection:
    """Map collection, ``collection.field``, tag and counter (``nJet``) names to container columns.

    A counter that no tag shadows is the length of its collection's lists, read
    from one column of the collection (or from the collection when it is read).
    """
    if columns is None:
        names = [c for c in sorted(schema.collections) if schema.container_of(c) in available]
        if TAG_CONTAINER in available:
            names += list(schema.tags)
        columns = names
    if isinstance(columns, str):
        columns = [columns]
    out: dict[str, list[str]] = {}
    top: list[str] = []
    counters: dict[str, str] = {}
    named = {c.counter: name for name, c in schema.collections.items() if c.counter}  # a file's NJet
    for col in columns:
        head, _, field = col.partition(".")
        if not field and head not in schema.tags and head in named:
            counters[head] = named[head]
            if head not in top:
                top.append(head)
            continue
        if not field and head not in schema.tags and head not in schema.collections and \
                head[:1] == "n" and head[1:] in schema.collections:
            counters[head] = head[1:]
            if head not in top:
                top.append(head)
            continue
        if head in schema.tags and not field:
            container, path = TAG_CONTAINER, head
        elif head in schema.collections:
            container = schema.container_of(head)
            tdef = schema.collection_type(head)
            if field:
                if field not in tdef.fields and field not in tdef.relations:
                    raise NotFound(f"collection {head} has no field {field!r} "
                                   f"(it has {', '.join([*tdef.fields, *tdef.relations])})")
                path = f"{head}.list.element.{field}"
            else:
                path = head
        else:
            known = sorted([*schema.collections, *schema.tags])
            raise NotFound(f"no collection or tag {col!r} in the schema (known: {', '.join(known)})")
        if container not in available:
            raise NotFound(f"container {container!r} (holding {head}) is not in every database of this "
                           "selection; run the pass that writes it first")
        paths = out.setdefault(container, [])
        if path not in paths and not (field and head in paths):
            paths.append(path)
        if head not in top:
            top.append(head)
    for collection in counters.values():  # after the rest: a collection read anyway gives its lengths
        container = schema.container_of(collection)
        if container not in available:
            raise NotFound(f"container {container!r} (holding {collection}) is not in every database of this "
                           "selection; run the pass that writes it first")
        paths = out.setdefault(container, [])
        if not any(p == collection or p.startswith(f"{collection}.") for p in paths):
            tdef = schema.collection_type(collection)
            paths.append(f"{collection}.list.element.{next(iter([*tdef.fields, *tdef.relations]))}")
    return Projection(out, tuple(top), counters)


def stored_containers(schema: Schema, databases: Sequence[DatabaseRecord]) -> set[str]:
    """The containers every one of ``databases`` holds; every container of ``schema`` when there is
    no database yet (a dataset nothing was written to has the fields of its schema, and no event)."""
    if not databases:
        return set(schema.containers)
    return set.intersection(*({c.name for c in db.containers} for db in databases))


def read_database(
    dataset: Snapshot, db: DatabaseRecord, proj: Projection, local: np.ndarray | None
) -> dict[str, pa.Table]:
    """Read the projected columns of one database, only the entries ``local`` if given (the containers
    side by side, ``giod.storage.parallel``)."""
    # a few rows cost less to read than a thread pool costs to start
    threads = 1 if local is not None and len(local) <= FEW_ROWS else None
    tables = map_reads(lambda item: _read_container(dataset, db, item[0], item[1], local),
                       list(proj.columns.items()), threads)
    return dict(zip(proj.columns, tables, strict=True))


def read_databases(dataset: Snapshot, plan: Sequence[tuple[DatabaseRecord, np.ndarray | None]], proj: Projection,
                   gathered: dict[str, pa.Table] | None = None) -> dict[str, list[pa.Table]]:
    """The projected columns of each database of ``plan`` (only its entries ``local`` when not None), per
    container the tables in plan order (``gathered``: containers read already, :func:`gather`).

    The few entries of a database in a local Arrow container are not read there and then: the
    clusters holding them (kept decoded, ``giod.read.clusters``) are noted, and the entries of all the
    databases in a row are gathered at once, one numpy pass per buffer instead of one Arrow take
    per database. What a sparse read gathered so from kept rows is kept side by side
    (``clusters.keep_side_by_side``): a later read of those databases' rows, or of some of them, is one
    search and one gather per buffer, with no step per database."""
    tables: dict[str, list[pa.Table]] = {c: [] for c in proj.columns}
    for container, table in (gathered or {}).items():
        tables[container].append(table)
    rows = [local for _, local in plan]
    for container, paths in proj.columns.items():
        if gathered and container in gathered:
            continue
        recs = [db.container(container) for db, _ in plan]
        # the rows a read of the same databases kept side by side: one gather for all of them
        found = clusters.side_by_side(dataset.store.catalog.url, recs, rows, paths, dataset.schema_id)
        if found is not None:
            tables[container].append(found)
            continue
        out = tables[container]
        pending: list[clusters.Piece] = []
        for (db, local), rec in zip(plan, recs, strict=True):
            pieces = None
            if local is not None and rec is not None and len(local) < _events_in(rec):
                pieces = kept_pieces(dataset, rec, paths, local)
            if pieces is not None:
                pending.extend(pieces)
                continue
            if pending:
                out.append(clusters.gather(pending))
                pending = []
            out.append(_read_container(dataset, db, container, paths, local))
        if pending:
            out.append(clusters.gather(pending))
            if len(out) == 1:  # every database's rows from kept rows: kept side by side for the next read
                clusters.keep_side_by_side(dataset.store.catalog.url, recs, rows, paths, dataset.schema_id, out[0])
    return tables


def gather(dataset: Snapshot, plan: Sequence[tuple[DatabaseRecord, np.ndarray | None]], proj: Projection
           ) -> dict[str, pa.Table]:
    """The containers of a dense read whose files were gathered into one table each (``Store.gather``): every
    event of every database, whole columns, the files of the dataset's schema on one site near enough, in a
    format that gathers them. The others are read database by database (:func:`read_databases`)."""
    if len(plan) < 2 or any(local is not None and len(local) != db.n_events for db, local in plan):
        return {}
    out: dict[str, pa.Table] = {}
    for container, paths in proj.columns.items():
        recs = [db.container(container) for db, _ in plan]
        if any("." in p for p in paths) or any(r is None or r.schema_id != dataset.schema_id for r in recs):
            continue
        chosen = [r for r in recs if r is not None]
        table = dataset.store.gather(chosen, paths, dataset.schema.arrow_schema(container))
        if table is not None and table.num_rows == sum(db.n_events for db, _ in plan):
            out[container] = table
    return out


class RangeReader:
    """Consecutive ranges ``[start, stop)`` of one database's entries (``iterate``'s parts), read by clusters.

    Each range reads the clusters it overlaps whole, as a whole read does (no row list, no ``take``), and is
    their slices (zero-copy); a cluster that reaches past a range's end is kept, decoded, for the next
    range, so that every cluster is decoded once however the ranges cut it. Ranges must come in increasing
    order (a range before a kept cluster reads it again). Containers hold the same events side by side but
    may cut them into clusters differently: each container is cut by its own clusters.
    """

    def __init__(self, dataset: Snapshot, db: DatabaseRecord, proj: Projection):
        self.dataset = dataset
        self.db = db
        self.proj = proj
        self._kept: dict[str, dict[int, pa.Table]] = {c: {} for c in proj.columns}

    def read(self, start: int, stop: int) -> dict[str, pa.Table]:
        """The projected columns of entries ``start`` to ``stop`` (local, half-open) of the database."""
        if not 0 <= start < stop <= self.db.n_events:
            raise IntegrityError(f"database {self.db.id} holds {self.db.n_events} events, "
                                 f"not entries {start} to {stop}")
        tables = map_reads(lambda item: self._container(item[0], item[1], start, stop), list(self.proj.columns.items()))
        return dict(zip(self.proj.columns, tables, strict=True))

    def _container(self, container: str, paths: list[str], start: int, stop: int) -> pa.Table:
        rec = self.db.container(container)
        if rec is None:
            raise NotFound(f"database {self.db.id} has no container {container}")
        if start == 0 and stop == self.db.n_events:  # the whole database: a whole read
            return _read_container(self.dataset, self.db, container, paths, None)
        if not rec.cluster_entries or _events_in(rec) != self.db.n_events:
            # no clusters on record (or not the database's events: refused there): entry by entry
            return _read_container(self.dataset, self.db, container, paths, np.arange(start, stop, dtype=np.int64))
        bounds = np.concatenate([[0], np.cumsum(np.asarray(rec.cluster_entries, dtype=np.int64))])
        first = int(np.searchsorted(bounds, start, side="right")) - 1
        last = int(np.searchsorted(bounds, stop, side="left"))  # one past the last cluster overlapped
        kept = self._kept[container]
        for b in [b for b in kept if not first <= b < last]:
            del kept[b]  # behind this range (or a range asked out of order): not wanted again
        missing = [b for b in range(first, last) if b not in kept]
        if missing:
            table = _read_container(self.dataset, self.db, container, paths, None, missing)
            at = 0
            for b in missing:
                n = int(bounds[b + 1] - bounds[b])
                kept[b] = table.slice(at, n)
                at += n
        parts = []
        for b in range(first, last):
            lo, hi = max(start, int(bounds[b])) - int(bounds[b]), min(stop, int(bounds[b + 1])) - int(bounds[b])
            table = kept[b]
            parts.append(table if lo == 0 and hi == table.num_rows else table.slice(lo, hi - lo))
            if bounds[b + 1] <= stop:
                del kept[b]  # read to its end: no later range wants it
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def kept_pieces(dataset: Snapshot, rec: ContainerRecord, paths: list[str], local: np.ndarray, lookup: bool = False
                ) -> list[clusters.Piece] | None:
    """The kept clusters of ``rec`` (columns ``paths``) holding the sorted local entries ``local``, each with its
    rows, read and kept first if need be (``giod.read.clusters``); None when they cannot be kept (a remote or
    Parquet file, a column with nulls or strings, a container of an older schema, a damaged cluster): such
    reads go block by block. ``lookup``: a point lookup's use, which protects nothing it decodes or finds
    (``clusters.Segmented``)."""
    if rec.schema_id != dataset.schema_id:
        return None

    place = dataset.store.catalog.url

    def note(reader: ContainerReader) -> list[clusters.Piece] | None:
        return clusters.pieces(place, reader, rec, paths, local, lookup) if clusters.serves(reader, rec) else None

    found = clusters.kept(place, rec, paths, local, lookup)
    if found is None:
        try:
            found = dataset.store.read_container(rec, note)
        except IntegrityError:
            # a cluster damaged somewhere is not kept; the block-level read still gives the entries whose
            # blocks are sound, and refuses the others itself
            return None
    if found is None or sum(len(rows) for _, rows in found) != len(local):
        return None
    return found


def read_rows(dataset: Snapshot, db: DatabaseRecord, container: str, paths: list[str], local: np.ndarray
              ) -> pa.Table:
    """The columns ``paths`` of ``container`` of ``db`` at its sorted local entries ``local``, read block by block
    (the blocks of the file that hold them), not through kept clusters."""
    return _read_container(dataset, db, container, paths, local)


def _read_container(dataset: Snapshot, db: DatabaseRecord, container: str, paths: list[str],
                    local: np.ndarray | None, batches: Sequence[int] | None = None) -> pa.Table:
    """The columns ``paths`` of ``container`` of ``db``: its entries ``local`` (all when None), or with
    ``batches`` (and ``local`` None) those clusters whole, in order."""
    store = dataset.store
    rec = db.container(container)
    if rec is None:
        raise NotFound(f"database {db.id} has no container {container}")
    old = store.schema(rec.schema_id) if rec.schema_id != dataset.schema_id else None
    read_paths = paths if old is None else _old_paths(dataset.schema, old, paths)
    rows = None if local is None or len(local) == _events_in(rec) else np.asarray(local, dtype=np.int64)
    which = None if batches is None else list(batches)

    def read(reader: ContainerReader, read_paths: list[str] = read_paths, rows: np.ndarray | None = rows
             ) -> pa.Table:
        # block-level reads: only the blocks holding selected events (whole
        # batches when the selection is dense)
        return reader.read(read_paths, which) if rows is None else reader.read_rows(read_paths, rows)

    # another replica is read when this one fails, while opening or while reading
    table = store.read_container(rec, read)
    if which is not None:
        expected = int(sum(rec.cluster_entries[b] for b in which))
    else:
        expected = db.n_events if local is None else len(local)
    if table.num_rows != expected:  # the containers of a database hold its events, side by side
        raise IntegrityError(f"container {rec.path} of database {db.id} gave {table.num_rows} events, "
                             f"not {expected}: its clusters disagree with the database")
    if old is not None:
        tops = list(dict.fromkeys(p.split(".", 1)[0] for p in paths))
        table = _members(dataset.schema.adapt_table(table, container, old, columns=tops), paths)
    return table


def _events_in(container: ContainerRecord) -> int:
    return int(sum(container.cluster_entries))


def _old_paths(new: Schema, old: Schema, paths: Sequence[str]) -> list[str]:
    """Columns to read from a container written with an older schema.

    Whole collections are read (a member may be new, renamed or widened);
    tags are read under their old names; new tags are filled by adapt_table.
    """
    from giod.schema.adapt import source_name

    out: list[str] = []
    for p in paths:
        top = p.split(".", 1)[0]
        src = source_name(new, old, top)
        if src is not None and src not in out:
            out.append(src)
    return out


def _members(table: pa.Table, paths: Sequence[str]) -> pa.Table:
    """Keep only the struct members asked for (``coll.list.element.member`` paths)."""
    wanted: dict[str, list[str]] = {}
    for p in paths:
        parts = p.split(".")
        if len(parts) == 4:
            wanted.setdefault(parts[0], []).append(parts[3])
    for name, members in wanted.items():
        col = table.column(name).combine_chunks()
        struct = col.values
        children = [struct.field(m) for m in members]
        new_struct = pa.StructArray.from_arrays(children, fields=[struct.type.field(m) for m in members])
        item = pa.field(col.type.value_field.name, new_struct.type, nullable=False)
        lst = pa.ListArray.from_arrays(col.offsets, new_struct, type=pa.list_(item))
        table = table.set_column(table.column_names.index(name), pa.field(name, lst.type, nullable=False), lst)
    return table


def empty_table(schema: Schema, container: str, paths: Sequence[str]) -> pa.Table:
    """A table of no rows with the Parquet column ``paths`` of ``container``, typed by ``schema``."""
    tops = list(dict.fromkeys(p.split(".", 1)[0] for p in paths))
    return _members(schema.arrow_schema(container).empty_table().select(tops), paths)


def assemble(schema: Schema, proj: Projection, tables: dict[str, pa.Table | None]) -> ak.Array:
    """Container tables of the same events to one awkward Array, relations linked."""
    contents: dict[str, ak.contents.Content] = {}
    length = 0
    for table in tables.values():
        if table is None:
            continue
        length = table.num_rows
        for name in table.column_names:
            type_name = schema.collections[name].type if name in schema.collections else None
            contents[name] = column_content(table.column(name), type_name)
    for counter, collection in proj.counters.items():
        table = tables.get(schema.container_of(collection))
        if table is not None:
            lengths = chunked_values(pc.list_value_length(table.column(collection)))
            contents[counter] = ak.contents.NumpyArray(lengths.astype(np.int64))
    names = [n for n in proj.names if n in contents]
    if not names:
        return ak.Array(ak.contents.RecordArray([], [], length=0))
    layout = ak.contents.RecordArray([contents[n] for n in names], names, length=length)
    return link(ak.Array(layout), schema)


def read_entry(dataset: Snapshot, entry: int, columns: Sequence[str] | None = None) -> ak.Record:
    """One event by entry number, reading only the clusters that hold it (the general path, one event
    built alone; ``ds.event`` is ``giod.read.event``)."""
    db = database_of(dataset.pinned(), entry)
    if db is not None:
        return read_entry_of(dataset, db, entry, columns)
    n = int(dataset.store.catalog.dataset_summary(dataset.name, dataset.version)["n_events"])
    raise NotFound(f"dataset {dataset.name} has no entry {entry} (entries 0..{n - 1})")


def read_entry_of(dataset: Snapshot, db: DatabaseRecord, entry: int, columns: Sequence[str] | None = None
                  ) -> ak.Record:
    """Event ``entry`` of database ``db`` (which holds it) built alone through the general path."""
    proj = resolve_columns(dataset.schema, columns, {c.name for c in db.containers})
    tables = read_databases(dataset, [(db, np.array([entry - db.first_entry]))], proj)
    events = assemble(dataset.schema, proj, {c: t[0] for c, t in tables.items()})
    if len(events) != 1:  # a catalog whose database names none of the containers asked for
        raise IntegrityError(f"database {db.id} of dataset {dataset.name} holds entry {entry} in the catalog, "
                             f"but none of its containers ({', '.join(proj.columns) or 'none'}) does")
    return events[0]
