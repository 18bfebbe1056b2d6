"""Writers: buffer events, cut databases, write containers, commit.

The commit protocol (no locks between writers):

1. containers are written under temporary names on the site, one cluster
   (Parquet row group) at a time, with the checksum computed on the way out;
2. each file is fsync'ed and renamed to its final name; then each directory
   the renames touched is fsync'ed once (``giod.storage.pending.FolderSyncs``);
3. database, containers, replica and tag statistics are registered in ONE
   catalog transaction that bumps the federation version.

A crash before step 3 leaves files that no catalog row names (``giod fsck``
reports them, ``giod gc`` removes them); nothing becomes visible half-written.

Every database a writer writes lies in a folder named by the writer's own
random prefix, on which the writer holds a lease (``giod.catalog.leases``)
from before its first file until it is closed: gc and fsck leave those files
alone, however long the writer takes between two events. A writer that
crashed stops renewing its lease, which expires one term (``lease_seconds``)
later. Each file's footer records what the catalog needs to register it
again should the catalog lose the commit (``giod recover``).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from giod.catalog.leases import Lease, hold_lease
from giod.catalog.records import CommitResult, ContainerSpec, DatabaseCommit
from giod.columns import as_events, containers_in, to_tables
from giod.errors import ConfigError, DataError, deprecated
from giod.read import tagindex
from giod.schema import TAG_CONTAINER, Schema
from giod.storage.container import SUFFIX, ContainerWriter, WriteOptions
from giod.storage.pending import FolderSyncs
from giod.storage.site import Site
from giod.store.tagstats import merge_stats
from giod.write.clusters import ContainerBuffer, commit_record, recordable, seen_version
from giod.write.passwriter import PassOutput, PassWriter, write_pass  # noqa: F401 - re-exported
from giod.write.writeoptions import (  # noqa: F401 - DEFAULT_CLUSTER_BYTES, TAG_PAGE_SIZE: re-exported
    DEFAULT_CLUSTER_BYTES,
    TAG_PAGE_SIZE,
    encoding,
    options_for,
)

if TYPE_CHECKING:
    from giod.store.snapshot import Snapshot


def writer_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


_POOL: ThreadPoolExecutor | None = None
#: uncompressed bytes below which events are added to a writer's containers one after the other: handing
#: small tables to threads cost more than it saved (docs/decisions.md)
PARALLEL_BYTES = 1 << 20
#: threads that write a writer's containers: one per container of a usual model (raw.calo, raw.tracker, reco,
#: tag) even on 2 cores, as they wait on the disk (page cache, write-back, fsync) as much as they compress:
#: 100,000 events of the synthetic model in 3.3 s against 4.3 s with 2 (docs/decisions.md)
POOL_THREADS = max(4, min(8, os.cpu_count() or 2))


def _each(fn: Callable[[str], Any], names: list[str], parallel: bool = True) -> list[Any]:
    """``fn`` over container names, side by side when there are several and ``parallel``: the first in the
    calling thread, the others in the writers' pool.

    Every call has ended when it returns or raises: a caller that gives the files up after an error does
    not do so while another thread still writes one of them. The error raised is the first name's whose
    call failed, as the calls are listed.
    """
    if len(names) < 2 or not parallel:
        return [fn(n) for n in names]
    # the caller does a share rather than wait idle: a hand-off to a thread (its wake-up, the lock passed
    # back and forth) costs about as much CPU as a small file's close, and one fewer is paid each commit
    futures = [_submit(fn, n) for n in names[1:]]
    try:
        first = fn(names[0])
    finally:
        wait(futures)
    return [first, *(f.result() for f in futures)]


def _submit(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """``fn(*args)`` in the writers' pool."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=POOL_THREADS, thread_name_prefix="giod-writer")
    return _POOL.submit(fn, *args)


def _forget_pool() -> None:
    global _POOL
    _POOL = None  # a forked child has none of its parent's threads


