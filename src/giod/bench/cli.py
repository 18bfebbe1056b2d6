"""``giod bench …``: the benchmarks of the federation core, each beside its peers.

Every command prints a table, writes ``bench-<name>.json`` and
``bench-<name>.png`` into ``--output`` (default ``benchmarks/results``) and
quotes medians of ``--repeat`` runs. ``--quick`` runs at smoke-test sizes.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from giod.bench.report import Bars, Column, Outcome, Table, figure, publish, ratio, save
from giod.errors import ConfigError

DEFAULT_OUTPUT = "benchmarks/results"
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _options(default_events: int, quick_events: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options every benchmark shares (declared once)."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(
            [
                click.option(
                    "--events",
                    type=click.IntRange(min=1),
                    default=None,
                    help=f"Events [default: {default_events:,}; {quick_events:,} with --quick].",
                ),
                click.option(
                    "--repeat",
                    type=click.IntRange(min=1),
                    default=None,
                    help="Timed repeats; medians are quoted [default: 3; 1 with --quick].",
                ),
                _quick,
                _output,
                _workdir,
            ]
        ):
            fn = option(fn)
        return fn

    return decorate


_quick = click.option("--quick", is_flag=True, help="Tiny sizes: a smoke test of the whole benchmark.")
_output = click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False),
    default=DEFAULT_OUTPUT,
    show_default=True,
    help="Directory for bench-<name>.json and .png.",
)
_workdir = click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory (on the disk to measure) for the benchmark's temporary data "
    "[default: the system's temporary directory].",
)


def _sizes(events: int | None, repeat: int | None, quick: bool, default: int, small: int) -> tuple[int, int]:
    return events or (small if quick else default), repeat or (1 if quick else 3)


def _workdir_path(workdir: str | None) -> str | None:
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    return workdir


def _publish(outcome: Outcome, output: str, plot: Callable[[Outcome, Path], None]) -> None:
    json_path, png_path = publish(outcome, output, plot)
    click.echo(f"wrote {json_path} and {png_path}")


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
def daq(
    events: int | None,
    repeat: int | None,
    quick: bool,
    output: str,
    workdir: str | None,
    writers: str,
) -> None:
    """Aggregate write rate of 1..N writer processes, beside dd, pyarrow and uproot.

    One-container and multi-container models; payload MB = uncompressed Arrow bytes.

    Example: giod bench daq --events 100000 --writers 1,2,4
    """
    from giod.bench import daq as module

    n, r = _sizes(events, repeat, quick, module.DEFAULT_EVENTS, module.QUICK_EVENTS)
    try:
        counts = tuple(int(w) for w in writers.split(",") if w.strip())
    except ValueError:
        raise ConfigError(f"--writers wants comma-separated integers, got {writers!r}") from None
    if quick and writers == "1,2,4,8":
        counts = (1, 2)
    with Bars() as bars:
        outcome = module.run(events=n, writers=counts, repeat=r, workdir=_workdir_path(workdir), bars=bars)
    _publish(outcome, output, module.plot)


@bench.command()
@_options(200_000, 2_000)
def read(events: int | None, repeat: int | None, quick: bool, output: str, workdir: str | None) -> None:
    """Full and one-collection reads beside pyarrow, uproot TTree and uproot RNTuple.

    Also splits the time into Parquet decoding and the conversion to awkward.

    Example: giod bench read --events 100000
    """
    from giod.bench import read as module

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
def select(
    events: int | None,
    repeat: int | None,
    quick: bool,
    output: str,
    workdir: str | None,
    clusters: str,
) -> None:
    """Tag selections of 0.1 %, 1 %, 10 % then one collection, beside a full scan.

    Example: giod bench select --events 10000000 --clusters 1000,default
    """
    from giod.bench import select as module

    n, r = _sizes(events, repeat, quick, module.DEFAULT_EVENTS, module.QUICK_EVENTS)
    sizes: list[int | None] = []
    for part in (p.strip() for p in clusters.split(",") if p.strip()):
        if part == "default":
            sizes.append(None)
        elif part.isdigit() and int(part) > 0:
            sizes.append(int(part))
        else:
            raise ConfigError(f"--clusters wants positive integers or 'default', got {part!r}")
    with Bars() as bars:
        outcome = module.run(events=n, clusters=sizes, repeat=r, workdir=_workdir_path(workdir), bars=bars)
    _publish(outcome, output, module.plot)


@bench.command()
@_options(200, 4)
def granularity(events: int | None, repeat: int | None, quick: bool, output: str, workdir: str | None) -> None:
    """A dense 3×64×1024 calorimeter: one array per event vs one record per cell.

    Example: giod bench granularity --events 100
    """
    from giod.bench import granularity as module

    n, r = _sizes(events, repeat, quick, module.DEFAULT_EVENTS, module.QUICK_EVENTS)
    with Bars() as bars:
        outcome = module.run(events=n, repeat=r, workdir=_workdir_path(workdir), bars=bars)
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
@_quick
@_output
@_workdir
def catalog_(
    databases: int | None,
    step: int | None,
    postgres: str,
    quick: bool,
    output: str,
    workdir: str | None,
) -> None:
    """Databases registered per second as the catalog grows, SQLite and PostgreSQL.

    Example: giod bench catalog --databases 20000 --postgres none
    """
    n = databases or (200 if quick else 100_000)
    outcome = catalog_outcome(
        n, step or max(1, n // 20), None if postgres == "none" else postgres, _workdir_path(workdir)
    )
    _publish(outcome, output, plot_catalog)


def catalog_outcome(n: int, step: int, postgres: str | None, workdir: str | None) -> Outcome:
    """Run the catalog benchmark on SQLite (always) and PostgreSQL (when reachable)."""
    from giod.bench import catalog

    results: dict[str, list[dict[str, float]]] = {}
    notes: list[str] = []
    with (
        Bars() as bars,
        tempfile.TemporaryDirectory(prefix="giod-bench-catalog-", dir=workdir) as tmp,
    ):
        with bars.task("SQLite", n) as advance:
            done = [0]

            def progress(d: int, total: int) -> None:
                advance(d - done[0])
                done[0] = d

            results["SQLite"] = catalog.run(
                f"sqlite:///{Path(tmp) / 'catalog.sqlite'}",
                n_databases=n,
                step=step,
                progress=progress,
            )
        if postgres is not None:
            with _throwaway_postgres(postgres, notes) as url:
                if url is not None:
                    with bars.task("PostgreSQL", n) as advance:
                        done = [0]
                        results["PostgreSQL"] = catalog.run(url, n_databases=n, step=step, progress=progress)
    rows = [{"backend": b, **r} for b, rs in results.items() for r in rs]
    for b, rs in results.items():
        notes.append(
            f"{b}: {rs[0]['rate']:,.0f}/s in the first step, {rs[-1]['rate']:,.0f}/s in the "
            f"last ({ratio(rs[-1]['rate'], rs[0]['rate']):.2f}× of the first) at "
            f"{rs[-1]['databases']:,.0f} databases"
        )
    notes.append(
        "each registration: one database with 4 containers of 10 clusters, 8 tag statistics, one "
        "replica, in one transaction; 'list s' lists every database of the dataset after the step"
    )
    return Outcome(
        name="catalog",
        parameters={
            "databases": n,
            "step": step,
            "postgres": postgres is not None and "PostgreSQL" in results,
        },
        tables=[
            Table(
                "results",
                f"catalog: registrations per second up to {n:,} databases",
                CATALOG_COLUMNS,
                rows,
            )
        ],
        notes=notes,
    )


@contextmanager
def _throwaway_postgres(server: str, notes: list[str]) -> Iterator[str | None]:
    """URL of a fresh database on PostgreSQL ``server``, dropped afterwards; None if unreachable."""
    import psycopg
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    name = f"giod_bench_{uuid.uuid4().hex[:12]}"
    try:
        url = make_url(server)
        admin = psycopg.connect(
            url.set(drivername="postgresql").render_as_string(hide_password=False),
            autocommit=True,
            connect_timeout=3,
        )
    except (ArgumentError, psycopg.Error) as exc:
        notes.append(f"PostgreSQL left out: {server} is not reachable ({type(exc).__name__})")
        yield None
        return
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield url.set(database=name).render_as_string(hide_password=False)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


CATALOG_COLUMNS = [
    Column("backend", "catalog"), Column("databases", "databases", "{:,.0f}"),
    Column("rate", "registrations/s", "{:,.0f}"), Column("seconds", "step s", "{:.2f}"),
    Column("list_seconds", "list s", "{:.3f}"),
]  # fmt: skip


def plot_catalog(outcome: Outcome, path: Path) -> None:
    """Registration rate against catalog size, one line per backend."""
    rows = outcome.table("results").rows
    fig, (ax, ax2) = figure("giod catalog: registrations as the federation grows", ncols=2)
    for backend in dict.fromkeys(r["backend"] for r in rows):
        pts = [(r["databases"], r["rate"], r["list_seconds"]) for r in rows if r["backend"] == backend]
        x, rate, listed = zip(*pts, strict=True)
        ax.plot(x, rate, marker="o", label=backend)
        ax2.plot(x, listed, marker="o", label=backend)
    ax.axhline(500, linestyle="--", color="grey", label="target: 500/s")
    ax.set_xlabel("databases in the catalog")
    ax.set_ylabel("registrations per second")
    ax2.set_xlabel("databases in the catalog")
    ax2.set_ylabel("seconds to list the dataset")
    for a in (ax, ax2):
        a.grid(alpha=0.3)
        a.legend(fontsize="small")
    save(fig, path)


# ------------------------------------------------------------------ proxy


@bench.command("proxy")
@click.option("--target", default=None, help="HOST:PORT to forward to (required unless --check).")
@click.option(
    "--listen",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port to listen on (0: a free one, printed).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--rtt",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Round-trip time to add, in milliseconds.",
)
@click.option(
    "--bandwidth",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Bandwidth cap per direction, in Mbit/s, shared by all connections [default: none].",
)
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=None,
    help="Bytes in flight per connection and direction [default: 32 MiB].",
)
@click.option("--no-handshake", is_flag=True, help="New connections do not cost a round trip.")
@click.option(
    "--drop-after",
    type=click.IntRange(min=0),
    default=None,
    help="Fault: cut each connection after this many bytes from the target.",
)
@click.option(
    "--flip-at",
    type=click.IntRange(min=0),
    default=None,
    help="Fault: invert the byte at this offset of the target's stream.",
)
@click.option(
    "--connections",
    type=click.IntRange(min=0),
    default=None,
    help="Faults apply to this many connections only, the first ones [default: all].",
)
@click.option(
    "--check",
    is_flag=True,
    help="Instead of serving, measure the proxy on loopback at RTTs 0, 10, 50, 150, 250 ms "
    "(or --rtt) and print the table.",
)
@_quick
def proxy(
    target: str | None,
    listen: int,
    host: str,
    rtt: float,
    bandwidth: float | None,
    window: int | None,
    no_handshake: bool,
    drop_after: int | None,
    flip_at: int | None,
    connections: int | None,
    check: bool,
    quick: bool,
) -> None:
    """A TCP proxy that adds a round-trip time and a bandwidth cap, to test reads from far away.

    Runs until interrupted. Model and measured limits: docs/latency.md.

    Example: giod bench proxy --target 127.0.0.1:8000 --listen 9000 --rtt 50 --bandwidth 1000
    """
    from giod.bench import netlab
    from giod.bench.report import print_tables

    rate = None if bandwidth is None else bandwidth * 1e6 / 8
    if check:
        rtts = (rtt / 1000,) if rtt else (0.0, 0.010, 0.050, 0.150, 0.250)
        size = 20_000_000 if quick else 200_000_000
        print_tables(
            netlab.calibrate(rtts, bandwidth=rate, size=size, pings=5 if quick else 20, repeat=1 if quick else 3)
        )
        return
    if target is None:
        raise ConfigError("--target HOST:PORT is required (or --check)")
    settings = netlab.Settings(
        target=netlab.parse_target(target),
        rtt=rtt / 1000,
        bandwidth=rate,
        window=window or netlab.DEFAULT_WINDOW,
        handshake=not no_handshake,
        listen=(host, listen),
        faults=netlab.Faults(drop_after=drop_after, flip_at=flip_at, connections=connections),
    )
    netlab.serve(settings, lambda line: click.echo(line, nl=True) or sys.stdout.flush())


# -------------------------------------------------------------------- wan


def _numbers(text: str, option: str, kind: type = float, minimum: float = 0) -> tuple[Any, ...]:
    try:
        values = tuple(kind(p) for p in text.split(",") if p.strip())
    except ValueError:
        values = ()
    if not values or any(v < minimum for v in values):
        raise ConfigError(f"{option} wants comma-separated numbers of at least {minimum:g}, got {text!r}")
    return values


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
    from giod.bench import wan as module

    n, r = _sizes(events, repeat, quick, module.DEFAULT_EVENTS, module.QUICK_EVENTS)
    if rtts is None:
        rtt_values = module.QUICK_RTTS_MS if quick else module.RTTS_MS
    else:
        rtt_values = _numbers(rtts, "--rtts")
    if clients is None:
        counts = module.QUICK_CLIENTS if quick else module.CLIENTS
    else:
        counts = _numbers(clients, "--clients", int, 1)
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
    from giod.bench import recon as module

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
    from giod.bench import simulate as module

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
    from giod.bench import scale as module

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
@_quick
@_output
@_workdir
def display_(cells: int | None, repeat: int | None, quick: bool, output: str, workdir: str | None) -> None:
    """Event display: page load to first drawn event in Chromium, 50,000 cells beside a small event.

    Needs Chromium (apt-get install chromium) and playwright (the test extra).

    Example: giod bench display --cells 50000 --repeat 5
    """
    from giod.bench import display as module

    n = cells or (module.QUICK_CELLS if quick else module.DEFAULT_CELLS)
    with Bars() as bars:
        outcome = module.run(cells=n, repeat=repeat or (1 if quick else 3), workdir=_workdir_path(workdir), bars=bars)
    _publish(outcome, output, module.plot)
