"""Scaling benchmark: the same jobs serially, on a local pool and on a Dask LocalCluster; and a model.

Three workloads, each beside the same work done serially in this process:

* ``dijet``: the di-jet mass analysis (``Selection.map`` over the jet
  columns of synthetic events; serially: ``Selection.iterate`` + fill);
* ``scan``: every column of the same events read into awkward (one partition
  per database of more than 100 MB at the default size), to measure the
  scheduling overhead on partitions of that size;
* ``recon``: the reconstruction pass (``reconstruct_dataset``, forced, so
  each run replaces the last one's output), CPU-bound;
* ``recon in memory``: the same reconstruction on raw events already held
  by the process (serially and on the pool of 2): no reading, writing or
  catalog, so its speed-up is the ceiling this machine's CPUs set for the
  pass.

Each ran with a local pool of 1 and 2 spawned worker processes and a Dask
``LocalCluster`` of 2 worker processes (both started before the clocks, and
warmed by an untimed round). Per-task timings measured in the workers give
``busy`` (share of the workers' time inside tasks: the rest is scheduling,
start-up and idling), ``CPU`` (the workers' CPU time during tasks over
workers × wall), ``user`` (time in the user's function: the analysis, not
reading) and the scheduling overhead (the job's wall time beyond the tasks
of its busiest worker: planning, dispatch, results coming back).

**The model.** Fed by the measured per-task costs of the LocalCluster run
(events ``e``, compute seconds ``t`` without reading, bytes read or written
``b``, the overhead per task ``o``), the catalog visit (opening the
federation in the worker, ``v``, and the queries a shared catalog serves one
at a time, ``c``: both measured) and the throughput ``S`` of the Dask
scheduler (no-op tasks, measured), it predicts the events/s of W workers
reading from N sites of bandwidth B each, data spread evenly and read at the
site that holds it:

    X = e · min( W / (t + o + v/k + b/min(B, D)),  N·B / b,  k / c,  S )

(D: the local-disk rate of one reader, measured here), the bound set by the
busiest resource, which the table names; ``k`` is the number of tasks per
catalog visit: a task re-uses its worker's open federation and carries
its database's record, so a worker visits the catalog once (a job of 100
tasks per worker: k = 100). The limiting term is named. A
discrete-event simulation of the same system (FIFO scheduler, FIFO catalog,
each site's link a FIFO server of bandwidth B, W workers taking tasks in
turn) runs the job and checks the closed form, including the queueing when
two limits are close.
"""

from __future__ import annotations

import heapq
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np

import giod
import giod.distributed
from giod.catalog.records import DatabaseRecord
from giod.distributed import (
    DaskExecutor,
    MapReport,
    PoolExecutor,
    Target,
    TaskTiming,
    local_cluster,
    worker_dataset,
    worker_federation,
)
from giod.errors import ConfigError
from giod.physics.chain import reconstruct_dataset, simulate_into
from giod.testing import synthetic
from giod_bench.report import MB, Bars, Column, Outcome, Table, figure, ratio, round_robin, save

__all__ = ["DEFAULT_EVENTS", "QUICK_EVENTS", "Costs", "model", "plot", "run", "simulate_job"]

DEFAULT_EVENTS = 4_000  # reconstruction events; the analysis uses ANALYSIS_FACTOR times more
QUICK_EVENTS = 200
ANALYSIS_FACTOR = 20
ANALYSIS_DATABASES = 2
RECON_DATABASES = 8
SEED = 2026
MEMORY = "recon in memory"  # the reconstruction's compute alone: this machine's ceiling for it
JETS = ["jets.pt", "jets.eta", "jets.phi", "jets.mass"]
#: Targets of the issue.
SPEEDUP_TARGET = 1.8
OVERHEAD_TARGET = 0.05
BIG_PARTITION = 100 * MB
#: Scenarios of the model.
MODEL_WORKERS = (2, 100, 1000)
MODEL_SITES = (1, 4, 16)
SITE_BANDWIDTH = 125 * MB  # 1 Gbit/s per site
TASKS_PER_WORKER = 100  # job size in the model: tasks per worker
NOOP_TASKS = 400


