"""Simulation benchmark: generation, detector simulation and storage of raw events, beside storage alone.

For the built-in generator, and for Pythia 8 when ``pythia8mc`` can be
imported, each round times, every measurement once:

* ``simulate_into``: :func:`giod.physics.chain.simulate_into` end to end,
  into a fresh federation: generate, simulate and store the raw containers;
* the same chain with its phases timed one by one (wall and CPU seconds):
  generation, detector simulation, and storage (creating the dataset, the
  writer's appends and its commit);
* ``store only``: the same raw events, generated and simulated before the
  clocks start, written by the same writer in the same batches: the rate the
  chain would reach if generation and simulation were free.
"""

from __future__ import annotations

import importlib
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import giod
from giod.errors import ConfigError
from giod.physics.chain import RAW_COLLECTIONS, SIMULATE_PROGRAM, simulate_into
from giod_bench.recon import Phases
from giod_bench.report import MB, Bars, Column, Outcome, Table, Timing, figure, grouped_bars, ratio, round_robin, save

__all__ = ["DEFAULT_EVENTS", "PHASES", "QUICK_EVENTS", "generators", "plot", "run"]

DEFAULT_EVENTS = 4_000
QUICK_EVENTS = 200
BATCH = 2_000  # simulate_into's default
SEED = 2025
PTHAT_MIN = 50.0  # simulate_into's default
PHASES = {"generate": "generation", "simulate": "detector simulation", "store": "storage (append + commit)"}
_PYTHIA_MISSING = "Pythia left out: pythia8mc is not installed (it comes with giod's 'pythia' extra)"


def generators() -> tuple[list[str], list[str]]:
    """The generators this machine can run, and notes on those it cannot."""
    try:
        importlib.import_module("pythia8mc")
    except ImportError:
        return ["builtin"], [_PYTHIA_MISSING]
    return ["builtin", "pythia"], []


def _batches(n_events: int, generator: str) -> list[Any]:
    """Raw events made as ``simulate_into`` makes them: same seeds, same batches."""
    from giod.physics.detector import Detector
    from giod.physics.generator import generate
    from giod.physics.simulate import simulate

    detector = Detector.load()
    out = []
    for k, start in enumerate(range(0, n_events, BATCH)):
        n = min(BATCH, n_events - start)
        gen_seed, sim_seed = (int(s) for s in np.random.SeedSequence([SEED, k]).generate_state(2))
        truth = generate(n, seed=gen_seed, pthat_min=PTHAT_MIN, generator=generator, first_event=start)
        out.append(simulate(truth, detector, seed=sim_seed)[list(RAW_COLLECTIONS)])
    return out


def _store(fed: Any, name: str, batches: list[Any], generator: str) -> Any:
    """Write ``batches`` as ``simulate_into`` does: one writer, one append per batch."""
    from giod.physics.layout import model_text
    from giod.schema import Schema

    ds = fed.create_dataset(name, Schema.from_yaml(model_text()))
    parameters = {"seed": SEED, "pthat_min": PTHAT_MIN, "pileup": 0.0, "generator": generator, "run": 1}
    with ds.writer(program=SIMULATE_PROGRAM, program_version=giod.__version__, parameters=parameters) as writer:
        for events in batches:
            writer.append(events)
    return ds


def _timed_chain(fed: Any, n_events: int, generator: str, phases: Phases) -> None:
    """The chain of ``simulate_into``, generating and simulating each batch and storing it at once."""
    from giod.physics.detector import Detector
    from giod.physics.generator import generate
    from giod.physics.layout import model_text
    from giod.physics.simulate import simulate
    from giod.schema import Schema

    with phases("simulate"):
        detector = Detector.load()
    with phases("store"):
        ds = fed.create_dataset(generator, Schema.from_yaml(model_text()))
        parameters = {"seed": SEED, "pthat_min": PTHAT_MIN, "pileup": 0.0, "generator": generator, "run": 1}
        writer = ds.writer(program=SIMULATE_PROGRAM, program_version=giod.__version__, parameters=parameters)
    with writer:
        for k, start in enumerate(range(0, n_events, BATCH)):
            n = min(BATCH, n_events - start)
            gen_seed, sim_seed = (int(s) for s in np.random.SeedSequence([SEED, k]).generate_state(2))
            with phases("generate"):
                truth = generate(n, seed=gen_seed, pthat_min=PTHAT_MIN, generator=generator, first_event=start)
            with phases("simulate"):
                events = simulate(truth, detector, seed=sim_seed)
            with phases("store"):
                writer.append(events[list(RAW_COLLECTIONS)])
        with phases("store"):
            writer.commit()


