"""Selections: tag queries over a snapshot, read through ``giod.read.projection``.

Reading a selection goes, per database:

1. skip the database when its per-database tag statistics show that no
   event can pass (``Expression.may_match``);
2. find the candidates of an expression over tags through the database's tag
   index, reading only the blocks of each field's sorted values that may
   match, and evaluate the expression on them (``giod.read.tagindex``); without a
   usable index, or when too much of it would match, read the tag columns
   whole and evaluate; an expression over objects (``count(Jet.pt > 30) >= 2``)
   is first narrowed by its tag-only terms, then evaluated on the events they
   left, reading only the object fields it names (and only the pages that
   hold those events);
3. read, from each container asked for, only the columns asked for and only
   the Arrow record batches (or Parquet pages) that hold selected events
   (whole clusters when the selection is dense; see docs/pages.md);
4. adapt old schema versions, convert to awkward, link relations.

Steps 1 and 2 are this module's; steps 3 and 4 are ``giod.read.projection``'s. Parallel
processing of a selection is ``giod.distributed.map_selection``, a layer above.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import numpy as np
import pyarrow as pa

from giod import config
from giod.catalog.records import ContainerRecord, DatabaseRecord
from giod.errors import DataError, GiodError, IntegrityError, TooLarge
from giod.expression import Expression, match_all, parse
from giod.read import datasetindex, output, tagindex
from giod.read.locate import locate, located
from giod.read.projection import (
    Projection,
    RangeReader,
    assemble,
    empty_table,
    gather,
    read_database,
    read_databases,
    resolve_columns,
    stored_containers,
)
from giod.schema import TAG_CONTAINER, Schema
from giod.tier.staging import StagePlan, may_stage, stage_databases

if TYPE_CHECKING:
    from giod.storage.container import ContainerReader
    from giod.store.snapshot import Snapshot


T = TypeVar("T")


class once(Generic[T]):
    """``functools.cached_property`` without its lock: Python 3.11's holds one lock for every instance of
    a class, so two selections planned at once (a server's threads, or a client and the server it asks in
    one process) would wait on each other. Two threads may both compute it; the value is the same."""

    def __init__(self, fn: Callable[[Any], T]):
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> once[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> T | once[T]:
        if obj is None:
            return self
        value: T = self.fn(obj)
        obj.__dict__[self.name] = value  # found there from now on: this descriptor is not asked again
        return value


#: selections' texts parsed, kept (per schema) for the next selection of the same text
PARSED = 1_024


def parse_selection(schema: Schema, text: str | None) -> Expression:
    """``text`` parsed over the tags and the collections of ``schema`` (every event when None).

    Empty or blank text is an ``ExpressionError``, as the parser says: it is a
    selection left unwritten, not a request for every event."""
    if text is None:
        return match_all()
    return _parsed(schema, text)


@functools.lru_cache(maxsize=PARSED)
def _parsed(schema: Schema, text: str) -> Expression:
    """``text`` parsed over ``schema``, kept for the next selection of the same text (an expression never
    changes; equal schemas parse it alike)."""
    fields = {name: f.dtype for name, f in schema.tags.items()}
    collections = {name: {f: d.type_string for f, d in schema.collection_type(name).fields.items()}
                   for name in schema.collections}
    counters = {c.counter: name for name, c in schema.collections.items() if c.counter}
    return parse(text, fields, collections, counters)


def select_local(dataset: Snapshot, db: DatabaseRecord, expression: Expression,
                 local: np.ndarray | None = None) -> np.ndarray | None:
    """The local entries of ``db`` (of ``local``; of all when None) that pass ``expression``;
    None when that is all of ``db``'s entries."""
    tags, objects = expression.split()
    if tags.fields:
        names = sorted(tags.fields)
        table = read_database(dataset, db, Projection({TAG_CONTAINER: names}, tuple(names)), local)[TAG_CONTAINER]
        passed = tags.evaluate({name: table.column(name) for name in names})
        # sized by what was read, never by the catalog's count before it is read (an edited count of 2^32
        # asked for 32 GiB here)
        local = np.flatnonzero(passed).astype(np.int64) if local is None else local[passed]
    elif not tags.evaluate({}, size=1)[0]:  # folded to false: the same answer for every event
        return np.zeros(0, dtype=np.int64)
    if objects.objects and (local is None or len(local)):
        local = _select_objects(dataset, db, objects, local)
    return None if local is None or len(local) == db.n_events else local