# ---------------------------------------------------------------- workloads (run in the workers)


def dijet_histogram(chunk: ak.Array) -> Any:
    """The di-jet analysis of one partition (as ``giod.analysis.dijet.run`` does it)."""
    from giod.analysis import dijet

    h = dijet.mass_histogram()
    return dijet.fill(h, chunk, "jets")


def count(chunk: ak.Array) -> int:
    return len(chunk)


def _noop(i: int) -> int:
    return i


_RAW: dict[tuple[Any, ...], dict[int, list[ak.Array]]] = {}


def recon_in_memory(target: Target, dataset: str, version: int, dbs: tuple[DatabaseRecord, ...], index: int) -> int:
    """Reconstruct database ``dbs[index]`` from raw events held in this process (all read on the first call).

    The machine's own ceiling for the reconstruction: the same compute with
    no reading, writing or catalog, so the rounds measure CPUs only.
    """
    from giod.physics.chain import raw_events
    from giod.physics.reconstruct import reconstruct

    key = (target, dataset, version)
    held = _RAW.get(key)
    if held is None:
        ds = worker_dataset(worker_federation(target), dataset, version)
        held = _RAW[key] = {db.id: list(raw_events(ds, db)) for db in dbs}
    for raw in held[dbs[index].id]:
        reconstruct(raw)
    return dbs[index].n_events


# ---------------------------------------------------------------- the model


@dataclass(frozen=True)
class Costs:
    """Measured costs of one task of a workload, the inputs of the model."""

    events: float  # per task
    compute_s: float  # per task, without reading its input
    bytes: float  # read and written per task
    overhead_s: float  # per task: dispatch, transfer of the result, idling between tasks
    open_s: float  # one catalog visit's work in the worker: opening the federation (in parallel)
    catalog_s: float  # one catalog visit's queries (dataset, database): what a shared catalog serves in turn
    tasks_per_visit: float  # tasks per catalog visit
    scheduler_rate: float  # tasks/s the Dask scheduler dispatches
    disk_rate: float  # bytes/s one worker reads from local disk (measured here)


def model(c: Costs, workers: int, sites: int, bandwidth: float) -> dict[str, Any]:
    """Predicted events/s of ``workers`` workers over ``sites`` sites of ``bandwidth`` bytes/s each.

    The bound of the busiest resource: each worker needs ``t + o + v/k`` plus
    its read at the speed of the link or the disk, whichever is slower; each
    site's link carries ``B / b`` tasks per second; the catalog serves ``k /
    c``; the Dask scheduler ``S``.
    """
    t_work = c.compute_s + c.overhead_s + c.open_s / c.tasks_per_visit + c.bytes / min(c.disk_rate, bandwidth)
    limits = {
        "workers (CPU)": workers / t_work,
        "site bandwidth": sites * bandwidth / c.bytes if c.bytes else math.inf,
        "catalog": c.tasks_per_visit / c.catalog_s if c.catalog_s else math.inf,
        "Dask scheduler": c.scheduler_rate,
    }
    name = min(limits, key=lambda k: limits[k])
    return {"events_per_s": c.events * limits[name], "limit": name,
            **{f"limit_{k.split()[-1].lower().strip('()')}": c.events * v for k, v in limits.items()}}


