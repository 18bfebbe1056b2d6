"""What a job's tasks are and what a worker does with one: the plan, the read, the timings.

A task carries how to reach the federation, the dataset, the pinned
version, its database's record and entry range; a worker keeps its
federation open between tasks and reads the replica at its own site first.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import awkward as ak
import numpy as np

from giod import config
from giod.catalog.records import DatabaseRecord
from giod.errors import ConfigError
from giod.read.output import with_behaviour
from giod.read.projection import assemble, read_database, resolve_columns, stored_containers
from giod.read.selection import parse_selection, select_local
from giod.schema import TAG_CONTAINER

if TYPE_CHECKING:
    from giod.expression import Expression
    from giod.federation import Dataset, Federation
    from giod.read.projection import Projection
    from giod.read.selection import Selection
    from giod.schema import Schema
    from giod.store.snapshot import Snapshot, Store


#: Dask worker resources named ``site-<name>`` declare the site too.
SITE_RESOURCE = "site-"
#: A database is split into partitions of about this many bytes (of the containers read).
DEFAULT_PARTITION_BYTES = 256_000_000

Progress = Callable[[int, int], None]  # (partitions done, partitions in all)


# ---------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Target:
    """What a worker passes to ``giod.open`` to reach the client's federation."""

    url: str
    token: str | None = None
    verify: bool | str = True

    @classmethod
    def of(cls, store: Store) -> Target:
        """How to reach the federation whose store is ``store``."""
        if store.root is not None:
            return cls(str(store.root))
        token, verify = store.catalog.credentials()  # a giod server's token and TLS setting
        return cls(store.catalog.url, token, verify)

    def __repr__(self) -> str:  # never print the token
        return f"Target({self.url!r})"


@dataclass(frozen=True)
class Job:
    """What every task of one job shares."""

    target: Target
    dataset: str
    version: int
    expression: str  # selection text ("true": every event)
    columns: tuple[str, ...]  # collections, ``collection.field`` and tags to read


@dataclass(frozen=True)
class Partition:
    """One task: the local entries ``[start, stop)`` of one database of the snapshot."""

    index: int  # position in the reduction order
    database: DatabaseRecord
    start: int
    stop: int
    bytes: int  # of the containers read, pro rata of the entries
    sites: tuple[str, ...]  # sites holding a good replica of every container read

    @property
    def entries(self) -> int:
        return self.stop - self.start


def _containers_read(proj: Projection, expression: Expression, schema: Schema) -> list[str]:
    names = list(proj.columns)
    wanted = ([TAG_CONTAINER] if expression.fields else []) + [schema.container_of(c) for c in expression.objects]
    names += [c for c in dict.fromkeys(wanted) if c not in names]
    return names


def plan(sel: Selection, columns: Sequence[str] | None, *, partition_events: int | None = None,
         partition_bytes: int = DEFAULT_PARTITION_BYTES) -> tuple[Job, list[Partition]]:
    """Split a selection into partitions, using the catalog only (no file is opened).

    Databases whose tag statistics exclude every event are left out. A
    database is split into ranges of ``partition_events`` entries, or, by
    default, into as many equal ranges as make each read at most about
    ``partition_bytes``.
    """
    if partition_events is not None and partition_events <= 0:
        raise ConfigError(f"partition_events must be positive, got {partition_events}")
    ds = sel.dataset
    store = ds.store
    databases = sel.databases()
    available = stored_containers(ds.schema, databases or ds.databases()[:1])
    proj = resolve_columns(ds.schema, columns, available)
    if columns is None:  # the workers read exactly what the client resolved
        columns = list(proj.names)
    elif isinstance(columns, str):
        columns = [columns]
    job = Job(Target.of(store), ds.name, int(sel.version), sel.expression.text, tuple(columns))
    names = _containers_read(proj, sel.expression, ds.schema)
    site_names = {s.id: s.name for s in store.sites()}
    parts: list[Partition] = []
    for db in databases:
        recs = [db.container(c) for c in names]
        held = [set(r.site_ids) for r in recs if r is not None]
        common = set.intersection(*held) if held else set()
        sites = tuple(sorted(site_names[i] for i in common if i in site_names))
        size = sum(r.size for r in recs if r is not None)
        if partition_events is not None:
            n = math.ceil(db.n_events / partition_events)
        else:
            n = max(1, math.ceil(size / partition_bytes))
        n = max(1, min(n, db.n_events))
        bounds = np.linspace(0, db.n_events, n + 1).round().astype(np.int64)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            if b > a:
                share = (b - a) / db.n_events if db.n_events else 0.0
                parts.append(Partition(len(parts), db, int(a), int(b), int(size * share), sites))
    return job, parts


# ---------------------------------------------------------------- the task


@dataclass
class TaskStats:
    """What one task measured, in the worker."""

    partition: int
    database: int
    entries: int  # entries of the range
    events: int  # selected events passed to the function
    bytes: int  # of the containers read (estimate, pro rata)
    catalog_s: float  # opening the federation and looking up the dataset (cached per worker)
    read_s: float  # selecting and reading
    user_s: float  # the user's function
    cpu_s: float  # CPU time of the worker process during the task (its library threads too)
    start: float  # wall clock (time.time) at start and end
    stop: float
    worker: str
    site: str | None  # where the worker is
    declared: bool  # the worker declared its site (else: assumed the nearest site)
    local: bool  # the worker's site holds a replica of what the task read
    read_sites: tuple[str, ...] = ()  # the sites whose replicas answered the task's reads

    @property
    def wall_s(self) -> float:
        return self.stop - self.start


