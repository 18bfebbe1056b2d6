"""DAQ benchmark: aggregate write rate of concurrent writer processes (the GIOD DAQ test).

1, 2, 4, 8 writer processes each write their share of the same synthetic
events through their own ``ds.writer()``, once with the multi-container model,
once with it written size first (``min_savings=0``: every container compressed)
and once with a one-container variant of it. Beside them, in the same run:
the raw disk (``dd`` with ``conv=fdatasync``) and one process writing the
same events with plain pyarrow Parquet (the same Parquet settings as giod),
uproot TTree and uproot RNTuple (zstd level 1). With ``commits``, a writer's
whole commit cycle too: many small databases, one writer each
(:mod:`giod_bench.commitcycle`). Rates are payload MB/s, the
payload being the uncompressed Arrow bytes of the events; every file is
fsync'ed before the clock stops, as giod's are.

The peer writers live in :mod:`giod_bench.peerwriters`;
:mod:`giod_bench.read` reuses them to write its peer files.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import yaml

import giod
from giod.columns import containers_in, to_tables
from giod.errors import ConfigError, StorageError
from giod.schema import Schema
from giod.testing import synthetic
from giod_bench import commitcycle
from giod_bench.peerwriters import (  # noqa: F401 - ZSTD_LEVEL, _slice: re-exported
    ZSTD_LEVEL,
    _slice,
    peer_chunk,
    raw_disk_seconds,
    rntuple_supported,
    ttree_arrays,
    write_parquet,
    write_rntuple,
    write_ttree,
)
from giod_bench.report import (
    MB,
    Bars,
    Column,
    Outcome,
    Table,
    Timing,
    figure,
    ratio,
    round_robin,
    save,
)

__all__ = [
    "DEFAULT_EVENTS",
    "QUICK_EVENTS",
    "WRITERS",
    "one_container_schema",
    "payload_bytes",
    "peer_chunk",
    "plot",
    "raw_disk_seconds",
    "rntuple_supported",
    "run",
    "ttree_arrays",
    "write_concurrently",
    "write_parquet",
    "write_rntuple",
    "write_ttree",
]

DEFAULT_EVENTS = 200_000
QUICK_EVENTS = 2_000
WRITERS = (1, 2, 4, 8)
BATCH_EVENTS = 10_000  # events per append: what an event builder hands a writer at once
DD = "dd (raw disk)"
MULTI = "giod multi-container"
SIZE_FIRST = "giod multi-container, size first"
ONE = "giod one-container"
RNTUPLE = "uproot RNTuple"
#: the writer settings of each giod model
MODEL_SETTINGS: dict[str, dict[str, Any]] = {MULTI: {}, SIZE_FIRST: {"min_savings": 0.0}, ONE: {}}
_WRITER_TIMEOUT = 3600.0
COMMIT_WRITERS = 8  # the setting: 8 writers committing small databases on 2 cores


# ------------------------------------------------------------------ models


def one_container_schema() -> Schema:
    """The synthetic model without ``containers``: every collection in container ``events``."""
    text = resources.files("giod.testing").joinpath("synthetic.yaml").read_text()
    model = yaml.safe_load(text)
    model.pop("containers", None)
    model["name"] = f"{model['name']}_one_container"
    return Schema.from_dict(model, source="synthetic.yaml without containers")


def payload_bytes(events: ak.Array, schema: Schema) -> int:
    """Uncompressed Arrow bytes of ``events`` as giod stores them."""
    tables = to_tables(events, schema, containers_in(events, schema))
    return sum(t.nbytes for t in tables.values())


# ---------------------------------------------------------- giod writers

_SHARED: dict[str, ak.Array] = {}  # the events, inherited by forked writer processes


def _now() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)  # one clock for every process of the machine


def _writer_main(root: str, dataset: str, start: int, stop: int, batch: int, barrier: Any, results: Any,
                 settings: dict[str, Any]) -> None:
    try:
        events = _SHARED["events"]
        fed = giod.open(root, create=False)
        ds = fed.dataset(dataset)
        parts = [events[i : min(i + batch, stop)] for i in range(start, stop, batch)]
        barrier.wait(_WRITER_TIMEOUT)
        began = _now()
        with ds.writer(**settings) as w:
            for part in parts:
                w.append(part)
        ended = _now()
        fed.close()
        results.put((began, ended, ""))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises
        barrier.abort()
        results.put((0.0, 0.0, f"{type(exc).__name__}: {exc}"))


def write_concurrently(root: Path, dataset: str, events: ak.Array, n_writers: int, batch: int = BATCH_EVENTS,
                       settings: dict[str, Any] | None = None) -> float:
    """Seconds from the first writer's start to the last writer's commit.

    ``n_writers`` processes each append their contiguous share of ``events``
    to ``dataset`` through their own writer (``ds.writer(**settings)``). The
    processes are forked so that they share the events without copying them.
    """
    if "fork" not in mp.get_all_start_methods():
        raise ConfigError("the DAQ benchmark needs the 'fork' start method (Linux or macOS)")
    ctx = mp.get_context("fork")
    bounds = np.linspace(0, len(events), n_writers + 1).astype(int)
    barrier = ctx.Barrier(n_writers)
    results = ctx.Queue()
    _SHARED["events"] = events
    procs = [
        ctx.Process(
            target=_writer_main,
            daemon=True,
            args=(str(root), dataset, int(bounds[k]), int(bounds[k + 1]), batch, barrier, results,
                  dict(settings or {})),
        )
        for k in range(n_writers)
    ]
    try:
        for p in procs:
            p.start()
        reports = [results.get(timeout=_WRITER_TIMEOUT) for _ in procs]
        for p in procs:
            p.join()
    finally:
        _SHARED.clear()
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    failures = [r[2] for r in reports if r[2]]
    if failures:
        raise StorageError(f"a writer process failed: {failures[0]}")
    return max(r[1] for r in reports) - min(r[0] for r in reports)


# -------------------------------------------------------------- benchmark


def _giod_run(work: Path, schema: Schema, events: ak.Array, n_writers: int, label: str,
              settings: dict[str, Any]) -> tuple[float, int]:
    """One measurement in a fresh federation, removed afterwards: (seconds, stored bytes)."""
    root = work / f"fed-{label}"
    fed = giod.open(root, create=True)
    try:
        ds = fed.create_dataset("daq", schema)
        seconds = write_concurrently(root, "daq", events, n_writers, settings=settings)
        stored = int(ds.summary()["bytes"])
        if len(ds) != len(events):
            raise StorageError(f"{len(ds)} events committed, {len(events)} written")
    finally:
        fed.close()
        shutil.rmtree(root, ignore_errors=True)
    return seconds, stored


def _row(
    label: str, writers: int, n_events: int | None, payload: int, timing: Timing, stored: int | None
) -> dict[str, Any]:
    t = timing.median
    return {
        "writer": label,
        "writers": writers,
        "events": n_events,
        "payload_mb": payload / MB,
        "stored_mb": None if stored is None else stored / MB,
        "compression": ratio(payload, stored),
        "seconds": t,
        "timing": timing.as_dict(),
        "mb_per_s": payload / MB / t,
        "events_per_s": None if n_events is None else n_events / t,
    }


def run(
    events: int = DEFAULT_EVENTS,
    writers: Sequence[int] = WRITERS,
    repeat: int = 3,
    workdir: str | os.PathLike[str] | None = None,
    bars: Bars | None = None,
    commits: int = 0,
    commit_writers: int = COMMIT_WRITERS,
) -> Outcome:
    """Measure giod's aggregate write rate beside the disk and the peer writers.

    Every configuration runs once per round, ``repeat`` rounds, so that the
    load of a shared machine falls on all of them alike. With ``commits``, the
    commit cycle too: that many small databases by ``commit_writers`` processes
    (:mod:`giod_bench.commitcycle`), ``repeat`` times.
    """
    if events < 1 or repeat < 1 or not writers or min(writers) < 1:
        raise ConfigError("events, repeat and every writer count must be positive")
    if max(writers) > events:
        raise ConfigError(f"{max(writers)} writers need at least as many events (got {events})")
    bars = bars or Bars(enabled=False)
    multi, one = synthetic.schema(), one_container_schema()
    with bars.task("generating events", 1) as advance:
        data = synthetic.events(events, seed=1)
        payload = payload_bytes(data, multi)
        flat = ttree_arrays(data, multi)
        advance(1)
    chunk = peer_chunk(events, payload)
    megabytes = max(64, int(payload / 2**20))
    notes: list[str] = []
    stored: dict[tuple[str, int], int] = {}
    with tempfile.TemporaryDirectory(prefix="giod-bench-daq-", dir=workdir) as tmp:
        work = Path(tmp)
        clocks: dict[tuple[str, int], Callable[[int], float]] = {}
        if shutil.which("dd") is None:
            notes.append("dd not found: no raw disk bandwidth")
        else:
            clocks[(DD, 1)] = lambda i: raw_disk_seconds(work / "dd.bin", megabytes) or 0.0
        for model, schema in ((MULTI, multi), (SIZE_FIRST, multi), (ONE, one)):
            for n in writers:

                def giod_clock(i: int, key: tuple[str, int] = (model, n), s: Schema = schema) -> float:
                    seconds, stored[key] = _giod_run(work, s, data, key[1], f"{key[1]}-{i}", MODEL_SETTINGS[key[0]])
                    return seconds

                clocks[(model, n)] = giod_clock
        peers: dict[str, Callable[[Path], None]] = {
            "pyarrow Parquet": lambda p: write_parquet(p, data, chunk),
            "uproot TTree": lambda p: write_ttree(p, flat, chunk),
        }
        if rntuple_supported():
            peers[RNTUPLE] = lambda p: write_rntuple(p, data, chunk)
        else:
            notes.append("this uproot cannot write RNTuple (no mkrntuple): RNTuple row left out")
        for label, write in peers.items():

            def peer_clock(i: int, key: tuple[str, int] = (label, 1), write: Callable[[Path], None] = write) -> float:
                path = work / "peer.out"
                start = time.perf_counter()
                write(path)
                seconds = time.perf_counter() - start
                stored[key] = path.stat().st_size
                path.unlink()
                return seconds

            clocks[(label, 1)] = peer_clock
        with bars.task("writing", repeat * len(clocks)) as advance:
            timings = round_robin(clocks, repeat, advance=advance)
        cycles = []
        if commits:
            with bars.task("commit cycles", repeat) as advance:
                for _ in range(repeat):
                    cycles.append(commitcycle.cycle(commits, commit_writers, work))
                    advance(1)
    rows = []
    for (label, n), timing in timings.items():
        if label == DD:
            rows.append(_row(label, 1, None, megabytes * 2**20, timing, None))
        else:
            rows.append(_row(label, n, events, payload, timing, stored[(label, n)]))
    _add_ratios(rows)
    notes.append(
        f"payload = uncompressed Arrow bytes of {events:,} synthetic events "
        f"({payload / MB:.1f} MB); peers write {chunk:,} events per row group/basket/cluster"
    )
    notes.append(
        f"median of {repeat} rounds, every configuration once per round; {os.cpu_count()} CPUs "
        "here, so more writers than CPUs measure contention, not scaling"
    )
    tables = [Table("results", f"DAQ write: {events:,} events, {payload / MB:.0f} MB payload", COLUMNS, rows)]
    if cycles:
        tables.append(_cycle_table(cycles, commits, commit_writers))
    return Outcome(
        name="daq",
        parameters={
            "events": events,
            "writers": list(writers),
            "repeat": repeat,
            "batch_events": BATCH_EVENTS,
            "peer_chunk_events": chunk,
            "zstd_level": ZSTD_LEVEL,
            "commits": commits,
            "commit_writers": commit_writers,
        },
        tables=tables,
        notes=notes,
    )


def _cycle_table(cycles: list[dict[str, float]], commits: int, writers: int) -> Table:
    """The commit cycles' medians beside the goal."""
    rate = statistics.median(c["commits_per_s"] for c in cycles)
    row = {"writers": writers, "commits": commits, "events": commitcycle.EVENTS,
           "seconds": statistics.median(c["seconds"] for c in cycles), "commits_per_s": rate,
           "cpu_ms": statistics.median(c["cpu_ms_per_commit"] for c in cycles),
           "goal": commitcycle.GOAL, "vs_goal": rate / commitcycle.GOAL,
           "runs": [c["commits_per_s"] for c in cycles]}
    return Table("commits", f"Commit cycle: {commits:,} databases of {commitcycle.EVENTS} events, "
                 f"{writers} writer processes", CYCLE_COLUMNS, [row])


