"""A writer's whole commit cycle: many small databases, one writer each (``giod bench daq --commits``).

``writers`` forked processes each run their share of ``commits`` cycles of
``with ds.writer() as w: w.append(events)`` with ``EVENTS`` synthetic events:
the lease, every container file written, fsync'd and renamed, the folders
synced, the catalog commit and the lease released, as a DAQ writer that
commits every second pays them. Reported: commits per second from the first
writer's start to the last writer's end, and the CPU time of one commit (the
writers' CPU over the commits), beside the goal (``GOAL`` commits/s with 8
writers on 2 cores).
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import giod
from giod.errors import ConfigError, StorageError
from giod.testing import synthetic

__all__ = ["EVENTS", "GOAL", "cycle"]

EVENTS = 10  # events per commit: a DAQ writer that commits every second at a low rate
GOAL = 500.0  # commits per second, 8 writers on 2 cores
_TIMEOUT = 3600.0


def _now() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)  # one clock for every process of the machine


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _writer_main(root: str, commits: int, seed: int, barrier: Any, results: Any) -> None:
    try:
        events = synthetic.events(EVENTS, seed=seed)
        fed = giod.open(root, create=False)
        ds = fed.dataset("commits")
        with ds.writer() as w:  # the first write of a process imports what writing needs: not timed
            w.append(events)
        barrier.wait(_TIMEOUT)
        began, cpu = _now(), _cpu()
        for _ in range(commits):
            with ds.writer() as w:
                w.append(events)
        ended, cpu = _now(), _cpu() - cpu
        fed.close()
        results.put((began, ended, cpu, ""))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises
        barrier.abort()
        results.put((0.0, 0.0, 0.0, f"{type(exc).__name__}: {exc}"))


def cycle(commits: int, writers: int, workdir: str | Path | None = None) -> dict[str, float]:
    """One measurement in a fresh federation: ``commits`` commits of ``EVENTS`` events by ``writers``
    processes. ``{"seconds", "commits_per_s", "cpu_ms_per_commit"}``."""
    if commits < writers or writers < 1:
        raise ConfigError(f"{writers} writers need at least as many commits (got {commits})")
    if "fork" not in mp.get_all_start_methods():
        raise ConfigError("the commit cycle needs the 'fork' start method (Linux or macOS)")
    ctx = mp.get_context("fork")
    tmp = Path(tempfile.mkdtemp(prefix="giod-bench-commits-", dir=workdir))
    try:
        root = tmp / "fed"
        with giod.open(root, create=True) as fed:
            fed.create_dataset("commits", synthetic.schema())
        shares = [commits // writers + (k < commits % writers) for k in range(writers)]
        barrier = ctx.Barrier(writers)
        results = ctx.Queue()
        procs = [ctx.Process(target=_writer_main, daemon=True, args=(str(root), shares[k], k, barrier, results))
                 for k in range(writers)]
        try:
            for p in procs:
                p.start()
            reports = [results.get(timeout=_TIMEOUT) for _ in procs]
            for p in procs:
                p.join()
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
                    p.join()
        failures = [r[3] for r in reports if r[3]]
        if failures:
            raise StorageError(f"a writer process failed: {failures[0]}")
        with giod.open(root, create=False) as fed:
            committed = len(fed.dataset("commits").databases())
        if committed != commits + writers:
            raise StorageError(f"{committed} databases committed, {commits + writers} written")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    seconds = max(r[1] for r in reports) - min(r[0] for r in reports)
    return {"seconds": seconds, "commits_per_s": commits / seconds,
            "cpu_ms_per_commit": 1000 * sum(r[2] for r in reports) / commits}
