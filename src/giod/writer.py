"""Writers: buffer events, cut databases, write containers, commit.

The commit protocol (no locks between writers):

1. containers are written under temporary names on the site, one cluster
   (Parquet row group) at a time, with the checksum computed on the way out;
2. each file is fsync'ed and renamed to its final name, and its directory
   fsync'ed;
3. database, containers, replica and tag statistics are registered in ONE
   catalog transaction that bumps the federation version.

A crash before step 3 leaves files that no catalog row names (``giod fsck``
reports them, ``giod gc`` removes them); nothing becomes visible half-written.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import awkward as ak
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from giod import config
from giod.catalog.records import CommitResult, ContainerSpec, DatabaseCommit, DatabaseRecord
from giod.columns import as_events, containers_in, field_width, to_tables
from giod.errors import ConflictError, DataError
from giod.schema import TAG_CONTAINER, Schema
from giod.storage.container import ContainerWriter, WriteOptions, object_counts
from giod.storage.site import Site

if TYPE_CHECKING:
    from giod.federation import Dataset

DEFAULT_CLUSTER_BYTES = config.BY_NAME["cluster_bytes"].default


TAG_PAGE_SIZE = 1 << 20  # tags are read whole by selections: large pages


def _options_for(container: str, options: WriteOptions) -> WriteOptions:
    if container == TAG_CONTAINER:
        return dataclasses.replace(options, data_page_size=TAG_PAGE_SIZE)
    return options


def write_options(cfg: Mapping[str, Any]) -> WriteOptions:
    return WriteOptions(compression=cfg["compression"], compression_level=cfg["compression_level"],
                        byte_stream_split=cfg["byte_stream_split"], page_checksums=cfg["page_checksums"])


def writer_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def merge_stats(stats: dict[str, tuple[float, float]], table: pa.Table) -> None:
    """Widen per-field (min, max) with the values in ``table``."""
    for name in table.column_names:
        col = table.column(name)
        if len(col) == 0:
            continue
        mm = pc.min_max(col)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if lo is None or (isinstance(lo, float) and (np.isnan(lo) or np.isnan(hi))):
            stats[name] = (float("nan"), float("nan"))  # unknown: never prunes
            continue
        lo, hi = float(lo), float(hi)
        if name in stats:
            old = stats[name]
            if np.isnan(old[0]):
                continue
            lo, hi = min(lo, old[0]), max(hi, old[1])
        stats[name] = (lo, hi)


_POOL: ThreadPoolExecutor | None = None


def _each(fn: Callable[[str], Any], names: list[str]) -> list[Any]:
    """``fn`` over container names, in threads when there are several."""
    global _POOL
    if len(names) < 2:
        return [fn(n) for n in names]
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2),
                                   thread_name_prefix="giod-writer")
    return list(_POOL.map(fn, names))


def _forget_pool() -> None:
    global _POOL
    _POOL = None  # a forked child has none of its parent's threads


os.register_at_fork(after_in_child=_forget_pool)


class _ContainerBuffer:
    """Buffers one container's tables and writes a cluster when enough has come."""

    def __init__(self, writer: ContainerWriter, cluster_events: int | None, cluster_bytes: int):
        self.writer = writer
        self.cluster_events = cluster_events
        self.cluster_bytes = cluster_bytes
        self.tables: list[pa.Table] = []
        self.rows = 0
        self.nbytes = 0

    def add(self, table: pa.Table) -> None:
        self.tables.append(table)
        self.rows += table.num_rows
        self.nbytes += table.nbytes
        if self.cluster_events is not None:
            while self.rows >= self.cluster_events:
                self._write(self.cluster_events)
        elif self.nbytes >= self.cluster_bytes:
            self._write(self.rows)

    def _write(self, n: int) -> None:
        table = pa.concat_tables(self.tables)
        self.writer.write_cluster(table.slice(0, n))
        rest = table.slice(n)
        self.tables = [rest] if rest.num_rows else []
        self.rows = rest.num_rows
        self.nbytes = rest.nbytes if rest.num_rows else 0

    def finish(self) -> None:
        if self.rows:
            self._write(self.rows)