def simulate_job(c: Costs, workers: int, sites: int, bandwidth: float, tasks: int) -> float:
    """Events/s of a job of ``tasks`` tasks, by discrete-event simulation of the same system.

    Each worker takes a task from the scheduler (a FIFO server, 1/S per
    task), visits the catalog when its task needs it (a FIFO server, c per
    visit), reads through its site's link (a FIFO server per site, b/B per
    task, never faster than the local disk), computes (t + o), and takes the
    next task. Tasks are spread over the sites in turn.
    """
    free = {"scheduler": 0.0, "catalog": 0.0}
    link = [0.0] * sites
    every = max(1, round(c.tasks_per_visit))  # a worker visits the catalog on its first task, then every k
    queue: list[tuple[float, int]] = [(0.0, w) for w in range(workers)]
    done_tasks = [0] * workers
    finished = 0.0
    for k in range(tasks):
        now, w = heapq.heappop(queue)
        start = max(now, free["scheduler"])
        free["scheduler"] = start + 1.0 / c.scheduler_rate
        t = free["scheduler"]
        if done_tasks[w] % every == 0:
            start = max(t + c.open_s, free["catalog"])
            free["catalog"] = start + c.catalog_s
            t = free["catalog"]
        s = k % sites
        start = max(t, link[s])
        link[s] = start + c.bytes / bandwidth
        t = max(link[s], start + c.bytes / c.disk_rate)
        t += c.compute_s + c.overhead_s
        done_tasks[w] += 1
        finished = max(finished, t)
        heapq.heappush(queue, (t, w))
    return c.events * tasks / finished if finished > 0 else math.inf


# ---------------------------------------------------------------- measuring


@dataclass
class Measured:
    seconds: list[float]
    reports: list[Any]  # MapReport, or (timings, workers, tasks) for the reconstruction


def _projected_bytes(fed: Any, ds: Any, columns: Sequence[str] | None) -> dict[int, int]:
    """Compressed bytes each database's read touches: Parquet column chunks; Arrow record batches (whole)."""
    import pyarrow.parquet as pq

    from giod.read.projection import resolve_columns

    out: dict[int, int] = {}
    for db in ds.databases():
        proj = resolve_columns(ds.schema, columns, {c.name for c in db.containers})
        total = 0
        for container, paths in proj.columns.items():
            rec = db.container(container)
            if rec.format == "arrow":  # record batches are read whole, every column with them
                total += rec.size
                continue
            site = fed.site(next(s.name for s in fed.sites() if s.id in rec.site_ids))
            meta = pq.ParquetFile(site.local_path(rec.path)).metadata
            wanted = tuple(paths)
            for g in range(meta.num_row_groups):
                rg = meta.row_group(g)
                for j in range(rg.num_columns):
                    col = rg.column(j)
                    if col.path_in_schema.startswith(wanted):
                        total += col.total_compressed_size
        out[db.id] = total
    return out


def _catalog_visit(target: str, dataset: str) -> tuple[float, float]:
    """Seconds of one catalog visit as a worker makes it: opening, then the queries (medians of 20)."""
    opening, queries = [], []
    for _ in range(20):
        start = time.perf_counter()
        with giod.open(target, create=False) as fed:
            opened = time.perf_counter()
            ds = fed.dataset(dataset)
            fed.catalog.database(fed.catalog.databases(dataset, ds.version)[0].id, ds.version)
            queries.append(time.perf_counter() - opened)
        opening.append(opened - start)
    return statistics.median(opening), statistics.median(queries)


def _noop_rate(executor: DaskExecutor) -> float:
    """No-op tasks per second through the Dask scheduler (best of 3)."""
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for _ in executor.run(_noop, [(i,) for i in range(NOOP_TASKS)]):
            pass
        best = max(best, NOOP_TASKS / (time.perf_counter() - start))
    return best


