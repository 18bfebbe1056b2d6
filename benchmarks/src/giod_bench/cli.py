"""``giod bench …``: the benchmarks of the federation core, each beside its peers.

Every command prints a table, writes ``bench-<name>.json`` and
``bench-<name>.png`` into ``--output`` (default ``benchmarks/results``) and
quotes medians of ``--repeat`` runs. ``--quick`` runs at smoke-test sizes.
"""

from __future__ import annotations

import click

from giod.errors import ConfigError
from giod_bench.catalogoutcome import (  # noqa: F401 - CATALOG_COLUMNS, _throwaway_postgres: re-exported
    CATALOG_COLUMNS,
    POSTGRES_URL,
    _throwaway_postgres,
    catalog_outcome,
    plot_catalog,
)
from giod_bench.options import (  # noqa: F401 - re-exported
    DEFAULT_OUTPUT,
    _options,
    _output,
    _publish,
    _quick,
    _sizes,
    _workdir,
    _workdir_path,
    numbers,
)
from giod_bench.proxycli import proxy
from giod_bench.report import Bars


@click.group()
def bench() -> None:
    """Benchmarks: each prints a table and writes JSON and a PNG plot.

    Example: giod bench read --events 50000 --repeat 5 -o results/
    """


@bench.command()
@_options(200_000, 2_000)
@click.option(
    "--writers",
    default="1,2,4,8",
    show_default=True,
    help="Comma-separated numbers of concurrent writer processes.",
)
@click.option("--commits", type=click.IntRange(min=0), default=0, show_default=True,
              help="Also time this many small commits (10 events each) by --commit-writers processes: a "
                   "writer's whole commit cycle, beside the goal of 500/s.")
@click.option("--commit-writers", type=click.IntRange(min=1), default=8, show_default=True,
              help="Writer processes of the commit cycle.")
def daq(
    events: int | None,
    repeat: int | None,
    quick: bool,
    output: str,
    workdir: str | None,
    writers: str,
    commits: int,
    commit_writers: int,
) -> None:
    """Aggregate write rate of 1..N writer processes, beside dd, pyarrow and uproot.

    One-container and multi-container models; payload MB = uncompressed Arrow bytes.

    Example: giod bench daq --events 100000 --writers 1,2,4
    """
    from giod_bench import daq as module

    n, r = _sizes(events, repeat, quick, module.DEFAULT_EVENTS, module.QUICK_EVENTS)
    try:
        counts = tuple(int(w) for w in writers.split(",") if w.strip())
    except ValueError:
        raise ConfigError(f"--writers wants comma-separated integers, got {writers!r}") from None
    if quick and writers == "1,2,4,8":
        counts = (1, 2)
    with Bars() as bars:
        outcome = module.run(events=n, writers=counts, repeat=r, workdir=_workdir_path(workdir), bars=bars,
                             commits=commits, commit_writers=commit_writers)
    _publish(outcome, output, module.plot)


@bench.command()
@_options(200_000, 2_000)
def read(events: int | None, repeat: int | None, quick: bool, output: str, workdir: str | None) -> None:
    """Full and one-collection reads beside pyarrow, uproot TTree and uproot RNTuple.

    Also splits the time into Parquet decoding and the conversion to awkward.

    Example: giod bench read --events 100000
    """
    from giod_bench import read as module

    n, r = _sizes(events, repeat, quick, module.DEFAULT_EVENTS, module.QUICK_EVENTS)
    with Bars() as bars:
        outcome = module.run(events=n, repeat=r, workdir=_workdir_path(workdir), bars=bars)
    _publish(outcome, output, module.plot)


@bench.command()
@_options(2_000_000, 20_000)
@click.option(
    "--clusters",
    default="100,10000,default",
    show_default=True,
    help="Comma-separated cluster sizes in events ('default': giod's 16 MB clusters).",
)
@click.option(
    "--databases",
    default="10,100",
    show_default=True,
    help="Comma-separated numbers of databases the events are spread over (one dataset each).",
)
@click.option(
    "--served-rtt",
    "served_rtt",
    type=click.FloatRange(min=0),
    default=250.0,
    show_default=True,
    help="Round-trip time (ms) of the remote client that counts and reads the 0.1 % cut through giod serve.",
)
@click.option("--no-served", is_flag=True, help="Leave out the run through a server.")
@click.option("--keep", type=click.Path(file_okay=False), default=None,
              help="Keep the written datasets in this folder and reuse them on the next run with the same "
                   "--events, --clusters and --databases (measurement rounds then skip the writing).")
