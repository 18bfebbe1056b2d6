"""Parallel and distributed processing: a selection's partitions on a local pool or a Dask cluster.

A job is split into **partitions**: one per database of the selection's
snapshot, split further into entry ranges when a database is large. Each
task carries everything it needs: how to reach the federation (its path or
URL), the dataset name, the **pinned version**, the database record of that
snapshot and the entry range. A worker re-opens the federation (once per
process and thread), selects the events of its range with the tag expression,
reads only the projected columns, applies the user's function and sends back
its result with timings. The client reduces the results **in partition
order**, so the answer is the same, bit for bit, whichever scheduler ran the
tasks and in whichever order they finished.

Schedulers (``scheduler=``):

* ``None`` or ``"processes"``: a pool of spawned processes on this machine,
  one per CPU (``"processes:N"`` or an ``int``: N processes). It is a
  :class:`concurrent.futures.ProcessPoolExecutor` rather than a Dask
  ``LocalCluster``: it starts in a fraction of the time and needs no
  scheduler process. It is kept alive between jobs of the same size. A
  worker that dies is replaced and its tasks run again.
* ``"sync"``: every task in this process, one after the other.
* ``"localcluster"`` / ``"localcluster:N"``: a Dask ``LocalCluster`` of N
  worker processes, started for the job (with its dashboard).
* ``"tcp://host:8786"``: the Dask scheduler at that address.
* a ``distributed.Client`` (or a cluster object), used as is.
* an :class:`Executor` from :func:`connect`, to keep one for several jobs.

Locality: a worker declares its site with a Dask resource ``site-<name>``
(``dask worker --resources site-cern=1``) or the ``GIOD_SITE`` environment
variable. Tasks are sent preferably to workers at a site holding a good
replica of every container they read (``workers=`` with
``allow_other_workers``, so a job never waits for a site without workers;
``locality="strict"`` makes it a hard restriction). Each task reports the
site it ran at, and :class:`MapReport` counts local and remote tasks.
"""

from __future__ import annotations

import atexit
import functools
import math
import numbers
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import awkward as ak
import numpy as np

from giod.catalog.records import DatabaseRecord
from giod.errors import ConfigError, DataError, GiodError, MissingDependency
from giod.schema import TAG_CONTAINER
from giod.selection import Projection, assemble, read_database, resolve_columns

if TYPE_CHECKING:
    from giod.federation import Dataset, Federation
    from giod.selection import Selection

__all__ = [
    "DEFAULT_PARTITION_BYTES", "SITE_ENV", "Executor", "Job", "MapReport", "Partition", "TaskStats", "TaskTiming",
    "add", "connect", "local_cluster", "map_selection", "plan", "run_tasks",
]  # fmt: skip

#: Environment variable a worker sets to declare the site it runs at.
SITE_ENV = "GIOD_SITE"
#: Dask worker resources named ``site-<name>`` declare the site too.
SITE_RESOURCE = "site-"
#: A database is split into partitions of about this many bytes (of the containers read).
DEFAULT_PARTITION_BYTES = 256_000_000
#: How often a local pool whose worker died is restarted before the job fails.
POOL_RESTARTS = 3

Progress = Callable[[int, int], None]  # (partitions done, partitions in all)


# ---------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Target:
    """What a worker passes to ``giod.open`` to reach the client's federation."""

    url: str
    token: str | None = None
    verify: bool | str = True

    @classmethod
    def of(cls, fed: Federation) -> Target:
        endpoint = getattr(fed.catalog, "endpoint", None)  # a giod server: its token and TLS setting
        if fed.root is not None:
            return cls(str(fed.root))
        return cls(fed.catalog.url, getattr(endpoint, "token", None), getattr(endpoint, "verify", True))

    def __repr__(self) -> str:  # never print the token
        return f"Target({self.url!r})"


@dataclass(frozen=True)
class Job:
    """What every task of one job shares."""

    target: Target
    dataset: str
    version: int
    expression: str  # tag expression text ("true": every event)
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