def run(
    events: int = DEFAULT_EVENTS,
    repeat: int = 3,
    workdir: str | os.PathLike[str] | None = None,
    bars: Bars | None = None,
) -> Outcome:
    """Measure the three workloads on every scheduler and feed the model."""
    from giod.physics.reconstruct import warm_up

    if events < 1 or repeat < 1:
        raise ConfigError("events and repeat must be positive")
    bars = bars or Bars(enabled=False)
    analysis_events = events * ANALYSIS_FACTOR
    with tempfile.TemporaryDirectory(prefix="giod-bench-scale-", dir=workdir) as tmp:
        root = Path(tmp) / "fed"
        fed = giod.open(root, create=True)
        with bars.task("writing synthetic events", analysis_events) as advance:
            syn = fed.create_dataset("syn", synthetic.schema())
            per_db = math.ceil(analysis_events / ANALYSIS_DATABASES)
            with syn.writer(database_events=per_db) as w:
                for start in range(0, analysis_events, per_db):
                    n = min(per_db, analysis_events - start)
                    w.append(synthetic.events(n, seed=SEED + start, first_event=start))
                    advance(n)
        with bars.task("simulating raw events", events) as advance:
            simulate_into(fed, "recon", events, seed=SEED, database_events=math.ceil(events / RECON_DATABASES),
                          progress=advance)
        with bars.task("starting the pools and the cluster", 4) as advance:
            warm_up()
            reconstruct_dataset(fed.dataset("recon"))  # first pass, untimed: every later one is forced
            advance(1)
            startup: dict[str, float] = {}
            pools = {}
            for n in (1, 2):
                t0 = time.perf_counter()
                pools[n] = PoolExecutor(n)
                for _ in pools[n].run(_noop, [(i,) for i in range(n)]):
                    pass
                startup[f"pool {n}"] = time.perf_counter() - t0
                advance(1)
            t0 = time.perf_counter()
            cluster = local_cluster(2, dashboard=False)
            from distributed import Client

            client = Client(cluster)
            client.wait_for_workers(2)
            cluster_ex = DaskExecutor(client, name="LocalCluster 2")
            for _ in cluster_ex.run(_noop, [(0,), (1,)]):
                pass
            startup["LocalCluster 2"] = time.perf_counter() - t0
            advance(1)
        try:
            outcome = _measure(fed, root, events, analysis_events, repeat, pools, cluster_ex, startup, bars)
        finally:
            client.close()
            cluster.close()
            fed.close()
    return outcome


