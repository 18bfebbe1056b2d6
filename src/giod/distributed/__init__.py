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

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import awkward as ak
import numpy as np

from giod.config import SITE_ENV
from giod.distributed.executors import (
    DaskExecutor,
    Executor,
    PoolExecutor,
    SyncExecutor,
    TaskTiming,
    connect,
    local_cluster,
    run_tasks,
)
from giod.distributed.reduce import Ordered, add
from giod.distributed.tasks import (
    DEFAULT_PARTITION_BYTES,
    EMPTY,
    SITE_RESOURCE,
    Job,
    Partition,
    Progress,
    Target,
    TaskStats,
    map_task,
    plan,
    read_partition,
    worker_dataset,
    worker_federation,
)
from giod.errors import ConfigError, deprecated
from giod.read.projection import assemble, read_database, resolve_columns

if TYPE_CHECKING:
    from giod.read.selection import Selection

__all__ = [
    "DEFAULT_PARTITION_BYTES", "SITE_ENV", "SITE_RESOURCE", "DaskExecutor", "Executor", "Job", "MapReport",
    "Partition", "PoolExecutor", "SyncExecutor", "Target", "TaskStats", "TaskTiming",
    "add", "connect", "local_cluster", "map_selection", "plan", "read_partition", "run_tasks",
    "worker_dataset", "worker_federation",
]  # fmt: skip

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
        """The number of tasks that ran at a site holding their data."""
        return sum(1 for t in self.tasks if t.local)

    @property
    def remote(self) -> int:
        """The number of tasks that read their data from another site."""
        return sum(1 for t in self.tasks if not t.local)

    def by_site(self) -> dict[str, dict[str, int]]:
        """Local and remote tasks per site the tasks ran at."""
        out: dict[str, dict[str, int]] = {}
        for t in self.tasks:
            entry = out.setdefault(t.site or "?", {"local": 0, "remote": 0})
            entry["local" if t.local else "remote"] += 1
        return out

    @property
    def events(self) -> int:
        """The number of selected events the tasks handed to the function."""
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
        """One line: tasks, where they ran, events, time and its shares."""
        s = self.shares()
        return (f"{self.partitions} tasks on {self.scheduler} ({self.workers} workers): {self.local} local, "
                f"{self.remote} remote; {self.events:,} events in {self.wall_s:.2f} s; worker time: "
                f"{s['user']:.0%} user code, {s['read']:.0%} reading, {s['catalog']:.0%} catalog, "
                f"{s['other']:.0%} scheduling and idle")


def map_selection(sel: Selection, fn: Callable[[ak.Array], Any], *, columns: Sequence[str] | None = None,
                  reduce: Callable[[Any, Any], Any] | None = None, scheduler: Any = None,
                  partition_events: int | None = None, progress: Progress | None = None,
                  report: bool = False, locality: str = "prefer") -> Any:
    """Apply ``fn`` to the selected events of each partition of ``sel`` and reduce the results.

    ``giod.distributed.map_selection(ds.select("njets >= 2"), fn, columns=[...])``:
    the parallel processing of a selection lives here, above the store, so that
    ``giod.read.selection`` imports nothing from this layer.

    ``fn`` gets an awkward Array of the selected events of one partition
    with ``columns`` (every collection and tag when None, as ``Selection.read``:
    name the columns ``fn`` needs, so that only those are read). Results are reduced in partition order: histograms
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
        task: Callable[..., Any] = map_task
        if executor.in_process:
            task = functools.partial(map_task, here=sel.dataset.store)
        folded = Ordered(reduce)
        stats: list[TaskStats | None] = [None] * len(parts)
        sites = None if locality == "off" else [p.sites for p in parts]
        done = 0
        if progress is not None:
            progress(0, len(parts))
        order = _arrival_order(sel, job, parts)  # a nearline dataset: what is on disk first
        for i, (value, st) in executor.run(task, [(job, parts[k], fn) for k in order],
                                           sites=None if sites is None else [sites[k] for k in order],
                                           strict=locality == "strict"):
            folded.add(order[i], value)
            stats[order[i]] = st
            done += 1
            if progress is not None:
                progress(done, len(parts))
        result = folded.result()
        if result is EMPTY:
            result = _on_nothing(sel, job, fn)
        rep = MapReport(executor.name, executor.n_workers, len(parts), time.perf_counter() - t0, plan_s,
                        executor.dashboard, [s for s in stats if s is not None])
    finally:
        if executor is not scheduler:
            executor.close()
    return (result, rep) if report else result


def map(*args: Any, **kwargs: Any) -> Any:  # noqa: A001 - the deprecated name, kept out of __all__
    """Deprecated name of :func:`map_selection` (it shadowed the builtin ``map`` when imported)."""
    deprecated("giod.distributed.map()", "giod.distributed.map_selection()")
    return map_selection(*args, **kwargs)


def _arrival_order(sel: Selection, job: Job, parts: Sequence[Partition]) -> list[int]:
    """The partitions in the order their files are on disk: all nearline files asked for in one request
    (``Selection.stage``), staged ones first; the job's own order when nothing is on tape."""
    sel._stage_for(job.columns)
    plan = sel.staging
    if plan is None or plan.empty:
        return list(range(len(parts)))
    return sorted(range(len(parts)), key=lambda k: plan.arrival(parts[k].database))


def _on_nothing(sel: Selection, job: Job, fn: Callable[[ak.Array], Any]) -> Any:
    """``fn`` of an empty chunk with the job's columns (no event was selected)."""
    dbs = sel.dataset.databases()
    if not dbs:  # nothing written yet: the schema's own (empty) fields
        return fn(sel.read(list(job.columns)))
    db = dbs[0]
    proj = resolve_columns(sel.dataset.schema, list(job.columns), {c.name for c in db.containers})
    empty = assemble(sel.dataset.schema, proj, read_database(sel.dataset, db, proj, np.zeros(0, dtype=np.int64)))
    return fn(empty)

