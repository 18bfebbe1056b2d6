"""``giod demo``: the main job on an embedded federation, end to end.

generate + simulate multi-jet events → store raw containers → reconstruct
(tracks, clusters, anti-kt jets, tags) as a second pass on 2 processes →
select with tags → di-jet mass histogram (PNG) → a summary table.
``--synthetic`` runs the same storage path on synthetic events instead.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import awkward as ak
import click

from giod.cli.output import OutputPath, writing
from giod.errors import ConfigError

RAW = ("hits", "cells")
RECO = ("tracks", "jets")


def _progress() -> Any:
    from giod.cli.progress import progress_bar

    return progress_bar()


SELECTION = "njets >= 2 and lead_jet_pt > 60"
PLOT = "dijet.png"


#: Left in the federation directory a demo creates: ``--force`` replaces only a directory that holds it.
MARK = ".giod-demo"


def _fresh(output: Path, force: bool = False) -> Path:
    """An empty place for the demo's federation, in ``output`` (created if missing, its parent must exist).

    What is already there is never removed unless ``force``, and then only a federation an earlier
    ``giod demo`` made (its mark says so) and the plot beside it."""
    fed_dir, png = output / "federation", output / PLOT
    taken = [p for p in (fed_dir, png) if p.is_symlink() or (p.exists() and not _empty_dir(p))]
    if taken and not force:
        raise ConfigError(f"{taken[0]} already exists: give another --output, or --force to replace "
                          "the output of an earlier giod demo")
    if fed_dir in taken and (fed_dir.is_symlink() or not (fed_dir / MARK).is_file()):
        raise ConfigError(f"{fed_dir} was not made by giod demo: --force replaces only an earlier demo's "
                          "output; give another --output, or remove it yourself")
    with writing(str(output)):
        if fed_dir in taken:
            shutil.rmtree(fed_dir)
        output.mkdir(exist_ok=True)
        fed_dir.mkdir(exist_ok=True)
        (fed_dir / MARK).write_text("made by giod demo; giod demo --force may replace this directory\n")
    return fed_dir


def _empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def run_physics_demo(output: Path, n_events: int, workers: int = 2, *, force: bool = False) -> dict[str, Any]:
    import giod
    from giod.analysis import dijet, plots
    from giod.physics.chain import reconstruct_dataset, simulate_into

    fed_dir = _fresh(output, force)
    fed = giod.open(fed_dir, create=True)
    stats: dict[str, Any] = {"events": n_events}
    with _progress() as progress:
        t0 = time.perf_counter()
        task = progress.add_task("generate + simulate + store", total=n_events)
        ds = simulate_into(fed, "qcd", n_events, seed=2026, batch=1000, database_events=max(n_events // 4, 500),
                           progress=lambda n: progress.advance(task, n))
        stats["write_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        task = progress.add_task(f"reconstruct ({workers} processes)", total=n_events)
        reconstruct_dataset(ds, workers=workers, progress=lambda n: progress.advance(task, n))
        stats["reco_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ds = fed.dataset("qcd")
        task = progress.add_task("select + di-jet mass", total=len(ds))
        stats["selected"] = len(ds.select(SELECTION))
        h, stats["cutflow"] = dijet.run_with_cutflow(
            ds, SELECTION, histogram=dijet.fine_mass_histogram(1000),
            progress=lambda done, total: progress.update(task, completed=done, total=total))
        progress.update(task, completed=len(ds), total=len(ds))
        stats["analysis_s"] = time.perf_counter() - t0
    with writing(str(output / PLOT)):
        png = dijet.plot(h, str(output / PLOT), title="giod demo: di-jet mass, simulated QCD multi-jet",
                     label="reconstructed anti-kt R=0.4 jets", **plots.dataset_label(ds))
    summary = ds.summary()
    stats.update(databases=summary["n_databases"], bytes=summary["bytes"], png=png, dataset="qcd",
                 version=fed.version, federation=str(fed_dir), in_histogram=int(h.sum()), selection=SELECTION)
    fed.close()
    return stats


def run_demo(output: Path, n_events: int, batch: int = 10_000, *, force: bool = False) -> dict[str, Any]:
    import giod
    from giod.analysis import dijet
    from giod.testing import synthetic

    fed_dir = _fresh(output, force)
    fed = giod.open(fed_dir, create=True)
    schema = synthetic.schema()
    ds = fed.create_dataset("demo", schema)
    stats: dict[str, Any] = {"events": n_events}
    tags = list(schema.tags)
    with _progress() as progress:
        t0 = time.perf_counter()
        task = progress.add_task("store raw events", total=n_events)
        full: list[ak.Array] = []
        with ds.writer(database_events=max(batch * 2, 1), program="giod demo", program_version=giod.__version__,
                       parameters={"generator": "synthetic", "seed": 1}) as w:
            for start in range(0, n_events, batch):
                n = min(batch, n_events - start)
                events = synthetic.events(n, seed=1000 + start, first_event=start)
                full.append(events[[*RECO, *tags]])
                w.append(events[list(RAW)])
                progress.advance(task, n)
        stats["write_s"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        reco = ak.concatenate(full)
        dbs = ds.databases()
        task = progress.add_task("add reco + tags (2nd pass)", total=len(dbs))
        with ds.add_containers(program="giod demo reconstruction", program_version=giod.__version__) as p:
            for db in dbs:
                p.write(db, reco[db.first_entry:db.stop_entry])
                progress.advance(task)
        stats["reco_s"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        sel = ds.select("njets >= 2 and lead_pt > 60")
        stats["selected"] = len(sel)
        stats["selection"] = "njets >= 2 and lead_pt > 60"
        h, stats["cutflow"] = dijet.run_with_cutflow(ds, "njets >= 2 and lead_pt > 60",
                                                     histogram=dijet.fine_mass_histogram(600))
        stats["analysis_s"] = time.perf_counter() - t0
    with writing(str(output / PLOT)):
        png = dijet.plot(h, str(output / PLOT), title="giod demo: di-jet mass", label="synthetic events")
    summary = ds.summary()
    stats.update(databases=summary["n_databases"], bytes=summary["bytes"], png=png, dataset="demo",
                 version=fed.version, federation=str(fed_dir), in_histogram=int(h.sum()))
    fed.close()
    return stats


@click.command()
@click.option("--events", "n_events", default=None, type=int,
              help="Events to generate (default 10000 simulated, 100000 synthetic).")
@click.option("--synthetic", is_flag=True, help="Synthetic events instead of the physics chain.")
@click.option("--workers", default=2, show_default=True, help="Reconstruction processes.")
@click.option("--output", default="demo-output", show_default=True, type=OutputPath(directory=True),
              help="Directory for the federation and the plot (created; its parent must exist).")
@click.option("--force", is_flag=True, help="Replace the federation and plot an earlier giod demo left in --output.")
def demo(n_events: int | None, synthetic: bool, workers: int, output: str, force: bool) -> None:
    """Run the main job on an embedded federation: simulate, store, reconstruct, select, plot.

    An earlier demo's output in the same directory is kept unless --force.
    """
    from rich.console import Console
    from rich.table import Table

    from giod.cli.tables import print_cutflow

    if n_events is None:
        n_events = 100_000 if synthetic else 10_000
    if n_events <= 0:
        raise click.BadParameter("must be positive", param_hint="--events")
    if workers <= 0:
        raise click.BadParameter("must be positive", param_hint="--workers")
    start = time.perf_counter()
    s = (run_demo(Path(output), n_events, force=force) if synthetic
         else run_physics_demo(Path(output), n_events, workers, force=force))
    t = Table(title="giod demo")
    t.add_column("what")
    t.add_column("value", justify="right")
    mb = s["bytes"] / 1e6
    t.add_row("events", f"{s['events']:,}")
    t.add_row("databases", str(s["databases"]))
    t.add_row("bytes on disk", f"{mb:.1f} MB")
    t.add_row("generate/simulate + store", f"{s['events'] / s['write_s']:,.0f} events/s")
    t.add_row("reconstruction pass", f"{s['events'] / s['reco_s']:,.0f} events/s")
    t.add_row(f"selected ({s['selection']})", f"{s['selected']:,}")
    t.add_row("in di-jet histogram (cut flow below)", f"{s['in_histogram']:,}")
    t.add_row("analysis (select + read + fill)", f"{s['analysis_s']:.2f} s")
    t.add_row("federation version", str(s["version"]))
    t.add_row("total time", f"{time.perf_counter() - start:.1f} s")
    Console().print(t)
    print_cutflow(s["cutflow"], "cut flow of the di-jet analysis")
    click.echo(f"plot: {s['png']}")
    click.echo(f"look around: giod -f {s['federation']} ls   |   giod -f {s['federation']} show {s['dataset']}")
    click.echo(f"event display: giod -f {s['federation']} serve --anonymous-read, then open "
               f"http://127.0.0.1:8470/display?dataset={s['dataset']}&entry=0")