@dataclass
class _OpenDatabase:
    directory: str
    containers: tuple[str, ...]
    buffers: dict[str, _ContainerBuffer]
    n_events: int = 0
    nbytes: int = 0
    stats: dict[str, tuple[float, float]] = field(default_factory=dict)


class Writer:
    """Appends events to a dataset, committing one database at a time.

    Use as a context manager: leaving the block normally commits what is
    buffered; leaving it with an exception discards the uncommitted database.
    """

    def __init__(
        self,
        dataset: Dataset,
        *,
        site: str | None = None,
        database_events: int | None = None,
        database_bytes: int | None = None,
        cluster_events: int | None = None,
        cluster_bytes: int | None = None,
        options: WriteOptions | None = None,
        idempotency_key: str | None = None,
        program: str = "",
        program_version: str = "",
        parameters: Mapping[str, Any] | None = None,
        parents: Sequence[int] = (),
        name: str | None = None,
    ):
        cfg = config.load(dataset.federation.root, database_events=database_events,
                          database_bytes=database_bytes, cluster_bytes=cluster_bytes)
        database_events, database_bytes = cfg["database_events"], cfg["database_bytes"]
        cluster_bytes = cfg["cluster_bytes"]
        if database_events <= 0 or database_bytes <= 0:
            raise DataError("database_events and database_bytes must be positive")
        if cluster_events is not None and cluster_events <= 0:
            raise DataError("cluster_events must be positive")
        self.dataset = dataset
        self.schema: Schema = dataset.schema
        self.site: Site = dataset.federation.site(site)
        self.database_events = database_events
        self.database_bytes = database_bytes
        self.cluster_events = cluster_events
        self.cluster_bytes = cluster_bytes
        self.options = options or write_options(cfg)
        self.idempotency_key = idempotency_key
        self.program = program or "giod"
        self.program_version = program_version
        self.parameters = dict(parameters or {})
        self.parents = tuple(parents)
        self.name = name or writer_identity()
        self.commits: list[CommitResult] = []
        self._open: _OpenDatabase | None = None
        self._schema_id = dataset.schema_id
        self._closed = False

    # ------------------------------------------------------------------ API

    def append(self, events: Any) -> None:
        """Buffer events (awkward Array, list of dicts or dict of arrays)."""
        if self._closed:
            raise DataError("this writer is closed")
        arr = as_events(events, self.schema)
        if len(arr) == 0:
            return
        containers = tuple(containers_in(arr, self.schema))
        if not containers:
            raise DataError("the events carry no collection or tag of the schema")
        tables = to_tables(arr, self.schema, containers)
        start = 0
        n = len(arr)
        while start < n:
            db = self._database(containers)
            room = self.database_events - db.n_events
            take = min(room, n - start)
            part = {c: t.slice(start, take) for c, t in tables.items()}
            self._add(db, part, take)
            start += take
            if db.n_events >= self.database_events or db.nbytes >= self.database_bytes:
                self.flush()

    def flush(self) -> CommitResult | None:
        """Commit the buffered events as one database now."""
        db = self._open
        if db is None or db.n_events == 0:
            return None
        self._open = None
        try:
            def finish(name: str) -> ContainerSpec:
                buf = db.buffers[name]
                buf.finish()
                w = buf.writer.close()
                return ContainerSpec(name, w.path, w.checksum, w.size, w.cluster_entries, self._schema_id)

            written = _each(finish, list(db.buffers))
        except BaseException:
            for buf in db.buffers.values():
                buf.writer.abort()
            raise
        key = None
        if self.idempotency_key is not None:
            key = f"{self.idempotency_key}:{len(self.commits)}"
        commit = DatabaseCommit(
            dataset=self.dataset.name,
            n_events=db.n_events,
            site=self.site.name,
            containers=tuple(written),
            tag_stats=db.stats,
            writer=self.name,
            program=self.program,
            program_version=self.program_version,
            parameters=self.parameters,
            parents=self.parents,
            idempotency_key=key,
        )
        result = self.dataset.federation.catalog.commit_database(commit)
        if result.duplicate:
            # the same commit landed before (a retried DAQ write): drop our copy
            for spec in written:
                self.site.remove(spec.path)
        self.commits.append(result)
        return result

    def abort(self) -> None:
        """Discard what is buffered and not committed."""
        db, self._open = self._open, None
        if db is not None:
            for buf in db.buffers.values():
                buf.writer.abort()

    def close(self) -> list[CommitResult]:
        if not self._closed:
            self.flush()
            self._closed = True
        return self.commits

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
            self._closed = True

    # ------------------------------------------------------------- internals

    def _database(self, containers: tuple[str, ...]) -> _OpenDatabase:
        db = self._open
        if db is not None:
            if db.containers != containers:
                raise DataError(
                    f"events carry containers {', '.join(containers)} but this database was "
                    f"started with {', '.join(db.containers)}: one writer writes one set of containers"
                )
            return db
        directory = f"{self.dataset.name}/{uuid.uuid4().hex}"
        buffers = {}
        try:
            for c in containers:
                w = ContainerWriter(self.site, f"{directory}/{c}.parquet",
                                    self.schema.arrow_schema(c), _options_for(c, self.options))
                # tags are small: event-sized clusters would make tag queries read thousands of row groups
                per_cluster = None if c == TAG_CONTAINER else self.cluster_events
                buffers[c] = _ContainerBuffer(w, per_cluster, self.cluster_bytes)
        except BaseException:
            for b in buffers.values():
                b.writer.abort()
            raise
        self._open = _OpenDatabase(directory, containers, buffers)
        return self._open

    def _add(self, db: _OpenDatabase, tables: Mapping[str, pa.Table], n: int) -> None:
        # containers are independent files and pyarrow releases the GIL while it
        # encodes and compresses: write them side by side
        _each(lambda c: db.buffers[c].add(tables[c]), list(tables))
        for c, t in tables.items():
            db.nbytes += t.nbytes
            if c == TAG_CONTAINER:
                merge_stats(db.stats, t)
        db.n_events += n