def select(
    events: int | None,
    repeat: int | None,
    quick: bool,
    output: str,
    workdir: str | None,
    clusters: str,
    databases: str,
    served_rtt: float,
    no_served: bool,
    keep: str | None,
) -> None:
    """Tag selections of 0.1 %, 1 %, 10 % then one collection, beside a full scan.

    Example: giod bench select --events 10000000 --clusters default --databases 100
    """
    from giod_bench import select as module

    n, r = _sizes(events, repeat, quick, module.DEFAULT_EVENTS, module.QUICK_EVENTS)
    sizes: list[int | None] = []
    for part in (p.strip() for p in clusters.split(",") if p.strip()):
        if part == "default":
            sizes.append(None)
        elif part.isdigit() and int(part) > 0:
            sizes.append(int(part))
        else:
            raise ConfigError(f"--clusters wants positive integers or 'default', got {part!r}")
    try:
        spread = tuple(int(d) for d in databases.split(",") if d.strip())
    except ValueError:
        raise ConfigError(f"--databases wants comma-separated integers, got {databases!r}") from None
    with Bars() as bars:
        outcome = module.run(events=n, clusters=sizes, repeat=r, databases=spread, workdir=_workdir_path(workdir),
                             bars=bars, served_rtt_ms=None if no_served else served_rtt, keep=keep)
    _publish(outcome, output, module.plot)


@bench.command()
@_options(200, 4)
def granularity(events: int | None, repeat: int | None, quick: bool, output: str, workdir: str | None) -> None:
    """A dense 3×64×1024 calorimeter: one array per event vs one record per cell.

    Example: giod bench granularity --events 100
    """
    from giod_bench import granularity as module

    n, r = _sizes(events, repeat, quick, module.DEFAULT_EVENTS, module.QUICK_EVENTS)
    with Bars() as bars:
        outcome = module.run(events=n, repeat=r, workdir=_workdir_path(workdir), bars=bars)
    _publish(outcome, output, module.plot)


@bench.command()
@_options(100_000, 2_000)
@click.option("--branches", type=click.IntRange(min=10), default=None,
              help="Branches of the file [default: 1,200; 150 with --quick].")
@click.option("--source", type=click.Path(dir_okay=False), default=None,
              help="The NanoAOD file that gives the layout and the values "
                   "[default: the CMS ttbar file in shared/data beside the repository].")
def interchange(events: int | None, repeat: int | None, quick: bool, output: str, workdir: str | None,
                branches: int | None, source: str | None) -> None:
    """ROOT import and export of a wide NanoAOD-like file, beside uproot's read and write.

    Example: giod bench interchange --events 100000 --branches 1200
    """
    from giod_bench import interchange as module

    n, r = _sizes(events, repeat, quick, module.DEFAULT_EVENTS, module.QUICK_EVENTS)
    width = branches or (150 if quick else module.DEFAULT_BRANCHES)
    with Bars() as bars:
        outcome = module.run(events=n, repeat=r, workdir=_workdir_path(workdir), bars=bars, branches=width,
                             source=source or module.SOURCE)
    _publish(outcome, output, module.plot)


# ---------------------------------------------------------------- catalog