CYCLE_COLUMNS = [
    Column("writers", "procs", "{:d}"), Column("commits", "commits", "{:,d}"),
    Column("events", "events each", "{:d}"), Column("seconds", "s (median)", "{:.2f}"),
    Column("commits_per_s", "commits/s", "{:,.0f}"), Column("cpu_ms", "CPU ms/commit", "{:.1f}"),
    Column("goal", "goal /s", "{:,.0f}"), Column("vs_goal", "× goal", "{:.2f}"),
]  # fmt: skip


def _add_ratios(rows: list[dict[str, Any]]) -> None:
    """Rates beside plain pyarrow, RNTuple and the disk; stored bytes beside RNTuple's (all from one run)."""
    by = {r["writer"]: r for r in rows if r["writers"] == 1}
    disk = next((r["mb_per_s"] for r in rows if r["writer"] == DD), None)
    pyarrow = by.get("pyarrow Parquet", {}).get("mb_per_s")
    rntuple = by.get(RNTUPLE, {})
    for r in rows:
        r["vs_pyarrow"] = ratio(r["mb_per_s"], pyarrow)
        r["vs_rntuple"] = ratio(r["mb_per_s"], rntuple.get("mb_per_s"))
        r["bytes_vs_rntuple"] = ratio(r["stored_mb"], rntuple.get("stored_mb"))
        r["vs_disk"] = ratio(r["mb_per_s"], disk)