def run(
    events: int = DEFAULT_EVENTS,
    repeat: int = 3,
    workdir: str | os.PathLike[str] | None = None,
    bars: Bars | None = None,
) -> Outcome:
    """Measure generation + simulation + storage, its phases, and storage alone, for each generator."""
    if events < 1 or repeat < 1:
        raise ConfigError("events and repeat must be positive")
    bars = bars or Bars(enabled=False)
    names, notes = generators()
    with tempfile.TemporaryDirectory(prefix="giod-bench-simulate-", dir=workdir) as tmp:
        work = Path(tmp)
        stored: dict[str, int] = {}
        prepared: dict[str, list[Any]] = {}
        with bars.task("generating and simulating the events to store", len(names)) as advance:
            for g in names:
                prepared[g] = _batches(events, g)  # also the untimed first call of everything
                advance(1)

        def in_fresh_federation(key: str, work_fn: Callable[[Any], Any]) -> Callable[[int], float]:
            """A clock running ``work_fn(fed)`` in a new federation, removed afterwards (outside the clock)."""

            def clock(i: int) -> float:
                root = work / f"{key}-{i}"
                fed = giod.open(root, create=True)
                try:
                    start = time.perf_counter()
                    work_fn(fed)
                    return time.perf_counter() - start
                finally:
                    fed.close()
                    shutil.rmtree(root)

            return clock

        splits: dict[str, list[Phases]] = {g: [] for g in names}

        def chain(g: str) -> Callable[[Any], Any]:
            return lambda fed: simulate_into(fed, g, events, seed=SEED, batch=BATCH, pthat_min=PTHAT_MIN, generator=g)

        def timed(g: str) -> Callable[[Any], Any]:
            def fn(fed: Any) -> None:
                phases = Phases()
                _timed_chain(fed, events, g, phases)
                splits[g].append(phases)

            return fn

        def store(g: str) -> Callable[[Any], Any]:
            def fn(fed: Any) -> None:
                stored[g] = int(_store(fed, g, prepared[g], g).summary()["bytes"])

            return fn

        clocks: dict[tuple[str, str], Callable[[int], float]] = {}
        for g in names:
            clocks[(g, "chain")] = in_fresh_federation(f"{g}-chain", chain(g))
            clocks[(g, "timed")] = in_fresh_federation(f"{g}-timed", timed(g))
            clocks[(g, "store")] = in_fresh_federation(f"{g}-store", store(g))
        with bars.task("simulating and storing (every measurement in turn)", repeat * len(clocks)) as advance:
            timings = round_robin(clocks, repeat, advance=advance)
    rows = [r for g in names for r in _rows(g, timings, events, stored[g])]
    phases = [r for g in names for r in _phase_rows(g, splits[g], events)]
    for g in names:
        share = {p["phase"]: p["wall_share"] for p in phases if p["generator"] == g}
        chain_row = next(r for r in rows if r["generator"] == g and r["run"] == "simulate_into")
        notes.append(
            f"{g}: the chain runs at {chain_row['vs_storage']:.2f}× the storage limit; of its wall time "
            + ", ".join(f"{PHASES[p]} {share[p]:.0%}" for p in PHASES)
        )
    from giod.physics.detector import Detector

    x0 = Detector.load().material_at_normal_incidence()
    for g in names:
        sim = next(p for p in phases if p["generator"] == g and p["phase"] == "simulate")
        notes.append(
            f"{g}: detector simulation alone {events / sim['cpu_s']:,.0f} events per CPU-second, with the tracker's "
            f"material on (x/X0 = {x0:.2f} at η = 0: multiple scattering, ionisation, bremsstrahlung at every "
            "crossing)"
        )
    notes.append(
        f"{events:,} events (hard QCD, pT-hat > {PTHAT_MIN:g} GeV, no pile-up) in batches of {BATCH:,}, "
        f"raw containers: {', '.join(RAW_COLLECTIONS)}; each measurement writes into a fresh federation; median of "
        f"{repeat} rounds, every measurement once per round"
    )
    return Outcome(
        name="simulate",
        parameters={"events": events, "repeat": repeat, "batch": BATCH, "seed": SEED, "pthat_min": PTHAT_MIN,
                    "generators": names},
        tables=[
            Table("results", f"simulation: {events:,} events generated, simulated and stored", COLUMNS, rows),
            Table("phases", "where the chain spends its time (phases timed in one process)", PHASE_COLUMNS, phases),
        ],
        notes=notes,
    )