def _containers_read(proj: Projection, expression_fields: Iterable[str]) -> list[str]:
    names = list(proj.columns)
    if set(expression_fields) and TAG_CONTAINER not in names:
        names.append(TAG_CONTAINER)
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
    fed = ds.federation
    databases = sel.databases()
    every = databases or ds.databases()[:1]
    available = set.intersection(*({c.name for c in db.containers} for db in every)) if every else set()
    proj = resolve_columns(ds.schema, columns, available)
    if columns is None:  # the workers read exactly what the client resolved
        columns = list(proj.names)
    elif isinstance(columns, str):
        columns = [columns]
    job = Job(Target.of(fed), ds.name, int(sel.version), sel.expression.text, tuple(columns))
    names = _containers_read(proj, sel.expression.fields)
    site_names = {s.id: s.name for s in fed.sites()}
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


_EMPTY = object()  # a partition with no selected event: it adds nothing
_cache = threading.local()
# per open federation, forgotten with it
_DATASETS: weakref.WeakKeyDictionary[Federation, dict[tuple[str, int], Dataset]] = weakref.WeakKeyDictionary()
_NEAREST: weakref.WeakKeyDictionary[Federation, str | None] = weakref.WeakKeyDictionary()


def worker_federation(target: Target) -> Federation:
    """The federation ``target``, opened once per worker process and thread and kept for later tasks."""
    import giod

    opened: dict[Target, Federation] = getattr(_cache, "feds", None) or {}
    _cache.feds = opened
    fed = opened.get(target)
    if fed is None:
        fed = giod.open(target.url, create=False, token=target.token, verify=target.verify)
        fed.reads.here = _declared()[1]
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
    return name, site or os.environ.get(SITE_ENV) or None


def _where_am_i(fed: Federation) -> tuple[str, str | None, bool]:
    """(worker name, site, whether the site was declared)."""
    name, site = _declared()
    fed.reads.here = site  # sent to its data, a task reads the replica beside it
    if site is not None:
        return name, site, True
    if fed not in _NEAREST:  # asked once per open federation, not once per task
        sites = fed.sites()
        _NEAREST[fed] = sites[0].name if sites else None
    return name, _NEAREST[fed], False


def read_partition(job: Job, part: Partition, fed: Federation | None = None,
                   columns: Sequence[str] | None = None) -> tuple[ak.Array, dict[str, Any]]:
    """The selected events of one partition with the job's columns (or ``columns``), and timings."""
    t0 = time.perf_counter()
    fed = fed if fed is not None else worker_federation(job.target)
    ds = worker_dataset(fed, job.dataset, job.version)
    t1 = time.perf_counter()
    db = part.database
    local: np.ndarray | None = None if (part.start == 0 and part.stop == db.n_events) else \
        np.arange(part.start, part.stop, dtype=np.int64)
    from giod.expression import parse

    fields = {name: f.dtype for name, f in ds.schema.tags.items()}
    expression = parse(job.expression, fields)
    if expression.fields:
        names = sorted(expression.fields)
        tags = read_database(ds, db, Projection({TAG_CONTAINER: names}, tuple(names)), local)[TAG_CONTAINER]
        mask = np.asarray(expression.evaluate({n: tags.column(n).to_numpy() for n in tags.column_names}),
                          dtype=bool)
        base = np.arange(part.start, part.stop, dtype=np.int64)
        local = base[mask]
        if len(local) == db.n_events:
            local = None
    proj = resolve_columns(ds.schema, list(columns if columns is not None else job.columns),
                           {c.name for c in db.containers})
    chunk = assemble(ds.schema, proj, read_database(ds, db, proj, local))
    t2 = time.perf_counter()
    return chunk, {"catalog_s": t1 - t0, "read_s": t2 - t1, "fed": fed}