COLUMNS = [
    Column("writer", "writer"), Column("writers", "procs", "{:d}"),
    Column("stored_mb", "stored MB", "{:.1f}"), Column("compression", "compr.", "{:.2f}"),
    Column("seconds", "s (median)", "{:.2f}"), Column("mb_per_s", "MB/s", "{:.0f}"),
    Column("events_per_s", "events/s", "{:,.0f}"), Column("vs_pyarrow", "× pyarrow", "{:.2f}"),
    Column("vs_rntuple", "× RNTuple", "{:.2f}"), Column("bytes_vs_rntuple", "bytes × RNTuple", "{:.3f}"),
    Column("vs_disk", "× disk", "{:.2f}"),
]  # fmt: skip


def plot(outcome: Outcome, path: Path) -> None:
    """Aggregate MB/s against writer processes, with the disk and the peers as lines."""
    rows = outcome.table("results").rows
    fig, (ax,) = figure("giod DAQ write: aggregate rate")
    for model in (MULTI, SIZE_FIRST, ONE):
        pts = [(r["writers"], r["mb_per_s"]) for r in rows if r["writer"] == model]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=model)
    for k, r in enumerate(r for r in rows if not r["writer"].startswith("giod")):
        ax.axhline(r["mb_per_s"], linestyle="--", color=f"C{k + 2}", label=f"{r['writer']} (1 proc)")
    ax.set_xscale("log", base=2)
    counts = sorted({r["writers"] for r in rows if r["writer"].startswith("giod")})
    ax.set_xticks(counts, [str(c) for c in counts])
    ax.set_yscale("log")
    ax.set_xlabel("concurrent writer processes")
    ax.set_ylabel("payload MB/s")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    save(fig, path)