def _rows(g: str, timings: dict[tuple[str, str], Timing], events: int, stored: int) -> list[dict[str, Any]]:
    labels = {"chain": "simulate_into", "timed": "simulate_into, phases timed",
              "store": "store only (already simulated)"}
    rows = []
    for key, label in labels.items():
        t = timings[(g, key)]
        rows.append({"generator": g, "run": label, "median_s": t.median, "best_s": t.best, "timing": t.as_dict(),
                     "events_per_s": events / t.median, "stored_mb": stored / MB,
                     "mb_per_s": stored / MB / t.median, "kb_per_event": stored / 1e3 / events})
    limit = float(rows[-1]["events_per_s"])  # type: ignore[arg-type]
    for r in rows:
        r["vs_storage"] = ratio(float(r["events_per_s"]), limit)  # type: ignore[arg-type]
    return rows


def _phase_rows(g: str, splits: list[Phases], events: int) -> list[dict[str, Any]]:
    wall = {p: statistics.median(s.wall[p] for s in splits) for p in PHASES}
    cpu = {p: statistics.median(s.cpu[p] for s in splits) for p in PHASES}
    total_wall, total_cpu = sum(wall.values()), sum(cpu.values())
    return [
        {"generator": g, "phase": p, "what": label, "wall_s": wall[p], "cpu_s": cpu[p],
         "wall_share": wall[p] / total_wall, "cpu_share": cpu[p] / total_cpu,
         "events_per_s": events / wall[p] if wall[p] > 0 else None}
        for p, label in PHASES.items()
    ]


COLUMNS = [
    Column("generator", "generator"), Column("run", "run"), Column("median_s", "median s", "{:.2f}"),
    Column("events_per_s", "events/s", "{:,.0f}"), Column("mb_per_s", "stored MB/s", "{:.1f}"),
    Column("kb_per_event", "stored kB/event", "{:.1f}"), Column("vs_storage", "× storage limit", "{:.2f}"),
]  # fmt: skip

PHASE_COLUMNS = [
    Column("generator", "generator"), Column("what", "phase"), Column("wall_s", "wall s", "{:.2f}"),
    Column("cpu_s", "CPU s", "{:.2f}"), Column("events_per_s", "events/s alone", "{:,.0f}"),
    Column("wall_share", "share of wall", "{:.1%}"), Column("cpu_share", "share of CPU", "{:.1%}"),
]  # fmt: skip


def plot(outcome: Outcome, path: Path) -> None:
    """Events per second of the chain and of storage alone; and the chain split into its phases."""
    rows = outcome.table("results").rows
    gens = list(dict.fromkeys(r["generator"] for r in rows))
    runs = list(dict.fromkeys(r["run"] for r in rows))
    rate = {(r["generator"], r["run"]): r["events_per_s"] for r in rows}
    fig, (ax, ax2) = figure("giod simulation: generate + simulate + store (median)", ncols=2)
    grouped_bars(ax, gens, {run: [rate.get((g, run)) for g in gens] for run in runs}, "events per second")
    phases = outcome.table("phases").rows
    bottom = np.zeros(len(gens))
    for p in PHASES:
        heights = np.array([next(r["wall_s"] for r in phases if r["generator"] == g and r["phase"] == p)
                            for g in gens])
        ax2.bar(gens, heights, bottom=bottom, label=PHASES[p])
        bottom += heights
    ax2.set_ylabel("wall seconds of the chain, phases timed")
    ax2.legend(fontsize="small")
    ax2.grid(axis="y", alpha=0.3)
    save(fig, path)