def _select_objects(dataset: Snapshot, db: DatabaseRecord, expression: Expression,
                    local: np.ndarray | None) -> np.ndarray:
    """The entries of ``local`` that pass an expression over objects, reading only what it names."""
    schema = dataset.schema
    columns = sorted(expression.fields)
    for collection, members in sorted(expression.objects.items()):
        if not members:  # only counted: any one column holds the list lengths
            tdef = schema.collection_type(collection)
            members = frozenset([next(iter([*tdef.fields, *tdef.relations]))])
        columns += [f"{collection}.{member}" for member in sorted(members)]
    proj = resolve_columns(schema, columns, {c.name for c in db.containers})
    tables = read_database(dataset, db, proj, local)
    tag = tables.pop(TAG_CONTAINER, None)
    tag_columns = {} if tag is None else {name: tag.column(name) for name in tag.column_names}
    names = tuple(expression.objects)
    events = assemble(schema, Projection({c: p for c, p in proj.columns.items() if c != TAG_CONTAINER}, names),
                      tables)
    everything = np.arange(db.n_events, dtype=np.int64) if local is None else local
    mask = expression.evaluate(tag_columns, objects={name: events[name] for name in names}, size=len(everything))
    return np.asarray(everything[mask])


#: candidate databases from which a selection over tags may go through the dataset's merged tag index:
#: always when it is in memory; when these tags were selected on before in this process (building it
#: costs about a scan of the tags, which one selection asking each database's own index does not); and
#: at once from MERGE_AT_ONCE candidates, where asking each database (1-30 ms) costs as much as the build
MERGE_FROM = 8
MERGE_AT_ONCE = 1_000
#: a selection of a served federation reads its events through the server, in one request for every
#: database, when it selects at most this share of the events of the databases it touches and none whole
AT_SOURCE_SHARE = 0.1


def plan_of_runs(dataset: Snapshot, runs: np.ndarray, what: str) -> list[tuple[DatabaseRecord, np.ndarray | None]]:
    """The plan (database, its selected local entries or None for all) of runs ``[start, stop)`` of entries.

    The runs come from elsewhere (a server): they must be sorted, disjoint, not empty and each within one
    database of ``dataset``; anything else is an IntegrityError naming ``what``."""
    runs = np.asarray(runs, dtype=np.int64).reshape(-1, 2)
    if not len(runs):
        return []
    starts, stops = runs[:, 0], runs[:, 1]
    if (stops <= starts).any() or (starts[1:] < stops[:-1]).any():
        raise IntegrityError(f"{what}: the selected runs are not sorted, disjoint and non-empty")
    dbs, at = locate(dataset, starts)
    if (at < 0).any():
        raise IntegrityError(f"{what}: a selected run starts at an entry no database holds")
    ends = np.array([dbs[i].stop_entry for i in range(len(dbs))], dtype=np.int64)
    if (stops > ends[at]).any():
        raise IntegrityError(f"{what}: a selected run goes past the end of its database")
    plan: list[tuple[DatabaseRecord, np.ndarray | None]] = []
    cuts = np.flatnonzero(np.diff(at)) + 1
    for part in np.split(np.arange(len(runs)), cuts):
        db = dbs[int(at[part[0]])]
        if len(part) == 1 and starts[part[0]] == db.first_entry and stops[part[0]] == db.stop_entry:
            plan.append((db, None))
            continue
        lengths = stops[part] - starts[part]
        local = np.repeat(starts[part] - np.cumsum(lengths) + lengths - db.first_entry, lengths)
        plan.append((db, local + np.arange(int(lengths.sum()), dtype=np.int64)))
    return plan