@bench.command("catalog")
@click.option(
    "--databases",
    type=click.IntRange(min=1),
    default=None,
    help="Databases to register [default: 100,000; 200 with --quick].",
)
@click.option(
    "--step",
    type=click.IntRange(min=1),
    default=None,
    help="Registrations per measured step [default: databases / 20].",
)
@click.option(
    "--postgres",
    default=POSTGRES_URL,
    show_default=True,
    help="PostgreSQL server to measure too (a throwaway database is created and dropped); 'none' to skip.",
)
@click.option(
    "--writers",
    type=click.IntRange(min=1, max=256),
    default=8,
    show_default=True,
    help="Writer threads committing at once (their commits share transactions); 1: one after the other.",
)
@_quick
@_output
@_workdir
def catalog_(
    databases: int | None,
    step: int | None,
    postgres: str,
    writers: int,
    quick: bool,
    output: str,
    workdir: str | None,
) -> None:
    """Databases registered per second as the catalog grows, SQLite and PostgreSQL.

    Example: giod bench catalog --databases 20000 --postgres none
    """
    n = databases or (200 if quick else 100_000)
    outcome = catalog_outcome(
        n, step or max(1, n // 20), None if postgres == "none" else postgres, _workdir_path(workdir),
        writers,
    )
    _publish(outcome, output, plot_catalog)


# -------------------------------------------------------------- databases


@bench.command("databases")
@click.option(
    "--databases",
    type=click.IntRange(min=2),
    default=None,
    help="Databases to fill the federation with [default: 1,000,000; 2,000 with --quick].",
)
@click.option(
    "--postgres",
    default=POSTGRES_URL,
    show_default=True,
    help="PostgreSQL server to measure too (a throwaway database is created and dropped); 'none' to skip.",
)
@click.option("--repeat", type=click.IntRange(min=1), default=5, show_default=True, help="Timings per cost.")
@_quick
@_output
@_workdir
def databases_(
    databases: int | None, postgres: str, repeat: int, quick: bool, output: str, workdir: str | None
) -> None:
    """len(ds), planning, ds.event, listing and registrations as a federation grows to N databases.

    Example: giod bench databases --databases 100000 --postgres none
    """
    from giod_bench import databases as module

    n = databases or (module.QUICK_DATABASES if quick else module.DEFAULT_DATABASES)
    with Bars() as bars:
        outcome = module.run(n, None if postgres == "none" else postgres, _workdir_path(workdir), repeat, bars)
    _publish(outcome, output, module.plot)


# ------------------------------------------------------------------ proxy


bench.add_command(proxy)


# -------------------------------------------------------------------- wan


@bench.command()
@_options(400_000, 4_000)
@click.option(
    "--rtts",
    default=None,
    help="Comma-separated round-trip times in ms [default: 0,10,50,150,250; 0,50 with --quick].",
)
@click.option(
    "--bandwidth-mbit",
    type=click.FloatRange(min=0),
    default=1000,
    show_default=True,
    help="Bandwidth cap of the link in Mbit/s (0: no cap).",
)
@click.option(
    "--clients",
    default=None,
    help="Comma-separated numbers of concurrent clients at 0 ms [default: 1,8,64; 1,8 with --quick].",
)
def wan(
    events: int | None,
    repeat: int | None,
    quick: bool,
    output: str,
    workdir: str | None,
    rtts: str | None,
    bandwidth_mbit: float,
    clients: str | None,
) -> None:
    """One collection read through giod serve as the round-trip time grows, beside AMS pages, fsspec, XRootD.

    Also the server-side query, the local read and the cap as limits, and
    1..N concurrent clients at 0 ms (aggregate MB/s, errors, p50/p99 latency).

    Example: giod bench wan --rtts 0,50,250 --bandwidth-mbit 1000
    """
    from giod_bench import wan as module

    n, r = _sizes(events, repeat, quick, module.DEFAULT_EVENTS, module.QUICK_EVENTS)
    if rtts is None:
        rtt_values = module.QUICK_RTTS_MS if quick else module.RTTS_MS
    else:
        rtt_values = numbers(rtts, "--rtts")
    if clients is None:
        counts = module.QUICK_CLIENTS if quick else module.CLIENTS
    else:
        counts = numbers(clients, "--clients", int, 1)
    with Bars() as bars:
        outcome = module.run(
            events=n,
            rtts_ms=rtt_values,
            bandwidth=bandwidth_mbit * 1e6 / 8 if bandwidth_mbit else None,
            repeat=r,
            clients=counts,
            quick=quick,
            workdir=_workdir_path(workdir),
            bars=bars,
        )
    _publish(outcome, output, module.plot)


# ---------------------------------------------------------------- physics


@bench.command()
@_options(4_000, 300)
@click.option(
    "--workers",
    default="1,2,4",
    show_default=True,
    help="Comma-separated numbers of reconstruction worker processes (1 is always measured).",
)
def recon(
    events: int | None, repeat: int | None, quick: bool, output: str, workdir: str | None, workers: str
) -> None:
    """Reconstruction pass rate with 1..N workers, its I/O share, beside reconstruction in memory.

    Example: giod bench recon --events 10000 --workers 1,2
    """
    from giod_bench import recon as module

    n, r = _sizes(events, repeat, quick, module.DEFAULT_EVENTS, module.QUICK_EVENTS)
    try:
        counts = tuple(int(w) for w in workers.split(",") if w.strip())
    except ValueError:
        raise ConfigError(f"--workers wants comma-separated integers, got {workers!r}") from None
    if quick and workers == "1,2,4":
        counts = (1, 2)
    with Bars() as bars:
        outcome = module.run(events=n, repeat=r, workers=counts, workdir=_workdir_path(workdir), bars=bars)
    _publish(outcome, output, module.plot)


@bench.command()
@_options(4_000, 200)
def simulate(events: int | None, repeat: int | None, quick: bool, output: str, workdir: str | None) -> None:
    """Generate + simulate + store rate (built-in generator, and Pythia if installed), beside storing alone.

    Example: giod bench simulate --events 10000
    """
    from giod_bench import simulate as module

    n, r = _sizes(events, repeat, quick, module.DEFAULT_EVENTS, module.QUICK_EVENTS)
    with Bars() as bars:
        outcome = module.run(events=n, repeat=r, workdir=_workdir_path(workdir), bars=bars)
    _publish(outcome, output, module.plot)


@bench.command()
@_options(4_000, 200)
def scale(events: int | None, repeat: int | None, quick: bool, output: str, workdir: str | None) -> None:
    """Events/s serially, on a local pool of 1 and 2 workers and on a LocalCluster; a model up to 1,000 workers.

    --events is the reconstruction's; the di-jet analysis and the scan use 20 times more synthetic events.

    Example: giod bench scale --events 2000
    """
    from giod_bench import scale as module

    n, r = _sizes(events, repeat, quick, module.DEFAULT_EVENTS, module.QUICK_EVENTS)
    with Bars() as bars:
        outcome = module.run(events=n, repeat=r, workdir=_workdir_path(workdir), bars=bars)
    _publish(outcome, output, module.plot)


# ---------------------------------------------------------------- display


@bench.command("display")
@click.option(
    "--cells",
    type=click.IntRange(min=1),
    default=None,
    help="Calorimeter cells of the busy event [default: 50,000; 5,000 with --quick].",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=None,
    help="Timed page loads per event; medians are quoted [default: 3; 1 with --quick].",
)
@click.option(
    "--renderer",
    type=click.Choice(["webgl", "plotly"]),
    default="webgl",
    show_default=True,
    help="The page's 3-D view: its own WebGL view, or plotly.js (the fallback where webgl3d.js is absent).",
)
@_quick
@_output
@_workdir
def display_(cells: int | None, repeat: int | None, renderer: str, quick: bool, output: str,
             workdir: str | None) -> None:
    """Event display: page load to first drawn event in Chromium, 50,000 cells beside a small event.

    Needs Chromium (apt-get install chromium) and playwright (the test extra).

    Example: giod bench display --cells 50000 --repeat 5
    """
    from giod_bench import display as module

    n = cells or (module.QUICK_CELLS if quick else module.DEFAULT_CELLS)
    with Bars() as bars:
        outcome = module.run(cells=n, repeat=repeat or (1 if quick else 3), workdir=_workdir_path(workdir), bars=bars,
                             renderer=renderer)
    _publish(outcome, output, module.plot)


from giod_bench.fuzz import command as _fuzz  # noqa: E402 - after the group it joins
from giod_bench.propagate import command as _propagate  # noqa: E402 - after the group it joins
from giod_bench.replicate import command as _replicate  # noqa: E402 - after the group it joins
from giod_bench.tape import command as _tape  # noqa: E402 - after the group it joins

bench.add_command(_replicate)
bench.add_command(_propagate)
bench.add_command(_fuzz)
bench.add_command(_tape)