os.register_at_fork(after_in_child=_forget_pool)


@dataclass
class _OpenDatabase:
    directory: str
    containers: tuple[str, ...]
    buffers: dict[str, ContainerBuffer]
    n_events: int = 0
    nbytes: int = 0
    stats: dict[str, tuple[float, float]] = field(default_factory=dict)
    tags: list[pa.Table] = field(default_factory=list)  # kept until commit, to build the tag index
    footer: dict[str, Any] = field(default_factory=dict)  # the commit record every container's footer holds
    key: str | None = None  # the idempotency key of its commit, recorded in the footer too


class Writer:
    """Appends events to a dataset, committing one database at a time (``ds.writer()``).

    The keywords are the write settings of docs/storage.md (``database_events``,
    ``compression``, ...) and the writer's own. With an ``idempotency_key``,
    database *n* of the writer commits under ``<key>:<n>``; with ``key_from``
    too, under ``<key>:<first event>``, the position of its first event in the
    stream of events, counted from ``key_from``: a re-run that starts at another
    event of the same stream names each database by the events it holds (an
    import resumed, ``giod.interchange``). Use as a context manager:
    leaving the block normally commits what is buffered; leaving it with an
    exception discards the uncommitted database.
    """

    def __init__(
        self,
        dataset: Snapshot,
        *,
        site: str | None = None,
        database_events: int | None = None,
        database_bytes: int | None = None,
        cluster_events: int | None = None,
        cluster_bytes: int | None = None,
        compression: str | None = None,
        compression_level: int | None = None,
        min_savings: float | None = None,
        byte_stream_split: bool | None = None,
        page_checksums: bool | None = None,
        options: WriteOptions | None = None,
        container_format: str | None = None,
        idempotency_key: str | None = None,
        key_from: int | None = None,
        program: str = "",
        program_version: str = "",
        parameters: Mapping[str, Any] | None = None,
        parents: Sequence[int] = (),
        name: str | None = None,
    ):
        chosen, cfg = encoding(dataset.store.root, dataset.record, options, container_format=container_format,
                               compression=compression, compression_level=compression_level,
                               min_savings=min_savings, byte_stream_split=byte_stream_split,
                               page_checksums=page_checksums,
                               database_events=database_events, database_bytes=database_bytes,
                               cluster_bytes=cluster_bytes)
        database_events, database_bytes = cfg["database_events"], cfg["database_bytes"]
        cluster_bytes = cfg["cluster_bytes"]
        if database_events <= 0 or database_bytes <= 0:
            raise DataError("database_events and database_bytes must be positive")
        if not cfg["lease_seconds"] > 0:
            raise DataError("lease_seconds must be positive")
        if cluster_events is not None and cluster_events <= 0:
            raise DataError("cluster_events must be positive")
        self.dataset = dataset
        self.schema: Schema = dataset.schema
        self.site: Site = dataset.store.site(site)
        self.database_events = database_events
        self.database_bytes = database_bytes
        self.cluster_events = cluster_events
        self.cluster_bytes = cluster_bytes
        self.options = chosen
        self.idempotency_key = idempotency_key
        if key_from is not None and (idempotency_key is None or key_from < 0):
            raise ConfigError("key_from needs an idempotency_key and is a position from 0 on")
        self.key_from = key_from
        self._events_committed = 0  # events of the databases committed so far, duplicates included
        self.program = program or "giod"
        self.program_version = program_version
        self.parameters = recordable(parameters)
        self.parents = tuple(parents)
        self.name = name or writer_identity()
        self.lease_seconds = float(cfg["lease_seconds"])
        self.commits: list[CommitResult] = []
        # the folders of this writer's databases: <dataset>/<prefix><number>, one lease covers them all
        self._prefix = f"{dataset.name}/{uuid.uuid4().hex[:26]}"
        self._databases = 0
        self._lease: Lease | None = None
        self._open: _OpenDatabase | None = None
        self._schema_id = dataset.schema_id
        self._closed = False
        self._closing = False

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
        folders = FolderSyncs()
        try:
            def finish(name: str) -> list[ContainerSpec]:
                buf = db.buffers[name]
                buf.finish()
                w = buf.writer.close(folders)
                spec = ContainerSpec(name, w.path, w.checksum, w.size, w.cluster_entries, self._schema_id,
                                     format=w.format, cluster_checksums=w.cluster_checksums)
                index = self._tag_index(db, spec, folders) if name == TAG_CONTAINER else None
                return [spec] if index is None else [spec, index]

            # in threads however small: each waits for its file's fsync
            written = [spec for specs in _each(finish, list(db.buffers)) for spec in specs]
            # every file is durable and renamed: one fsync per folder makes the renames durable before the
            # catalog names the files (FolderSyncs says why that is as safe as a fsync after each rename)
            folders.sync()
            if self._lease is not None:
                self._lease.confirm()  # the files stay safe from gc for the commit
        except BaseException:
            for buf in db.buffers.values():
                buf.settle()
                buf.writer.abort()
            if self._lease is not None and self._lease.lost:  # what gc left of them is no use to anyone
                for buf in db.buffers.values():
                    self.site.remove(buf.writer.path)
            raise
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
            idempotency_key=db.key,
        )
        last = self._lease if self._closing else None
        idle = self.dataset.store.idle_leases
        # the last commit leaves a fresh lease to the process's next writer (its prefix then holds registered
        # files only), or releases it in its own transaction
        hand_on = last is not None and last.fresh() and idle.room(self._idle_key())
        release = last.record.id if last is not None and not hand_on else None
        result = self.dataset.store.catalog.commit_database(commit, release_lease=release)
        if last is not None:
            if not hand_on:
                last.released_by_commit()
            elif idle.keep(self._idle_key(), last, self._prefix, self._databases):
                self._lease = None
        self._events_committed += db.n_events
        if result.duplicate:
            # the same commit landed before (a retried DAQ write): drop our copy
            for spec in written:
                self.site.remove(spec.path)
        self.commits.append(result)
        return result

    def commit(self) -> list[CommitResult]:
        """Commit what is buffered and finish: the writer takes no more events.

        Returns the commits of every database this writer wrote. Leaving a ``with``
        block normally calls it; calling it again returns the same list.
        """
        if not self._closed:
            self._closing = True
            try:
                self.flush()
                lease = self._lease  # still held when the last database was committed before (cut by size)
                if lease is not None and self.dataset.store.idle_leases.keep(self._idle_key(), lease, self._prefix,
                                                                             self._databases):
                    self._lease = None
            finally:
                self._release()  # a failed commit's files are gc's to judge from now on
            self._closed = True
        return self.commits

    def abort(self) -> None:
        """Discard what is buffered and not committed, and finish; databases already committed stay.

        Leaving a ``with`` block by an exception calls it.
        """
        db, self._open = self._open, None
        if db is not None:
            for buf in db.buffers.values():
                buf.settle()  # a cluster still being written finishes before its file goes
                buf.writer.abort()
        self._release()
        self._closed = True

    def close(self) -> list[CommitResult]:
        """Deprecated name of :meth:`commit`."""
        deprecated("Writer.close()", "Writer.commit()")
        return self.commit()

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    # ------------------------------------------------------------- internals

    def _idle_key(self) -> tuple[str, str, str, float]:
        """What a lease left idle by a writer must match to be handed to this one (``IdleLeases``)."""
        return (self.dataset.name, self.site.name, self.name, self.lease_seconds)

    def _release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()

    def _next_key(self) -> str | None:
        """The idempotency key of the database opened next (see the class's docstring)."""
        if self.idempotency_key is None:
            return None
        if self.key_from is None:
            return f"{self.idempotency_key}:{len(self.commits)}"
        return f"{self.idempotency_key}:{self.key_from + self._events_committed}"

    def _footer(self, key: str | None, containers: Sequence[str]) -> dict[str, Any]:
        """What a catalog that lost this commit needs to register it again (``giod recover``), and the
        containers it must find for that: a database some of whose files never reached their names is not
        one."""
        return {
            "dataset": self.dataset.name, "schema": self.schema.fingerprint, "writer": self.name,
            "containers": sorted(containers),
            "program": self.program, "program_version": self.program_version, "parameters": self.parameters,
            "parents": list(self.parents), "idempotency_key": key,
            "seen_version": seen_version(self.dataset.store.catalog),
        }

    def _tag_index(self, db: _OpenDatabase, tag: ContainerSpec, folders: FolderSyncs) -> ContainerSpec | None:
        """Write the tag index of ``db`` beside its tag container ``tag`` (``giod.read.tagindex``)."""
        tables, db.tags = db.tags, []
        if not tables or not tagindex.worth_writing(db.n_events):
            return None
        out = tagindex.write(self.site, f"{db.directory}/{tagindex.TAG_INDEX}{SUFFIX['arrow']}",
                             pa.concat_tables(tables), tag.path, tag.checksum, self.options,
                             commit_record(db.footer, tagindex.TAG_INDEX), folders)
        if out is None:
            return None
        return ContainerSpec(tagindex.TAG_INDEX, out.path, out.checksum, out.size, out.cluster_entries,
                             self._schema_id, format=out.format, cluster_checksums=out.cluster_checksums)

    def _database(self, containers: tuple[str, ...]) -> _OpenDatabase:
        db = self._open
        if db is not None:
            if db.containers != containers:
                raise DataError(
                    f"events carry containers {', '.join(containers)} but this database was "
                    f"started with {', '.join(db.containers)}: one writer writes one set of containers"
                )
            return db
        if self._lease is None:
            handed = self.dataset.store.idle_leases.take(self._idle_key()) if self._databases == 0 else None
            if handed is not None:  # the lease of the process's last writer: no catalog transaction
                self._lease, self._prefix, self._databases = handed
            else:
                self._lease = hold_lease(self.dataset.store.catalog, self.site.name, self._prefix, self.name,
                                         self.lease_seconds)
        directory = f"{self._prefix}{self._databases:06x}"
        self._databases += 1
        key = self._next_key()
        footer = self._footer(key, containers)
        buffers = {}
        try:
            for c in containers:
                w = ContainerWriter(self.site, f"{directory}/{c}{SUFFIX[self.options.container_format]}",
                                    self.schema.arrow_schema(c), options_for(c, self.options),
                                    commit_record(footer, c))
                # tags are small: event-sized clusters would make tag queries read thousands of row groups
                per_cluster = None if c == TAG_CONTAINER else self.cluster_events
                buffers[c] = ContainerBuffer(w, per_cluster, self.cluster_bytes)
        except BaseException:
            for b in buffers.values():
                b.writer.abort()
            raise
        self._open = _OpenDatabase(directory, containers, buffers, footer=footer, key=key)
        return self._open

    def _add(self, db: _OpenDatabase, tables: Mapping[str, pa.Table], n: int) -> None:
        # containers are independent files and pyarrow releases the GIL while it encodes and compresses: their
        # clusters are written side by side in the pool, and while the next events are appended; each container
        # waits only for its own previous cluster (ContainerBuffer), so that a slow one (the compressed reco)
        # holds back neither the others nor the caller
        nbytes = sum(t.nbytes for t in tables.values())  # each table's a sum over its buffers: asked once
        submit = _submit if nbytes >= PARALLEL_BYTES else None
        for c, t in tables.items():
            db.buffers[c].add(t, submit)
        db.nbytes += nbytes
        for c, t in tables.items():
            if c == TAG_CONTAINER:
                merge_stats(db.stats, t)
                db.tags.append(t)
        db.n_events += n