def _measure(fed: Any, root: Path, events: int, analysis_events: int, repeat: int, pools: dict[int, PoolExecutor],
             cluster_ex: DaskExecutor, startup: dict[str, float], bars: Bars) -> Outcome:
    from giod.analysis import dijet

    runners: dict[str, Any] = {"pool 1": pools[1], "pool 2": pools[2], "LocalCluster 2": cluster_ex}
    measured: dict[tuple[str, str], Measured] = {}
    answers: dict[tuple[str, str], Any] = {}

    def keep(key: tuple[str, str], seconds: float, report: Any, answer: Any) -> float:
        m = measured.setdefault(key, Measured([], []))
        m.seconds.append(seconds)
        m.reports.append(report)
        answers[key] = answer
        return seconds

    def serial_dijet(i: int) -> float:
        start = time.perf_counter()
        h = dijet.mass_histogram()
        for chunk in fed.dataset("syn").select().iterate(JETS, step_size=analysis_events):
            dijet.fill(h, chunk, "jets")
        return keep(("dijet", "serial"), time.perf_counter() - start, None, h) if i >= 0 else 0.0

    def serial_scan(i: int) -> float:
        start = time.perf_counter()
        n = sum(len(c) for c in fed.dataset("syn").select().iterate(None, step_size=analysis_events))
        return keep(("scan", "serial"), time.perf_counter() - start, None, n) if i >= 0 else 0.0

    def serial_recon(i: int) -> float:
        start = time.perf_counter()
        reconstruct_dataset(fed.dataset("recon"), force=True)
        return keep(("recon", "serial"), time.perf_counter() - start, None, None) if i >= 0 else 0.0

    def mapped(workload: str, name: str, fn: Callable[[ak.Array], Any], columns: Sequence[str] | None):
        def clock(i: int) -> float:
            start = time.perf_counter()
            answer, report = giod.distributed.map_selection(fed.dataset("syn").select(), fn, columns=columns,
                                                  scheduler=runners[name], report=True)
            return keep((workload, name), time.perf_counter() - start, report, answer) if i >= 0 else 0.0

        return clock

    def recon(name: str):
        def clock(i: int) -> float:
            ex = runners[name]
            start = time.perf_counter()
            reconstruct_dataset(fed.dataset("recon"), force=True, scheduler=ex)
            seconds = time.perf_counter() - start
            return keep(("recon", name), seconds, (list(ex.timings), ex.n_workers), None) if i >= 0 else 0.0

        return clock

    clocks: dict[tuple[str, str], Callable[[int], float]] = {("dijet", "serial"): serial_dijet}
    clocks.update({("dijet", n): mapped("dijet", n, dijet_histogram, JETS) for n in runners})
    clocks[("scan", "serial")] = serial_scan
    clocks.update({("scan", n): mapped("scan", n, count, None) for n in ("pool 2", "LocalCluster 2")})
    clocks[("recon", "serial")] = serial_recon
    clocks.update({("recon", n): recon(n) for n in runners})
    recon_ds = fed.dataset("recon").pinned()
    memory_calls = [(Target.of(fed.store), "recon", int(recon_ds.version), tuple(recon_ds.databases()), i)
                    for i in range(len(recon_ds.databases()))]

    def in_memory(name: str):
        def clock(i: int) -> float:
            start = time.perf_counter()
            if name == "serial":
                n = sum(recon_in_memory(*call) for call in memory_calls)
            else:
                n = sum(v for _, v in pools[2].run(recon_in_memory, memory_calls))
            return keep((MEMORY, name), time.perf_counter() - start, None, n) if i >= 0 else 0.0

        return clock

    clocks.update({(MEMORY, n): in_memory(n) for n in ("serial", "pool 2")})
    with bars.task("measuring (every run in turn)", (repeat + 1) * len(clocks)) as advance:
        round_robin(clocks, repeat, warmup=1, advance=advance)
        advance(len(clocks))

    # the answers do not depend on the scheduler
    identical = all(
        np.array_equal(answers[("dijet", n)].view(flow=True), answers[("dijet", "serial")].view(flow=True))
        for n in runners) and all(answers[("scan", n)] == analysis_events for n in ("pool 2", "LocalCluster 2"))

    syn_bytes = _projected_bytes(fed, fed.dataset("syn"), JETS)
    scan_bytes = _projected_bytes(fed, fed.dataset("syn"), None)
    recon_dbs = fed.dataset("recon").databases()
    recon_bytes = statistics.mean(db.bytes for db in recon_dbs)
    rows = _rows(measured, {"dijet": analysis_events, "scan": analysis_events, "recon": events, MEMORY: events})
    open_s, catalog_s = _catalog_visit(str(root), "recon")
    sched_rate = _noop_rate(cluster_ex)
    costs = _costs(measured, rows, syn_bytes, scan_bytes, recon_bytes, events, open_s, catalog_s, sched_rate)
    model_rows = []
    for workload, c in costs.items():
        for w in MODEL_WORKERS:
            for n in MODEL_SITES:
                m = model(c, w, n, SITE_BANDWIDTH)
                sim = simulate_job(c, w, n, SITE_BANDWIDTH, TASKS_PER_WORKER * w)
                model_rows.append({"workload": workload, "workers": w, "sites": n, **m, "simulated": sim})
    notes = _notes(rows, measured, costs, startup, identical, syn_bytes, scan_bytes, events, analysis_events,
                   open_s, catalog_s, sched_rate, model_rows)
    cost_rows = [{"workload": k, **{f: _finite(getattr(c, f)) for f in c.__dataclass_fields__}}
                 for k, c in costs.items()]
    return Outcome(
        name="scale",
        parameters={"events": events, "analysis_events": analysis_events, "repeat": repeat,
                    "analysis_databases": ANALYSIS_DATABASES, "recon_databases": len(recon_dbs),
                    "site_bandwidth": SITE_BANDWIDTH, "tasks_per_worker": TASKS_PER_WORKER,
                    "startup_s": startup, "identical": identical},
        tables=[
            Table("results", "events/s serially, on a local pool and on a LocalCluster (median)", COLUMNS, rows),
            Table("costs", "measured per-task costs (LocalCluster 2) fed to the model", COST_COLUMNS, cost_rows),
            Table("model", f"predicted events/s: W workers, N sites of {SITE_BANDWIDTH / MB:,.0f} MB/s "
                  f"({TASKS_PER_WORKER} tasks per worker)", MODEL_COLUMNS, model_rows),
        ],
        notes=notes,
    )