class Selection:
    """Events of a dataset snapshot that pass a selection over tags and objects."""

    def __init__(self, dataset: Snapshot, expression: str | None = None):
        if dataset.version is None:
            dataset = dataset.pinned()
        self.dataset = dataset
        self.version: int = dataset.version  # type: ignore[assignment]
        self.expression: Expression = parse_selection(dataset.schema, expression)
        self.text = expression
        self.staging: StagePlan | None = None  # the bulk stage request of its nearline files, once made

    def __repr__(self) -> str:
        return f"<giod.Selection {self.dataset.name} [{self.expression}] at version {self.version}>"

    @once
    def _databases(self) -> list[DatabaseRecord]:
        return self.dataset.databases()

    @once
    def _candidates(self) -> list[DatabaseRecord]:
        # the catalog prunes by the expression's ranges in SQL: records only for what is left
        box = self.expression.necessary_box()
        return self.dataset.databases(box) if box else self._databases

    def databases(self) -> list[DatabaseRecord]:
        """Databases that may hold selected events (tag statistics prune the rest)."""
        out = []
        for db in self._candidates:
            stats = {k: (None if v[0] != v[0] else v[0], None if v[1] != v[1] else v[1])
                     for k, v in db.tag_stats.items()}
            if self.expression.may_match(stats):
                out.append(db)
        return out

    def _mask(self, db: DatabaseRecord) -> np.ndarray | None:
        """Selected local entries of ``db`` (None means all of them)."""
        tag = db.container(TAG_CONTAINER)
        if self.expression.fields and tag is None:
            raise DataError(f"database {db.id} has no tag container: cannot evaluate {self.expression}")
        if tag is not None and self.expression.fields and not self.expression.objects:
            found = self._indexed(db, tag)
            if found is not None:
                return found
        return select_local(self.dataset, db, self.expression)

    def _indexed(self, db: DatabaseRecord, tag: ContainerRecord) -> np.ndarray | None:
        """Selected local entries of ``db`` through its tag index; None when it has none that serves."""
        rec = db.container(tagindex.TAG_INDEX)
        if rec is None or tag.schema_id != self.dataset.schema_id:
            return None  # written before the index existed, or tags under older names and types

        def read(reader: ContainerReader) -> np.ndarray | None:
            directory = tagindex.Directory.of(reader.arrow_schema)
            if (directory is None or not tagindex.same_file(directory.tag, tag.path)
                    or directory.checksum != tag.checksum or directory.events != db.n_events):
                return None  # a later pass replaced the tags: this index describes other values
            return tagindex.select(self.expression, directory,
                                   lambda blocks, columns: reader.read(columns, [int(b) for b in blocks]))

        try:
            return self.dataset.store.read_container(rec, read)
        except GiodError:
            return None  # no reachable, sound copy of the index: the tag container is the truth

    def _merged(self) -> list[tuple[DatabaseRecord, np.ndarray | None]] | None:
        """The plan through the dataset's merged tag index (``giod.read.datasetindex``); None when it does
        not serve: an expression over objects, not yet worth building (too few candidates, or the first
        selection on these tags in this process: see ``MERGE_FROM``), too large a share of the index
        matching, or a database it cannot index."""
        names = sorted(self.expression.fields)
        if not names or self.expression.objects:
            return None
        if not datasetindex.cached(self.dataset, names):
            candidates = len(self.databases())
            if candidates < MERGE_FROM:
                return None  # a few databases answer faster alone than every database's index merged
            again = datasetindex.asked_before(self.dataset, names)
            if candidates < MERGE_AT_ONCE and not again:
                return None  # the first selection on these tags: each database's own index answers it
        try:
            found = datasetindex.select(self.dataset, self.expression)
        except GiodError:
            return None  # the per-database path answers, or raises its own error
        if found is None:
            return None
        dbs, at, bounds = located(self.dataset, found)
        if len(at) and int(at.min()) < 0:
            raise IntegrityError(f"the tag index of {self.dataset.name} names entries no database holds")
        if not len(at):
            return []
        # entries come sorted: one run per database, numbered in it in one pass for all of them
        cuts = np.flatnonzero(np.diff(at)) + 1
        los, his = np.concatenate([[0], cuts]), np.concatenate([cuts, [len(at)]])
        which = at[los]
        local = found - bounds[at, 0]
        whole = (his - los == bounds[which, 1] - bounds[which, 0]).tolist()
        return [(dbs[w], None if every else local[lo:hi])
                for w, every, lo, hi in zip(which.tolist(), whole, los.tolist(), his.tolist(), strict=True)]

    def _at_source(self, columns: Sequence[str] | None = None, *, read: bool = False
                   ) -> tuple[list[tuple[DatabaseRecord, np.ndarray | None]], dict[str, pa.Table]] | None:
        """The plan (and with ``read`` the stored tables of ``columns``) as the federation's server made them
        where the data are: one request for every database. None when the catalog is not a server's."""
        if self.text is None:
            return None  # every event: the snapshot is the plan
        got = self.dataset.store.catalog.select_at_source(self.dataset.name, self.text, self.version,
                                                           columns=columns, read=read)
        if got is None:
            return None
        runs, tables = got
        return plan_of_runs(self.dataset, runs, f"selection {self.text!r} on {self.dataset.name}"), tables

    @once
    def _plan(self) -> list[tuple[DatabaseRecord, np.ndarray | None]]:
        try:
            source = self._at_source()
        except TooLarge:
            source = None  # more runs than the server sends at once: planned here, database by database
        if source is not None:
            return source[0]
        merged = self._merged()
        if merged is not None:
            return merged
        plan = []
        candidates = self.databases()
        self._stage(self._mask_containers())
        if self.expression.fields:  # the tags of every candidate, fetched ahead from remote sites
            names = sorted(self.expression.fields)
            # (an index reads only its footer and the blocks that match: nothing to fetch ahead; nor a file a
            # server is still staging)
            self.dataset.store.prefetch(
                [(c, names) for db in candidates
                 if (c := db.container(TAG_CONTAINER)) is not None and db.container(tagindex.TAG_INDEX) is None
                 and not self._on_the_way(c.path)])
        order = {db.id: i for i, db in enumerate(candidates)}
        for db in self._by_arrival(candidates, self._mask_containers()):  # what is on disk first
            sel = self._mask(db)
            if sel is None or len(sel):
                plan.append((db, sel))
        return sorted(plan, key=lambda item: order[item[0].id])

    def _mask_containers(self) -> set[str] | None:
        if self.expression.objects:
            return None
        return {TAG_CONTAINER, tagindex.TAG_INDEX} if self.expression.fields else set()

    def _stage(self, names: set[str] | None) -> None:
        """Stage on the way (``tape_bulk_staging``): what the job reads, in one request, before it reads."""
        store = self.dataset.store
        if self.staging is None and may_stage(store) and config.load(store.root)["tape_bulk_staging"]:
            self.staging = stage_databases(store, self.databases(), names, wait_remote=False)

    def _stage_for(self, columns: Sequence[str] | None) -> None:
        if self.staging is None and may_stage(self.dataset.store):
            self._stage(self._containers_for(columns))

    def _containers_for(self, columns: Sequence[str] | None) -> set[str] | None:
        """The containers reading ``columns`` of the selected events touches (None: every one)."""
        if self.expression.objects:
            return None
        try:  # the containers the columns live in, among those of the candidate databases
            stored = stored_containers(self.dataset.schema, self.databases() or self._databases[:1])
            names = set(resolve_columns(self.dataset.schema, columns, stored).columns)
        except GiodError:
            return None  # refused later, with the projection's own message
        return names | (self._mask_containers() or set())

    def stage(self, columns: Sequence[str] | None = None, *, pin_s: float | None = None,
              request: str | None = None) -> StagePlan:
        """Ask for every nearline file that reading ``columns`` needs in ONE request, planned by cartridge.

        Returns the plan: ``progress()`` (files on disk, estimate), ``release()``.
        Reading afterwards takes the databases already on disk first. ``pin_s``:
        how long the staged copies are kept (default: the library's).
        """
        self.staging = stage_databases(self.dataset.store, self.databases(), self._containers_for(columns),
                                       pin_s=pin_s, request=request, wait_remote=False)
        return self.staging

    def _on_the_way(self, path: str) -> bool:
        return self.staging is not None and self.staging.on_the_way(path)

    def _nearline(self) -> bool:
        """Whether some selected database has files on tape (they are read as they arrive)."""
        return self.staging is not None and not self.staging.empty

    def _by_arrival(self, dbs: list[DatabaseRecord], names: set[str] | None) -> Iterable[DatabaseRecord]:
        """``dbs`` as their files reach disk (each as a server's poll finds it staged), when any are on tape."""
        return dbs if self.staging is None else self.staging.arriving(dbs, lambda db: db, names)

    def __len__(self) -> int:
        if "_plan" not in self.__dict__:  # no plan made yet: a count may need none
            counted = self._counted()
            if counted is not None:
                return counted
        return sum(db.n_events if sel is None else len(sel) for db, sel in self._plan)

    def _counted(self) -> int | None:
        """The count of a cut on one tag through the dataset's merged index, already built or saved: the
        events of its blocks the cut selects whole counted, not read (``datasetindex.count``); None when it
        does not serve (the plan then counts)."""
        names = sorted(self.expression.fields)
        if len(names) != 1 or self.expression.objects or not datasetindex.cached(self.dataset, names):
            return None
        try:
            return datasetindex.count(self.dataset, self.expression)
        except GiodError:
            return None  # the plan answers, or raises its own error

    def plan(self) -> list[tuple[DatabaseRecord, np.ndarray | None]]:
        """Per database holding selected events, in entry order: its selected local entries (None: all)."""
        return list(self._plan)

    def runs(self) -> np.ndarray:
        """The selected entries as runs ``[start, stop)`` in order, none across databases: shape (n, 2)."""
        parts = []
        for db, sel in self._plan:
            if sel is None:
                parts.append(np.array([[db.first_entry, db.stop_entry]], dtype=np.int64))
            elif len(sel):
                e = np.asarray(sel, dtype=np.int64) + db.first_entry
                cut = np.flatnonzero(np.diff(e) != 1) + 1
                parts.append(np.stack([e[np.r_[0, cut]], e[np.r_[cut - 1, len(e) - 1]] + 1], axis=1))
        return np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)

    def entries(self) -> np.ndarray:
        """Entry numbers of the selected events, in order."""
        parts = [np.arange(db.first_entry, db.stop_entry) if sel is None else sel + db.first_entry
                 for db, sel in self._plan]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def _available(self) -> set[str]:
        return stored_containers(self.dataset.schema, [db for db, _ in self._plan] or self._databases[:1])

    def _prefetch(self, proj: Projection, gathered: set[str] | None = None) -> None:
        """Tell remote sites every container read ahead, in reading order (but those ``gathered`` already)."""
        items = []
        schema = self.dataset.schema
        whole = {c: set(paths) >= set(schema.arrow_schema(c).names) for c, paths in proj.columns.items()}
        gathered = gathered or set()
        for db, sel in self._plan:
            if not _dense(db, sel):
                continue  # page-level reads fetch just their pages, in parallel
            for container, paths in proj.columns.items():
                if container in gathered:
                    continue
                rec = db.container(container)
                if rec is not None and not self._on_the_way(rec.path):  # a file a server stages: read on arrival
                    # every column of a file: no need to read its footer first to plan the fetch
                    every = whole[container] and rec.schema_id == self.dataset.schema_id
                    items.append((rec, None if every else list(paths) or None))
        self.dataset.store.prefetch(items)

    def projection(self, columns: Sequence[str] | None = None) -> Projection:
        """Check ``columns`` against the schema and the stored containers."""
        return resolve_columns(self.dataset.schema, columns, self._available())

    def read(self, columns: Sequence[str] | None = None, *, library: str = "ak") -> Any:
        """The selected events with the given collections/fields/tags (all by default).

        ``library``: ``"ak"`` (an awkward Array), ``"pa"`` (a pyarrow Table) or ``"np"``
        (a dict of numpy arrays), as in uproot (``giod.read.output``).
        """
        output.check_library(library)
        self._stage_for(columns)
        proj = self.projection(columns)
        schema = self.dataset.schema
        source = self._read_at_source(proj, columns)
        if source is not None:
            return output.convert(assemble(schema, proj, source), schema, library)
        gathered = {} if self._nearline() else gather(self.dataset, self._plan, proj)
        self._prefetch(proj, set(gathered))
        if self.staging is None:
            tables = read_databases(self.dataset, self._plan, proj, gathered)
        else:  # nearline files: the databases already on disk first, the others as they arrive
            tables = {c: [t] if t is not None else [] for c, t in ((c, gathered.get(c)) for c in proj.columns)}
            rest = replace(proj, columns={c: p for c, p in proj.columns.items() if c not in gathered})
            sels = {db.id: sel for db, sel in self._plan}
            read = {db.id: read_database(self.dataset, db, rest, sels[db.id]) if rest.columns else {}
                    for db in self._by_arrival([db for db, _ in self._plan], set(rest.columns))}
            for db, _sel in self._plan:
                for container, table in read[db.id].items():
                    tables[container].append(table)
        # nothing selected (or nothing written yet): no events, but every field asked for
        return output.convert(assemble(schema, proj, {c: _concat(t) if t else empty_table(schema, c, proj.columns[c])
                                                      for c, t in tables.items()}), schema, library)

    def stored(self, columns: Sequence[str] | None = None) -> dict[str, pa.Table]:
        """The selected events' columns as stored, one table per container of the projection (what a
        server sends for a selection made at the source; :meth:`read` assembles them)."""
        proj = self.projection(columns)
        gathered = gather(self.dataset, self._plan, proj)
        self._prefetch(proj, set(gathered))
        tables = read_databases(self.dataset, self._plan, proj, gathered)
        schema = self.dataset.schema
        return {c: _concat(t) or empty_table(schema, c, proj.columns[c]) for c, t in tables.items()}

    def _read_at_source(self, proj: Projection, columns: Sequence[str] | None) -> dict[str, pa.Table | None] | None:
        """The stored tables of a sparse selection of a served federation, read by its server in one request;
        None when the selection is dense (the files are read in parallel then) or the catalog is local."""
        if (self.staging is not None and not self.staging.empty) or self.text is None \
                or not self.dataset.store.catalog.selects_at_source:
            return None
        plan = self._plan
        selected = sum(db.n_events if sel is None else len(sel) for db, sel in plan)
        touched = sum(db.n_events for db, _ in plan)
        if not selected or any(sel is None for _, sel in plan) or selected > AT_SOURCE_SHARE * touched:
            return None
        what = f"selection {self.text!r} on {self.dataset.name}"
        try:
            got = self._at_source(columns, read=True)
        except TooLarge:
            return None  # more than the server sends at once: the files are read instead
        if got is None:
            return None
        again, tables = got
        if [(db.id, None if s is None else s.tolist()) for db, s in again] != \
                [(db.id, None if s is None else s.tolist()) for db, s in plan]:
            raise IntegrityError(f"{what}: the server selected other events the second time")
        if set(tables) != set(proj.columns):
            raise IntegrityError(f"{what}: the server sent containers {sorted(tables)}, "
                                 f"not {sorted(proj.columns)}")
        out: dict[str, pa.Table | None] = {}
        schema = self.dataset.schema
        for container, table in tables.items():
            want = empty_table(schema, container, proj.columns[container]).schema
            if table.num_rows != selected:
                raise IntegrityError(f"{what}: the server sent {table.num_rows} rows of {container}, "
                                     f"not {selected}")
            if not table.schema.equals(want):
                try:
                    table = table.cast(want)
                except (pa.ArrowException, ValueError) as exc:
                    raise IntegrityError(f"{what}: the server sent {container} in other types: {exc}") from exc
            out[container] = table
        return out

    def iterate(self, columns: Sequence[str] | None = None, step_size: int | str = 100_000, *,
                library: str = "ak") -> Iterator[Any]:
        """The selection in chunks of at most ``step_size`` (never across databases).

        ``step_size``: a number of events, or a memory size (``"100 MB"``) as in uproot;
        ``library`` as for :meth:`read`. A run of consecutive entries is read by clusters, each decoded
        once however the chunks cut it (``giod.read.projection.RangeReader``); with a memory size the
        chunks end where a cluster ends when that keeps them at least half the size.
        """
        output.check_library(library)
        self._stage_for(columns)
        proj = self.projection(columns)
        aligned = isinstance(step_size, str)
        step_size = output.step_events(step_size, self.dataset, proj, self._plan)
        self._prefetch(proj)
        schema = self.dataset.schema
        for db, sel in self._plan:
            ranges = RangeReader(self.dataset, db, proj)
            if sel is None:
                cuts = _cluster_ends(db, proj) if aligned else None
                for start, stop in _steps(db.n_events, step_size, cuts):
                    yield output.convert(assemble(schema, proj, ranges.read(start, stop)), schema, library)
                continue
            for start in range(0, len(sel), step_size):
                part = sel[start : start + step_size]
                if int(part[-1]) - int(part[0]) + 1 == len(part):  # consecutive entries: a range
                    tables = ranges.read(int(part[0]), int(part[-1]) + 1)
                else:
                    tables = read_database(self.dataset, db, proj, part)
                yield output.convert(assemble(schema, proj, tables), schema, library)