def _map_task(job: Job, part: Partition, fn: Callable[[ak.Array], Any],
              here: Federation | None = None) -> tuple[Any, TaskStats]:
    """A worker's task: read one partition, apply ``fn``; the value and what it cost."""
    start, cpu = time.time(), time.process_time()
    t0 = time.perf_counter()
    fed = here if here is not None else worker_federation(job.target)
    opened = time.perf_counter() - t0
    worker, site, declared = _where_am_i(fed)
    served = fed.reads.served.copy()
    chunk, t = read_partition(job, part, fed)
    read_sites = tuple(sorted(fed.reads.served - served))
    u0 = time.perf_counter()
    value = fn(chunk) if len(chunk) else _EMPTY
    user_s = time.perf_counter() - u0
    stats = TaskStats(part.index, part.database.id, part.entries, len(chunk), part.bytes, opened + t["catalog_s"],
                      t["read_s"], user_s, time.process_time() - cpu, start, time.time(), worker, site, declared,
                      site is not None and site in part.sites, read_sites)
    return value, stats


# ---------------------------------------------------------------- reduction


class _Pieces:
    """Arrays (or lists) to concatenate once, at the end, in partition order."""

    def __init__(self, first: Any):
        self.items = [first]


def _lift(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _lift(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_lift(v) for v in value)
    if isinstance(value, np.ndarray | ak.Array | list):
        return _Pieces(value)
    return value


def _combine(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = _combine(out[k], v) if k in out else v
        return out
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(_combine(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, _Pieces) and isinstance(b, _Pieces):
        a.items.extend(b.items)
        return a
    if isinstance(a, numbers.Number | np.number) and isinstance(b, numbers.Number | np.number):
        return a + b
    if type(a) is type(b) and hasattr(a, "__add__") and not isinstance(a, str | bytes):
        return add(a, b)  # histograms (hist, boost-histogram) and anything else that adds
    raise DataError(f"cannot reduce a {type(a).__name__} with a {type(b).__name__}: pass reduce=callable")


def add(a: Any, b: Any, *, inplace: bool = False) -> Any:
    """``a + b`` (or ``a += b``); two unweighted histograms stay unweighted.

    boost-histogram marks the variances of any sum as unknown, although the
    sum of two histograms of counts is still one of counts: the flag is put
    back, so that a merged histogram has the variances of one filled serially.
    """
    known = getattr(a, "_variance_known", None), getattr(b, "_variance_known", None)
    if inplace:
        a += b
        out = a
    else:
        out = a + b
    if None not in known and hasattr(out, "_variance_known"):
        out._variance_known = known[0] and known[1]
    return out


def _finish(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _finish(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_finish(v) for v in value)
    if isinstance(value, _Pieces):
        first = value.items[0]
        if isinstance(first, np.ndarray):
            return np.concatenate(value.items)
        if isinstance(first, ak.Array):
            return value.items[0] if len(value.items) == 1 else ak.concatenate(value.items)
        return [x for item in value.items for x in item]
    return value


class _Ordered:
    """Folds results in partition order as they arrive in any order."""

    def __init__(self, reduce: Callable[[Any, Any], Any] | None):
        self.reduce = reduce
        self.waiting: dict[int, Any] = {}
        self.next = 0
        self.value: Any = _EMPTY

    def add(self, index: int, value: Any) -> None:
        self.waiting[index] = value
        while self.next in self.waiting:
            v = self.waiting.pop(self.next)
            self.next += 1
            if v is _EMPTY:
                continue
            if self.reduce is not None:
                self.value = v if self.value is _EMPTY else self.reduce(self.value, v)
            else:
                v = _lift(v)
                self.value = v if self.value is _EMPTY else _combine(self.value, v)

    def result(self) -> Any:
        if self.value is _EMPTY or self.reduce is not None:
            return self.value
        return _finish(self.value)


# ---------------------------------------------------------------- executors


@dataclass(frozen=True)
class TaskTiming:
    """When and where one task ran, measured around it in the worker."""

    index: int
    start: float  # time.time()
    stop: float
    cpu_s: float  # CPU time of the worker process during the task (its library threads too)
    worker: str

    @property
    def wall_s(self) -> float:
        return self.stop - self.start


class _Timed:
    """``func`` made to return its result with a :class:`TaskTiming` (index filled in by the client)."""

    def __init__(self, func: Callable[..., Any]):
        self.func = func
        self.__name__ = getattr(func, "__name__", "task")

    def __call__(self, *args: Any) -> tuple[Any, TaskTiming]:
        start, cpu = time.time(), time.process_time()
        out = self.func(*args)
        return out, TaskTiming(-1, start, time.time(), time.process_time() - cpu, _worker_name())


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"pid {os.getpid()}"


class Executor:
    """Runs tasks somewhere: this process, a local pool or a Dask cluster.

    ``timings`` holds a :class:`TaskTiming` per task of the last ``run``.
    """

    name = "executor"
    dashboard: str | None = None
    in_process = False

    def __init__(self) -> None:
        self.timings: list[TaskTiming] = []

    def run(self, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
            sites: Sequence[Sequence[str]] | None = None, strict: bool = False) -> Iterator[tuple[int, Any]]:
        """``func(*calls[i])`` for every i; yields ``(i, result)`` as they finish."""
        self.timings = []
        for i, (out, timing) in self._run(_Timed(func), calls, sites=sites, strict=strict):
            self.timings.append(TaskTiming(i, timing.start, timing.stop, timing.cpu_s, timing.worker))
            yield i, out

    @property
    def n_workers(self) -> int:
        return 1

    def worker_sites(self) -> dict[str, str | None]:
        """The workers and the site each declared (empty when placement is not up to giod)."""
        return {}

    def _run(self, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
             sites: Sequence[Sequence[str]] | None, strict: bool) -> Iterator[tuple[int, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what this executor started."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncExecutor(Executor):
    """Every task in this process, in order."""

    name = "sync"
    in_process = True

    def _run(self, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
             sites: Sequence[Sequence[str]] | None, strict: bool) -> Iterator[tuple[int, Any]]:
        for i, args in enumerate(calls):
            yield i, func(*args)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_POOLS: dict[int, ProcessPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(n: int, fresh: bool = False) -> ProcessPoolExecutor:
    import multiprocessing

    with _POOLS_LOCK:
        pool = _POOLS.get(n)
        if pool is not None and fresh:
            pool.shutdown(wait=False, cancel_futures=True)
            pool = None
        if pool is None:
            # spawn, not fork: the parent holds catalog connections and library thread pools
            pool = ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"))
            _POOLS[n] = pool
        return pool


@atexit.register
def _close_pools() -> None:
    with _POOLS_LOCK:
        for pool in _POOLS.values():
            pool.shutdown(wait=True, cancel_futures=True)
        _POOLS.clear()


def _call_pickled(payload: bytes) -> Any:
    import cloudpickle

    func, args = cloudpickle.loads(payload)
    return func(*args)


class PoolExecutor(Executor):
    """A pool of spawned processes on this machine, kept for later jobs of the same size."""

    def __init__(self, workers: int | None = None):
        super().__init__()
        self.workers = workers or _cpus()
        if self.workers < 1:
            raise ConfigError(f"a local pool needs at least 1 worker, got {self.workers}")
        self.name = f"processes:{self.workers}"
        self.restarts = 0

    @property
    def n_workers(self) -> int:
        return self.workers

    def _run(self, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
             sites: Sequence[Sequence[str]] | None, strict: bool) -> Iterator[tuple[int, Any]]:
        import cloudpickle

        # cloudpickle, as Dask does: lambdas and closures work on every scheduler alike
        payloads = [cloudpickle.dumps((func, args)) for args in calls]
        todo = set(range(len(calls)))
        restarts = 0
        pool = _pool(self.workers)
        while todo:
            futures: dict[Future[Any], int] = {pool.submit(_call_pickled, payloads[i]): i for i in sorted(todo)}
            pending = set(futures)
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in sorted(done, key=futures.__getitem__):
                        result = f.result()  # raises the task's error
                        todo.discard(futures[f])
                        yield futures[f], result
            except BrokenProcessPool as exc:
                # a worker died (killed, out of memory): a new pool runs the unfinished tasks again
                for f in pending:
                    f.cancel()
                restarts += 1
                self.restarts += 1
                if restarts > POOL_RESTARTS:
                    raise GiodError(f"local worker processes died {restarts} times; giving up "
                                    "(out of memory? a script without `if __name__ == \"__main__\":`?)") from exc
                pool = _pool(self.workers, fresh=True)
            except BaseException:
                for f in pending:
                    f.cancel()
                raise


class DaskExecutor(Executor):
    """A Dask ``distributed`` client: a remote scheduler, or a LocalCluster started for the job."""

    def __init__(self, client: Any, *, owned: tuple[Any, ...] = (), name: str | None = None):
        super().__init__()
        self.client = client
        self._owned = owned  # closed by close(): what this executor started
        self.name = name or f"dask {client.scheduler.address}"
        try:  # only a dashboard that runs: the scheduler lists it among its services
            running = "dashboard" in (client.scheduler_info().get("services") or {})
            self.dashboard = client.dashboard_link if running else None
        except Exception:  # noqa: BLE001 - no dashboard (bokeh missing): not an error
            self.dashboard = None

    @property
    def n_workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def worker_sites(self) -> dict[str, str | None]:
        workers = self.client.scheduler_info().get("workers", {})
        out: dict[str, str | None] = {}
        for address, info in workers.items():
            declared = [k[len(SITE_RESOURCE):] for k in (info.get("resources") or {}) if k.startswith(SITE_RESOURCE)]
            out[address] = declared[0] if declared else None
        if any(v is None for v in out.values()):
            env = self.client.run(os.environ.get, SITE_ENV)
            out = {a: s if s is not None else env.get(a) for a, s in out.items()}
        return out

    def _run(self, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
             sites: Sequence[Sequence[str]] | None, strict: bool) -> Iterator[tuple[int, Any]]:
        from distributed import as_completed

        at: dict[str, list[str]] = {}
        if sites is not None:
            for address, site in self.worker_sites().items():
                if site is not None:
                    at.setdefault(site, []).append(address)
        futures = []
        for i, args in enumerate(calls):
            workers = sorted({a for s in (sites[i] if sites is not None else ()) for a in at.get(s, ())})
            where: dict[str, Any] = {"workers": workers, "allow_other_workers": not strict} if workers else {}
            futures.append(self.client.submit(
                func, *args, pure=False, key=f"giod-{getattr(func, '__name__', 'task')}-{i}-{os.urandom(4).hex()}",
                **where))
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for f in as_completed(futures):
                yield index[f.key], f.result()  # raises the task's error
        finally:
            self.client.cancel([f for f in futures if not f.done()])

    def close(self) -> None:
        for thing in self._owned:
            thing.close()


def local_cluster(n_workers: int = 2, *, sites: Sequence[str | None] | None = None,
                  dashboard: bool = True, host: str = "127.0.0.1") -> Any:
    """A Dask cluster of ``n_workers`` worker processes on this machine (one thread each).

    ``sites[i]`` declares the site of worker ``i`` (a ``site-<name>``
    resource), to try locality on one machine. It listens on ``host``
    (loopback by default: nothing outside this machine can reach it).
    """
    try:
        import logging

        from distributed import LocalCluster, Nanny, Scheduler, SpecCluster
    except ImportError as exc:
        raise MissingDependency("Dask is not installed: pip install 'giod[dask]'") from exc
    address = f"{host}:0" if dashboard else None
    if sites is None:
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host=host,
                            dashboard_address=address, silence_logs=logging.ERROR)
    if len(sites) != n_workers:
        raise ConfigError(f"sites names the site of each of the {n_workers} workers, got {len(sites)}")
    workers = {
        f"worker-{i}": {"cls": Nanny, "options": {
            "nthreads": 1, "host": host, "silence_logs": logging.ERROR,
            "resources": {f"{SITE_RESOURCE}{site}": 1} if site else {}}}
        for i, site in enumerate(sites)
    }
    scheduler = {"cls": Scheduler, "options": {"host": host, "dashboard_address": address}}
    return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.ERROR)


def connect(scheduler: Any = None) -> Executor:
    """The executor for ``scheduler`` (see the module's docstring); close it when done."""
    if isinstance(scheduler, Executor):
        return scheduler
    if scheduler is None:
        return PoolExecutor()
    if isinstance(scheduler, bool):
        raise ConfigError(f"unknown scheduler {scheduler!r}")
    if isinstance(scheduler, int):
        return PoolExecutor(scheduler)
    if isinstance(scheduler, str):
        text = scheduler.strip()
        kind, _, count = text.partition(":")
        if text == "sync":
            return SyncExecutor()
        if kind in ("processes", "localcluster") and not text.startswith("localcluster://"):
            if count and not (count.isdigit() and int(count) > 0):
                raise ConfigError(f"scheduler {text!r}: the number of workers must be a positive integer")
            n = int(count) if count else None
            if kind == "processes":
                return PoolExecutor(n)
            cluster = local_cluster(n or _cpus())
            client = _client(cluster)
            return DaskExecutor(client, owned=(client, cluster), name=f"localcluster:{n or _cpus()}")
        if "://" in text:
            client = _client(text)
            return DaskExecutor(client, owned=(client,))
        raise ConfigError(f"unknown scheduler {text!r}: use sync, processes[:N], localcluster[:N] or "
                          "tcp://HOST:PORT")
    try:
        from distributed import Client
    except ImportError as exc:
        raise MissingDependency("Dask is not installed: pip install 'giod[dask]'") from exc
    if isinstance(scheduler, Client):
        return DaskExecutor(scheduler)
    if hasattr(scheduler, "scheduler_address"):  # a cluster object
        client = Client(scheduler)
        return DaskExecutor(client, owned=(client,))
    raise ConfigError(f"unknown scheduler {scheduler!r}")


def _client(where: Any) -> Any:
    try:
        from distributed import Client
    except ImportError as exc:
        raise MissingDependency("Dask is not installed: pip install 'giod[dask]'") from exc
    try:
        return Client(where)  # waits distributed.comm.timeouts.connect (Dask's configuration)
    except OSError as exc:
        raise ConfigError(f"cannot reach the Dask scheduler at {where}: {exc}") from exc


def run_tasks(scheduler: Any, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], *,
              sites: Sequence[Sequence[str]] | None = None, strict: bool = False) -> Iterator[tuple[int, Any]]:
    """``func(*calls[i])`` on ``scheduler``; yields ``(i, result)`` in the order they finish.

    ``sites[i]`` lists the sites where call ``i`` reads locally. ``func``
    must be importable by the workers (a module-level function) or
    picklable by cloudpickle.
    """
    executor = connect(scheduler)
    try:
        yield from executor.run(func, calls, sites=sites, strict=strict)
    finally:
        if executor is not scheduler:
            executor.close()


# ---------------------------------------------------------------- map


@dataclass
class MapReport:
    """How a job ran: per-task timings (partition order) and where each task ran."""

    scheduler: str
    workers: int
    partitions: int
    wall_s: float  # the whole job, as the client saw it
    plan_s: float  # planning in the client (catalog only)
    dashboard: str | None = None
    tasks: list[TaskStats] = field(default_factory=list)

    @property
    def local(self) -> int:
        return sum(1 for t in self.tasks if t.local)

    @property
    def remote(self) -> int:
        return sum(1 for t in self.tasks if not t.local)

    def by_site(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for t in self.tasks:
            entry = out.setdefault(t.site or "?", {"local": 0, "remote": 0})
            entry["local" if t.local else "remote"] += 1
        return out

    @property
    def events(self) -> int:
        return sum(t.events for t in self.tasks)

    def shares(self) -> dict[str, float]:
        """Shares of the workers' time (workers × job wall time): user code, read, catalog, the rest."""
        total = self.workers * self.wall_s
        if total <= 0:
            return {"user": 0.0, "read": 0.0, "catalog": 0.0, "other": 0.0}
        user = sum(t.user_s for t in self.tasks) / total
        read = sum(t.read_s for t in self.tasks) / total
        catalog = sum(t.catalog_s for t in self.tasks) / total
        return {"user": user, "read": read, "catalog": catalog, "other": max(0.0, 1 - user - read - catalog)}

    def summary(self) -> str:
        s = self.shares()
        return (f"{self.partitions} tasks on {self.scheduler} ({self.workers} workers): {self.local} local, "
                f"{self.remote} remote; {self.events:,} events in {self.wall_s:.2f} s; worker time: "
                f"{s['user']:.0%} user code, {s['read']:.0%} reading, {s['catalog']:.0%} catalog, "
                f"{s['other']:.0%} scheduling and idle")


def map_selection(sel: Selection, fn: Callable[[ak.Array], Any], *, columns: Sequence[str] | None,
                  reduce: Callable[[Any, Any], Any] | None = None, scheduler: Any = None,
                  partition_events: int | None = None, progress: Progress | None = None,
                  report: bool = False, locality: str = "prefer") -> Any:
    """Apply ``fn`` to the selected events of each partition and reduce the results.

    ``fn`` gets an awkward Array of the selected events of one partition
    with ``columns``. Results are reduced in partition order: histograms
    (anything of one type that adds) add, numbers add, numpy and awkward
    arrays and lists concatenate, dicts reduce key by key and tuples item by
    item; ``reduce=f`` folds with ``f(a, b)`` instead. Partitions without a
    selected event are skipped; when no event is selected at all, ``fn`` is
    applied to an empty array. ``progress(done, total)`` is called in this
    process as partitions finish. With ``report=True`` the answer is
    ``(result, MapReport)``.
    """
    if locality not in ("prefer", "strict", "off"):
        raise ConfigError(f"locality must be prefer, strict or off, got {locality!r}")
    t0 = time.perf_counter()
    job, parts = plan(sel, columns, partition_events=partition_events)
    plan_s = time.perf_counter() - t0
    executor = connect(scheduler)
    try:
        task: Callable[..., Any] = _map_task
        if executor.in_process:
            task = functools.partial(_map_task, here=sel.dataset.federation)
        folded = _Ordered(reduce)
        stats: list[TaskStats | None] = [None] * len(parts)
        sites = None if locality == "off" else [p.sites for p in parts]
        done = 0
        if progress is not None:
            progress(0, len(parts))
        for i, (value, st) in executor.run(task, [(job, p, fn) for p in parts], sites=sites,
                                           strict=locality == "strict"):
            folded.add(i, value)
            stats[i] = st
            done += 1
            if progress is not None:
                progress(done, len(parts))
        result = folded.result()
        if result is _EMPTY:
            result = _on_nothing(sel, job, fn)
        rep = MapReport(executor.name, executor.n_workers, len(parts), time.perf_counter() - t0, plan_s,
                        executor.dashboard, [s for s in stats if s is not None])
    finally:
        if executor is not scheduler:
            executor.close()
    return (result, rep) if report else result


def _on_nothing(sel: Selection, job: Job, fn: Callable[[ak.Array], Any]) -> Any:
    """``fn`` of an empty chunk with the job's columns (no event was selected)."""
    dbs = sel.dataset.databases()
    if not dbs:
        return None
    db = dbs[0]
    proj = resolve_columns(sel.dataset.schema, list(job.columns), {c.name for c in db.containers})
    empty = assemble(sel.dataset.schema, proj, read_database(sel.dataset, db, proj, np.zeros(0, dtype=np.int64)))
    return fn(empty)