def _finite(v: float) -> float | None:
    """JSON has no infinity: an unbounded rate is stored as null."""
    return None if isinstance(v, float) and math.isinf(v) else v


def _rows(measured: dict[tuple[str, str], Measured], events: dict[str, int]) -> list[dict[str, Any]]:
    rows = []
    for (workload, name), m in measured.items():
        median = statistics.median(m.seconds)
        row: dict[str, Any] = {"workload": workload, "run": name, "median_s": median, "seconds": m.seconds,
                               "events_per_s": events[workload] / median}
        busy, cpu, user, sched, overhead, tasks, workers = _shares(m)
        row.update(busy=busy, cpu=cpu, user=user, sched=sched, overhead_ms=overhead, tasks=tasks, workers=workers)
        rows.append(row)
    for r in rows:
        base = next(s for s in rows if s["workload"] == r["workload"] and s["run"] == "serial")
        r["speed_up"] = ratio(r["events_per_s"], base["events_per_s"])
    return rows


def _shares(m: Measured) -> tuple[Any, ...]:
    """Medians over the repeats: busy, CPU and user shares, scheduling overhead share, overhead per task.

    The scheduling overhead is the part of the job's wall time not spent in
    the tasks of its busiest worker (planning, dispatch, results coming
    back, start-up); idling while another worker finishes is not counted.
    """
    if m.reports[0] is None:
        return None, None, None, None, None, None, 1
    busy, cpu, user, sched, per_task = [], [], [], [], []
    tasks = workers = 0
    for seconds, rep in zip(m.seconds, m.reports, strict=True):
        if isinstance(rep, MapReport):
            runs = [(t.worker, t.wall_s, t.cpu_s, t.user_s) for t in rep.tasks]
            workers = rep.workers
        else:
            timings: list[TaskTiming] = rep[0]
            # the reconstruction task is user code through and through (its I/O included)
            runs = [(t.worker, t.wall_s, t.cpu_s, t.wall_s) for t in timings]
            workers = rep[1]
        capacity = workers * seconds
        tasks = len(runs)
        by_worker: dict[str, list[float]] = {}
        for w, wall, _, _ in runs:
            by_worker.setdefault(w, []).append(wall)
        critical = max(by_worker.values(), key=sum)
        busy.append(sum(r[1] for r in runs) / capacity)
        cpu.append(sum(r[2] for r in runs) / capacity)
        user.append(sum(r[3] for r in runs) / capacity)
        sched.append(max(0.0, seconds - sum(critical)) / seconds)
        per_task.append(1e3 * max(0.0, seconds - sum(critical)) / len(critical))
    return (statistics.median(busy), statistics.median(cpu), statistics.median(user), statistics.median(sched),
            statistics.median(per_task), tasks, workers)


