"""``giod simulate`` and ``giod reconstruct``: the physics chain from the shell.

Both call :mod:`giod.physics.chain`, as ``giod demo`` does. An interrupt
(Ctrl-C) commits nothing half-written: ``simulate`` keeps the databases
already complete (each was its own commit) and discards the one being
filled; ``reconstruct`` registers its pass in one commit at the end, so an
interrupt leaves the dataset as it was.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from giod.cli.base import _open, federation_option, main
from giod.errors import ConfigError

#: Exit code after Ctrl-C, as a shell reports a process ended by SIGINT.
EXIT_INTERRUPTED = 130
#: Events generated and simulated together by ``giod simulate`` (at most one database's worth).
BATCH_EVENTS = 500


def _progress() -> Any:
    from giod.cli.progress import progress_bar

    # on stderr, so that the result lines on stdout stay clean for scripts
    return progress_bar(stderr=True, transient=True)


@main.command()
@click.argument("dataset")
@click.option("-n", "--events", "n_events", required=True, type=int, help="Events to generate and simulate.")
@click.option("--generator", default="builtin", show_default=True, help="Event generator: builtin or pythia.")
@click.option("--pileup", default=0.0, show_default=True, type=float,
              help="Mean number of pile-up interactions per event.")
@click.option("--seed", default=1, show_default=True, type=int, help="Random seed (same seed, same events).")
@click.option("--pthat-min", default=50.0, show_default=True, type=float,
              help="Lower pT-hat of the hard scatter (GeV).")
@click.option("--run", "run_number", default=1, show_default=True, type=int, help="Run number the events carry.")
@click.option("--database-events", default=None, type=int, help="Events per database (default: the writer's).")
@federation_option
def simulate(dataset: str, n_events: int, generator: str, pileup: float, seed: int, pthat_min: float,
             run_number: int, database_events: int | None, federation: str) -> None:
    """Generate and simulate events into a new or existing dataset (raw containers).

    Example: giod simulate qcd -n 2000 --pileup 20 --seed 7 && giod reconstruct qcd
    """
    from giod.physics.chain import simulate_into

    if n_events <= 0:
        raise ConfigError(f"-n must be a positive number of events, got {n_events}")
    if database_events is not None and database_events <= 0:
        raise ConfigError(f"--database-events must be positive, got {database_events}")
    if generator not in ("builtin", "pythia"):
        raise ConfigError(f"unknown generator {generator!r}: use builtin or pythia")
    if seed < 0:
        raise ConfigError(f"--seed must be 0 or more, got {seed}")
    # batches no bigger than a database: the bar moves as events are stored, and Ctrl-C loses at most one
    batch = min(BATCH_EVENTS, database_events or BATCH_EVENTS)
    fed = _open(federation)
    before = len(fed.dataset(dataset)) if dataset in fed.datasets() else 0
    try:
        with _progress() as progress:
            task = progress.add_task("generate + simulate + store", total=n_events)
            ds = simulate_into(fed, dataset, n_events, seed=seed, batch=batch, pthat_min=pthat_min, pileup=pileup,
                               generator=generator, run=run_number, database_events=database_events,
                               append=True, progress=lambda n: progress.advance(task, n))
    except KeyboardInterrupt:
        kept = len(fed.dataset(dataset)) - before if dataset in fed.datasets() else 0
        click.echo(f"interrupted: {kept:,} events in complete databases stay committed in {dataset}; "
                   "the database being written was discarded", err=True)
        sys.exit(EXIT_INTERRUPTED)
    s = ds.summary()
    click.echo(f"simulated {n_events:,} events into {dataset} ({generator}, pile-up {pileup:g}, seed {seed}): "
               f"now {s['n_events']:,} events in {_count(s['n_databases'], 'database')}, version {fed.version}")
    click.echo(f"next: giod reconstruct {dataset}")


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _scheduler(text: str) -> Any:
    """The Dask executor for ``--scheduler``; a malformed address is refused before anything runs."""
    from giod.distributed import connect

    kind, sep, rest = text.strip().partition("://")
    if sep:
        host, _, port = rest.rpartition(":")
        if kind not in ("tcp", "tls") or not host or not (port.isdigit() and 0 < int(port) < 65536):
            raise ConfigError(f"bad scheduler address {text!r}: expected tcp://HOST:PORT")
    elif text.strip().partition(":")[0] != "localcluster":
        raise ConfigError(f"bad scheduler {text!r}: expected tcp://HOST:PORT or localcluster[:N]")
    return connect(text)


@main.command()
@click.argument("dataset")
@click.option("--workers", default=None, type=int, help="Worker processes on this machine [default: 1].")
@click.option("--scheduler", default=None, help="Run on Dask instead: tcp://HOST:PORT or localcluster[:N].")
@click.option("--force", is_flag=True, help="Reconstruct again, replacing reco and tag in a new version.")
@federation_option
def reconstruct(dataset: str, workers: int | None, scheduler: str | None, force: bool, federation: str) -> None:
    """Reconstruct a simulated dataset as a later pass: tracks, clusters, jets (reco) and tags.

    Databases already reconstructed are skipped; a dataset with nothing left
    to do is refused unless --force.

    Example: giod reconstruct qcd --workers 2
    """
    from giod.physics.chain import reconstruct_dataset, to_reconstruct

    if workers is not None and scheduler is not None:
        raise ConfigError("use --workers or --scheduler, not both")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be 1 or more, got {workers}")
    fed = _open(federation)
    ds = fed.dataset(dataset)
    todo = to_reconstruct(ds, force=force)  # refusals (already done, another model, no events) come first
    executor = _scheduler(scheduler) if scheduler is not None else None
    try:
        with _progress() as progress:
            where = executor.name if executor is not None else f"{workers or 1} process(es)"
            task = progress.add_task(f"reconstruct ({where})", total=sum(db.n_events for db in todo))
            version = reconstruct_dataset(ds, workers=workers or 1, force=force, scheduler=executor,
                                          progress=lambda n: progress.advance(task, n))
    except KeyboardInterrupt:
        click.echo(f"interrupted: nothing was committed, {dataset} is as it was", err=True)
        sys.exit(EXIT_INTERRUPTED)
    finally:
        if executor is not None:
            executor.close()
    n = sum(db.n_events for db in todo)
    click.echo(f"reconstructed {n:,} events in {_count(len(todo), 'database')} of {dataset}: "
               f"reco and tag at version {version}")