@dataclass(frozen=True)
class PassOutput:
    """Containers written for one database by a later pass, ready to register."""

    database_id: int
    containers: tuple[ContainerSpec, ...]
    tag_stats: dict[str, tuple[float, float]]


def write_pass(
    dataset: Dataset,
    database: DatabaseRecord,
    events: Any,
    *,
    containers: Sequence[str] | None = None,
    replace: bool = False,
    site: str | None = None,
    options: WriteOptions | None = None,
    cluster_bytes: int = DEFAULT_CLUSTER_BYTES,
    program: str = "",
    program_version: str = "",
    parameters: Mapping[str, Any] | None = None,
) -> PassOutput:
    """Write new containers for an existing database (entries aligned), not yet registered."""
    schema = dataset.schema
    arr = as_events(events, schema)
    if len(arr) != database.n_events:
        raise DataError(
            f"database {database.id} has {database.n_events} events, the pass gave {len(arr)}"
        )
    present = containers_in(arr, schema)
    if containers is None:
        existing = {c.name for c in database.containers}
        wanted = [c for c in present if replace or c not in existing]
    else:
        wanted = list(containers)
        missing = sorted(set(wanted) - set(present))
        if missing:
            raise DataError(f"the events carry no data for container {missing[0]}")
    if not replace:
        clash = sorted({c.name for c in database.containers} & set(wanted))
        if clash:
            raise ConflictError(
                f"database {database.id} already has container {clash[0]}; use replace=True (--force)"
            )
    if not wanted and present:
        raise ConflictError(f"database {database.id} already has container {present[0]}; "
                            "use replace=True (--force)")
    if not wanted:
        raise DataError("the pass writes no new container")
    tables = to_tables(arr, schema, wanted, _stored_counts(dataset, database, arr, wanted))
    first = database.containers[0].path if database.containers else f"{dataset.name}/{uuid.uuid4().hex}/x"
    directory = first.rsplit("/", 1)[0]
    target = dataset.federation.site(site)
    if options is None:
        options = write_options(config.load(dataset.federation.root))
    specs: list[ContainerSpec] = []
    stats: dict[str, tuple[float, float]] = {}
    for c, table in tables.items():
        w = ContainerWriter(target, f"{directory}/{c}.{uuid.uuid4().hex[:8]}.parquet",
                            schema.arrow_schema(c), _options_for(c, options))
        try:
            buf = _ContainerBuffer(w, None, cluster_bytes)
            buf.add(table)
            buf.finish()
            out = w.close()
        except BaseException:
            w.abort()
            for s in specs:
                target.remove(s.path)
            raise
        specs.append(ContainerSpec(c, out.path, out.checksum, out.size, out.cluster_entries, dataset.schema_id,
                                   program=program, program_version=program_version,
                                   parameters=dict(parameters or {})))
        if c == TAG_CONTAINER:
            merge_stats(stats, table)
    return PassOutput(database.id, tuple(specs), stats)