EMPTY = object()  # a partition with no selected event: it adds nothing
_cache = threading.local()
# per open federation (or its store), forgotten with it
_DATASETS: weakref.WeakKeyDictionary[Federation, dict[tuple[str, int], Dataset]] = weakref.WeakKeyDictionary()
_SNAPSHOTS: weakref.WeakKeyDictionary[Store, dict[tuple[str, int], Snapshot]] = weakref.WeakKeyDictionary()
_NEAREST: weakref.WeakKeyDictionary[Store, str | None] = weakref.WeakKeyDictionary()


def worker_federation(target: Target) -> Federation:
    """The federation ``target``, opened once per worker process and thread and kept for later tasks."""
    import giod

    opened: dict[Target, Federation] = getattr(_cache, "feds", None) or {}
    _cache.feds = opened
    fed = opened.get(target)
    if fed is None:
        fed = giod.open(target.url, create=False, token=target.token, verify=target.verify)
        fed.store.reads.here = _declared()[1]
        opened[target] = fed
    return fed


def worker_dataset(fed: Federation, name: str, version: int) -> Dataset:
    """Dataset ``name`` at ``version`` of a worker's federation, its schema parsed once per federation."""
    found = _DATASETS.setdefault(fed, {})
    ds = found.get((name, version))
    if ds is None:
        ds = found[(name, version)] = fed.dataset(name, version)
        ds.schema  # noqa: B018 - parsed once here, counted as catalog time
    return ds


def worker_snapshot(store: Store, name: str, version: int) -> Snapshot:
    """Dataset ``name`` at ``version`` of a worker's store, as the read path takes it; kept per store."""
    found = _SNAPSHOTS.setdefault(store, {})
    snap = found.get((name, version))
    if snap is None:
        snap = found[(name, version)] = store.dataset(name, version)
        snap.schema  # noqa: B018 - parsed once here, counted as catalog time
    return snap


def _declared() -> tuple[str, str | None]:
    """(worker name, the site the worker declared: a Dask resource, else ``GIOD_SITE``, else None)."""
    name, site = f"pid {os.getpid()}", None
    try:
        from distributed import get_worker

        worker = get_worker()
        name = worker.address
        state = getattr(worker, "state", worker)
        resources = getattr(state, "total_resources", None) or {}
        declared = [k[len(SITE_RESOURCE):] for k in resources if k.startswith(SITE_RESOURCE)]
        site = declared[0] if declared else None
    except (ImportError, ValueError):
        pass  # not in a Dask worker
    return name, site or config.worker_site()


def _where_am_i(store: Store) -> tuple[str, str | None, bool]:
    """(worker name, site, whether the site was declared)."""
    name, site = _declared()
    store.reads.here = site  # sent to its data, a task reads the replica beside it
    if site is not None:
        return name, site, True
    if store not in _NEAREST:  # asked once per open federation, not once per task
        sites = store.sites()
        _NEAREST[store] = sites[0].name if sites else None
    return name, _NEAREST[store], False


def read_partition(job: Job, part: Partition, store: Store | None = None,
                   columns: Sequence[str] | None = None) -> tuple[ak.Array, dict[str, Any]]:
    """The selected events of one partition with the job's columns (or ``columns``), and timings.

    ``store`` is the client's own in process; a worker opens the job's federation once.
    """
    t0 = time.perf_counter()
    store = store if store is not None else worker_federation(job.target).store
    ds = worker_snapshot(store, job.dataset, job.version)
    t1 = time.perf_counter()
    db = part.database
    local: np.ndarray | None = None if (part.start == 0 and part.stop == db.n_events) else \
        np.arange(part.start, part.stop, dtype=np.int64)
    local = select_local(ds, db, parse_selection(ds.schema, job.expression), local)
    proj = resolve_columns(ds.schema, list(columns if columns is not None else job.columns),
                           {c.name for c in db.containers})
    chunk = with_behaviour(assemble(ds.schema, proj, read_database(ds, db, proj, local)), ds.schema)
    t2 = time.perf_counter()
    return chunk, {"catalog_s": t1 - t0, "read_s": t2 - t1, "store": store}


def map_task(job: Job, part: Partition, fn: Callable[[ak.Array], Any],
              here: Store | None = None) -> tuple[Any, TaskStats]:
    """A worker's task: read one partition, apply ``fn``; the value and what it cost."""
    start, cpu = time.time(), time.process_time()
    t0 = time.perf_counter()
    store = here if here is not None else worker_federation(job.target).store
    opened = time.perf_counter() - t0
    worker, site, declared = _where_am_i(store)
    served = store.reads.served.copy()
    chunk, t = read_partition(job, part, store)
    read_sites = tuple(sorted(store.reads.served - served))
    u0 = time.perf_counter()
    value = fn(chunk) if len(chunk) else EMPTY
    user_s = time.perf_counter() - u0
    stats = TaskStats(part.index, part.database.id, part.entries, len(chunk), part.bytes, opened + t["catalog_s"],
                      t["read_s"], user_s, time.process_time() - cpu, start, time.time(), worker, site, declared,
                      site is not None and site in part.sites, read_sites)
    return value, stats