def _cluster_ends(db: DatabaseRecord, proj: Projection) -> np.ndarray | None:
    """Where the clusters of ``db``'s largest container read by ``proj`` end (local entries); None if unknown."""
    recs = [rec for c in proj.columns if (rec := db.container(c)) is not None and rec.cluster_entries]
    if not recs:
        return None
    widest = max(recs, key=lambda rec: rec.size)
    return np.cumsum(np.asarray(widest.cluster_entries, dtype=np.int64))


def _steps(n: int, step: int, cuts: np.ndarray | None) -> Iterator[tuple[int, int]]:
    """``[0, n)`` in ranges of at most ``step`` entries; with ``cuts`` (sorted ends of clusters), each range
    ends at the last cut it reaches when that leaves it at least half of ``step``."""
    start = 0
    while start < n:
        stop = min(n, start + step)
        if cuts is not None and stop < n:
            i = int(np.searchsorted(cuts, stop, side="right")) - 1
            if i >= 0 and 2 * (int(cuts[i]) - start) >= step:
                stop = int(cuts[i])
        yield start, stop
        start = stop


def _dense(db: DatabaseRecord, sel: np.ndarray | None) -> bool:
    # past this share of its events a database is read whole (as read_database does)
    return sel is None or len(sel) == db.n_events


def _concat(tables: list[pa.Table]) -> pa.Table | None:
    """Concatenate without copying; tables that differ only in nullability are cast."""
    if not tables:
        return None
    first = tables[0].schema
    return pa.concat_tables([t if t.schema.equals(first) else t.cast(first) for t in tables])