def _costs(measured: dict[tuple[str, str], Measured], rows: list[dict[str, Any]], syn_bytes: dict[int, int],
           scan_bytes: dict[int, int], recon_bytes: float, events: int, open_s: float, catalog_s: float,
           sched_rate: float) -> dict[str, Costs]:
    out = {}
    for workload in ("dijet", "scan", "recon"):
        m = measured[(workload, "LocalCluster 2")]
        row = next(r for r in rows if r["workload"] == workload and r["run"] == "LocalCluster 2")
        rep = m.reports[m.seconds.index(sorted(m.seconds)[len(m.seconds) // 2])]
        if isinstance(rep, MapReport):
            tasks = rep.tasks
            n = len(tasks)
            per_events = sum(t.events for t in tasks) / n
            reads = [t.read_s for t in tasks]
            compute = statistics.mean(t.wall_s - t.read_s - t.catalog_s for t in tasks)
            size = statistics.mean((syn_bytes if workload == "dijet" else scan_bytes).values())
            disk = size / statistics.mean(reads) if statistics.mean(reads) > 0 else math.inf
            visit_tasks = float(TASKS_PER_WORKER)
        else:
            timings = rep[0]
            n = len(timings)
            per_events = events / n
            compute = statistics.mean(t.wall_s for t in timings)
            size = recon_bytes
            disk = math.inf  # its reading is inside the compute time measured
            visit_tasks = float(TASKS_PER_WORKER)
        out[workload] = Costs(events=per_events, compute_s=compute, bytes=size, overhead_s=row["overhead_ms"] / 1e3,
                              open_s=open_s, catalog_s=catalog_s, tasks_per_visit=visit_tasks,
                              scheduler_rate=sched_rate, disk_rate=disk)
    return out


def _notes(rows: list[dict[str, Any]], measured: Any, costs: dict[str, Costs], startup: dict[str, float],
           identical: bool, syn_bytes: dict[int, int], scan_bytes: dict[int, int], events: int,
           analysis_events: int, open_s: float, catalog_s: float, sched_rate: float,
           model_rows: list[dict[str, Any]]) -> list[str]:
    def row(workload: str, name: str) -> dict[str, Any]:
        return next(r for r in rows if r["workload"] == workload and r["run"] == name)

    recon2 = max(row("recon", "pool 2")["speed_up"] or 0, row("recon", "LocalCluster 2")["speed_up"] or 0)
    ceiling = row(MEMORY, "pool 2")["speed_up"] or math.nan
    scan_mb = statistics.mean(scan_bytes.values()) / MB
    scan_over = row("scan", "LocalCluster 2")["sched"]
    notes = [
        f"dijet and scan: {analysis_events:,} synthetic events in {ANALYSIS_DATABASES} databases; dijet reads "
        f"{statistics.mean(syn_bytes.values()) / MB:.1f} MB of jet columns per database, scan "
        f"{scan_mb:.0f} MB (every column); recon: {events:,} simulated events in {RECON_DATABASES} databases",
        f"answers identical on every scheduler (histograms bit for bit, event counts): {'yes' if identical else 'NO'}",
        "start-up, before the clocks: " + ", ".join(f"{k} {v:.1f} s" for k, v in startup.items())
        + "; a pool is kept between jobs, a LocalCluster too when the caller keeps its client",
        f"reconstruction with 2 workers: {recon2:.2f}× serial (target ≥ {SPEEDUP_TARGET}×: "
        f"{'met' if recon2 >= SPEEDUP_TARGET else 'missed'}); {os.cpu_count()} CPUs on this machine, "
        "shared with whatever else runs on it",
        f"the machine's ceiling: the same reconstruction on events held in memory (no reading, writing or "
        f"catalog) runs {ceiling:.2f}× faster on 2 processes than on 1; the giod pass reaches "
        f"{recon2 / ceiling:.0%} of that",
        f"scheduling overhead on the LocalCluster for partitions of {scan_mb:.0f} MB: {scan_over:.1%} of the "
        f"job's time beyond its busiest worker's tasks (target ≤ {OVERHEAD_TARGET:.0%} for partitions ≥ "
        f"{BIG_PARTITION / MB:.0f} MB: "
        + ("met" if scan_over <= OVERHEAD_TARGET and scan_mb * MB >= BIG_PARTITION else
           "missed" if scan_mb * MB >= BIG_PARTITION else "partitions below 100 MB at this size") + ")",
        f"catalog visit (SQLite): opening {1e3 * open_s:.1f} ms in the worker, queries (dataset, database) "
        f"{1e3 * catalog_s:.1f} ms, taken as served one at a time by a shared catalog; Dask scheduler: "
        f"{sched_rate:,.0f} no-op tasks/s on this machine",
    ]
    for workload in ("dijet", "recon"):
        for w in (100, 1000):
            one = next(r for r in model_rows if r["workload"] == workload and r["workers"] == w and r["sites"] == 1)
            many = next(r for r in model_rows if r["workload"] == workload and r["workers"] == w
                        and r["sites"] == MODEL_SITES[-1])
            notes.append(f"model, {workload}, {w} workers: {one['events_per_s']:,.0f} events/s from 1 site "
                         f"(limit: {one['limit']}), {many['events_per_s']:,.0f} from {MODEL_SITES[-1]} sites "
                         f"(limit: {many['limit']})")
    check = next(r for r in model_rows if r["workload"] == "recon" and r["workers"] == 2 and r["sites"] == 1)
    notes.append(f"model check: recon with 2 workers predicted {check['events_per_s']:,.0f} events/s, measured "
                 f"{row('recon', 'LocalCluster 2')['events_per_s']:,.0f} on the LocalCluster")
    return notes


COLUMNS = [
    Column("workload", "workload"), Column("run", "run"), Column("workers", "workers"),
    Column("tasks", "tasks"), Column("median_s", "median s", "{:.2f}"),
    Column("events_per_s", "events/s", "{:,.0f}"), Column("speed_up", "× serial", "{:.2f}"),
    Column("busy", "busy", "{:.0%}"), Column("cpu", "CPU", "{:.0%}"), Column("user", "user code", "{:.0%}"),
    Column("sched", "sched. overhead", "{:.1%}"), Column("overhead_ms", "overhead ms/task", "{:.1f}"),
]  # fmt: skip

COST_COLUMNS = [
    Column("workload", "workload"), Column("events", "events/task", "{:,.0f}"),
    Column("compute_s", "compute s/task", "{:.3f}"), Column("bytes", "bytes/task", "{:,.0f}"),
    Column("overhead_s", "overhead s/task", "{:.4f}"), Column("open_s", "open s/visit", "{:.4f}"),
    Column("catalog_s", "queries s/visit", "{:.4f}"),
    Column("tasks_per_visit", "tasks/visit", "{:.0f}"), Column("scheduler_rate", "scheduler tasks/s", "{:,.0f}"),
    Column("disk_rate", "disk B/s", "{:,.0f}"),
]  # fmt: skip

MODEL_COLUMNS = [
    Column("workload", "workload"), Column("workers", "workers"), Column("sites", "sites"),
    Column("events_per_s", "events/s (model)", "{:,.0f}"), Column("simulated", "events/s (simulated)", "{:,.0f}"),
    Column("limit", "limited by"),
]  # fmt: skip


def plot(outcome: Outcome, path: Path) -> None:
    """Measured events/s per workload and run; predicted events/s against workers, per number of sites."""
    rows = outcome.table("results").rows
    model_rows = outcome.table("model").rows
    fig, (ax, ax2) = figure("giod on Dask: measured (median) and predicted throughput", ncols=2)
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    runs = list(dict.fromkeys(r["run"] for r in rows))
    width = 0.8 / len(runs)
    for k, name in enumerate(runs):
        heights = []
        for w in workloads:
            r = next((x for x in rows if x["workload"] == w and x["run"] == name), None)
            serial = next(x for x in rows if x["workload"] == w and x["run"] == "serial")
            heights.append(r["events_per_s"] / serial["events_per_s"] if r else float("nan"))
        ax.bar(np.arange(len(workloads)) + (k - (len(runs) - 1) / 2) * width, heights, width, label=name)
    ax.axhline(SPEEDUP_TARGET, linestyle="--", color="grey", label=f"target {SPEEDUP_TARGET}× (2 workers)")
    ax.set_xticks(np.arange(len(workloads)), workloads)
    ax.set_ylabel("events/s ÷ serial events/s")
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    costs = {r["workload"]: Costs(**{f: math.inf if r[f] is None else r[f] for f in Costs.__dataclass_fields__})
             for r in outcome.table("costs").rows}
    workers = np.unique(np.logspace(0, 3, 31).round().astype(int))
    for workload, style in (("dijet", "-"), ("recon", "--")):
        for n in MODEL_SITES:
            y = [model(costs[workload], int(w), n, SITE_BANDWIDTH)["events_per_s"] for w in workers]
            ax2.plot(workers, y, style, label=f"{workload}, {n} site{'s' if n > 1 else ''}")
        pts = [(r["workers"], r["events_per_s"]) for r in model_rows if r["workload"] == workload]
        ax2.plot(*zip(*pts, strict=True), "k.", markersize=4)
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("workers")
    ax2.set_ylabel("events per second (model)")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize="x-small")
    save(fig, path)