def _stored_counts(dataset: Dataset, database: DatabaseRecord, events: ak.Array,
                   containers: Sequence[str]) -> dict[str, np.ndarray]:
    """Objects per event of relation targets that the pass does not carry itself."""
    from giod.selection import read_database, resolve_columns

    schema = dataset.schema
    have = set(ak.fields(events))
    targets: set[str] = {r.target for c in containers if c != TAG_CONTAINER for coll in schema.containers[c]
                         for r in schema.collection_type(coll).relations.values()} - have
    out: dict[str, np.ndarray] = {}
    for t in sorted(targets):
        # the pass has usually just read these containers (a reconstruction reads the raw hits): their counts
        # come from that read
        rec = database.container(schema.container_of(t))
        if rec is not None and rec.schema_id == dataset.schema_id:
            known = object_counts(rec.path, rec.size, t)
            if known is not None and len(known) == database.n_events:
                out[t] = known
    targets -= set(out)
    if not targets:
        return out
    # otherwise one leaf per collection is decoded, only for its list lengths: the narrowest is the cheapest
    cheapest = {t: _narrowest(schema, t) for t in targets}
    proj = resolve_columns(schema, [f"{t}.{f}" for t, f in cheapest.items()],
                           {c.name for c in database.containers})
    tables = read_database(dataset, database, proj, None)
    for t in targets:
        col = tables[schema.container_of(t)].column(t)
        out[t] = pc.list_value_length(col).to_numpy(zero_copy_only=False)
    return out


def _narrowest(schema: Schema, collection: str) -> str:
    """The field (or relation) of ``collection`` with the fewest bytes per object."""
    tdef = schema.collection_type(collection)
    if not tdef.fields:
        return next(iter(tdef.relations))
    return min(tdef.fields, key=lambda f: field_width(tdef.fields[f]))


class PassWriter:
    """Adds containers to existing databases; everything lands in one commit.

    ``with ds.extend(program="reco") as p: p.write(db, events)`` — or write in
    worker processes with :func:`write_pass` and hand the outputs to :meth:`add`.
    """

    def __init__(self, dataset: Dataset, *, replace: bool = False, site: str | None = None,
                 options: WriteOptions | None = None, program: str = "", program_version: str = "",
                 parameters: Mapping[str, Any] | None = None):
        self.dataset = dataset
        self.program = program
        self.program_version = program_version
        self.parameters = dict(parameters or {})
        self.replace = replace
        self.site = dataset.federation.site(site)
        self.options = options
        self.outputs: list[PassOutput] = []
        self.version: int | None = None

    def write(self, database: DatabaseRecord, events: Any, containers: Sequence[str] | None = None) -> PassOutput:
        out = write_pass(self.dataset, database, events, containers=containers, replace=self.replace,
                         site=self.site.name, options=self.options, program=self.program,
                         program_version=self.program_version, parameters=self.parameters)
        self.outputs.append(out)
        return out

    def add(self, output: PassOutput) -> None:
        self.outputs.append(output)

    def commit(self) -> int | None:
        if not self.outputs:
            return None
        items = [(o.database_id, tuple(self._provenance(c) for c in o.containers), o.tag_stats or None)
                 for o in self.outputs]
        self.version = self.dataset.federation.catalog.add_containers_bulk(
            items, self.site.name, replace=self.replace
        )
        self.outputs = []
        return self.version

    def _provenance(self, spec: ContainerSpec) -> ContainerSpec:
        """Containers written elsewhere (worker processes) get this pass's provenance."""
        if spec.program or not self.program:
            return spec
        return dataclasses.replace(spec, program=self.program, program_version=self.program_version,
                                   parameters=dict(self.parameters))

    def discard(self) -> None:
        for o in self.outputs:
            for spec in o.containers:
                self.site.remove(spec.path)
        self.outputs = []

    def __enter__(self) -> PassWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()
