"""Replication benchmark: copies between two ``giod serve`` sites, as the round-trip time grows.

Two servers run in processes of their own, each over a federation of its
own: site *a* holds the dataset (written to it through the server), site *b*
receives the copies. A home catalog registers both. For every round-trip
time a :class:`~giod.testing.netlab.LatencyProxy` (a child process) stands
in front of site *a*. ``giod.replication.replicate`` copies every container
to *b* with 1, 4, 16 and 64 streams (files at once): the copying process asks
*b*'s server, which fetches each file from *a* through the proxy itself (a
third-party copy), checks its size and CRC-32C, writes it durably (fsync)
and only then publishes it; the copying process then registers the copies
in the home catalog. Before each run *b*'s copies are deleted and its
replicas marked bad, so every run copies everything.

At 0 ms giod copies twice: straight from *a* (no proxy at all), and through
a proxy that adds no delay. The proxy is a Python process on the same two
cores: the second run costs what the first does plus the proxy's CPU, which
is what every run with a delay pays too. Latency alone is the ratio of the
far runs to the second; the ratio to the first also counts the laboratory's
own cost, which a real network would not add.

Beside it, the limits and peers of the same files:

- ``cp -r`` of site *a*'s directory to another directory of the same disk
  (the files in the page cache): the physical limit of a copy on this
  machine, one that leaves the copies in memory for the kernel to write
  some time later;
- the same ``cp -r`` followed by an fsync of every copied file and folder:
  the limit of a copy as durable as giod's, which fsyncs before it publishes;
- ``curl`` downloading the files one after the other on one connection
  (one stream, through the same proxy): what a plain HTTP copy gets.

The dataset is about 3.7 GB in 64 files (58 MB each): a throughput
benchmark, long enough that the round trips of 250 ms that open a copy (a
connection, then a request) are a start-up cost and not a fifth of it (at
1 GB/s and 250 ms a quarter of a GB is always on its way: 3.7 GB is fifteen
such windows), and where the fixed costs of a replication (planning, one
request and one catalog registration per file) weigh what they weigh on real
datasets. A full run takes about a quarter of an hour. Rates are the containers'
bytes over the wall time of the whole copy (planning and catalog
registrations included); peers take turns round after round and medians are
quoted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import click

from giod.errors import ConfigError, GiodError
from giod_bench.options import numbers
from giod_bench.replicatexrootd import XRD_TPC, xrootd_copies
from giod_bench.report import MB, Bars, Column, Outcome, Table, figure, grouped_bars, ratio, round_robin, save

__all__ = ["DEFAULT_EVENTS", "QUICK_EVENTS", "QUICK_RTTS_MS", "QUICK_STREAMS", "RTTS_MS", "STREAMS", "command", "plot",
           "run"]

DEFAULT_EVENTS = 1_280_000  # about 3.7 GB in 64 container files
QUICK_EVENTS = 2_000
STREAMS = (1, 4, 16, 64)
QUICK_STREAMS = (1, 4)
RTTS_MS = (0.0, 50.0, 250.0)
QUICK_RTTS_MS = (0.0, 50.0)
DATASET = "repl"
DATABASES = 16  # so that there are files to copy in parallel (4 containers each, and a tag index past 4,096 events)
GIOD = "giod replicate"
GIOD_PROXIED = "giod replicate, through the proxy"
CURL = "curl, one stream"
CP = "cp -r (local disk)"
CP_SYNC = "cp -r + fsync (durable)"


def _site(rtt: float, proxied: bool = False) -> str:
    """The name site *a* has at this RTT: through a proxy for any delay, and at 0 ms also without."""
    return f"a{rtt:g}".replace(".", "_") + ("p" if proxied and rtt == 0 else "")


@contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    """Tokens for the sites, as an operator exports them (and the environment as it was, after)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run(events: int = DEFAULT_EVENTS, streams: Sequence[int] = STREAMS, rtts_ms: Sequence[float] = RTTS_MS,
        repeat: int = 3, bandwidth: float | None = None, workdir: str | os.PathLike[str] | None = None,
        bars: Bars | None = None) -> Outcome:
    """Measure replication between two giod servers at each RTT, beside ``cp`` and ``curl``."""
    import giod
    from giod.catalog import Catalog
    from giod.replication import replicate
    from giod.storage.remote import site_token_env
    from giod.testing import synthetic
    from giod.testing.netlab import LatencyProxy
    from giod_bench.wan import serve_federation

    if events < DATABASES or repeat < 1 or not streams or any(s < 1 for s in streams) \
            or not rtts_ms or any(r < 0 for r in rtts_ms):
        raise ConfigError(f"events (≥ {DATABASES}), repeat and streams must be positive, "
                          "RTTs not negative")
    if shutil.which("curl") is None:
        raise ConfigError("the benchmark compares with curl: install curl")
    bars = bars or Bars(enabled=False)
    with tempfile.TemporaryDirectory(prefix="giod-bench-replicate-", dir=workdir) as tmp, ExitStack() as stack:
        work = Path(tmp)
        tokens = {}
        for name in ("a", "b"):
            fed = giod.open(work / f"site-{name}", create=True)
            tokens[name] = fed.catalog.create_token("admin", note="giod bench replicate")[1]
            fed.close()
        a_addr = stack.enter_context(serve_federation(work / "site-a"))
        b_addr = stack.enter_context(serve_federation(work / "site-b"))
        # every RTT through a proxy; 0 ms also straight, unless a bandwidth cap needs the proxy there too
        proxies = {rtt: stack.enter_context(LatencyProxy(a_addr, rtt=rtt / 1000, bandwidth=bandwidth, isolate=True))
                   for rtt in rtts_ms}
        a_url = {rtt: "http://{}:{}".format(*(proxies[rtt].address if rtt > 0 or bandwidth is not None else a_addr))
                 for rtt in rtts_ms}
        zero = [rtt for rtt in rtts_ms if rtt == 0 and bandwidth is None]  # where a proxied twin is measured
        proxied_url = {rtt: "http://{}:{}".format(*proxies[rtt].address) for rtt in zero}
        env = {site_token_env(_site(rtt)): tokens["a"] for rtt in rtts_ms}
        env |= {site_token_env(_site(rtt, True)): tokens["a"] for rtt in zero}
        env[site_token_env("b")] = tokens["b"]
        env[site_token_env("origin")] = tokens["a"]
        stack.enter_context(_env(env))

        home = giod.Federation(Catalog.open(f"sqlite:///{work / 'home.sqlite'}"))
        stack.callback(home.close)
        home.add_site("origin", f"http://{a_addr[0]}:{a_addr[1]}/files/local", 0)
        home.add_site("b", f"http://{b_addr[0]}:{b_addr[1]}/files/local", 1)
        for rtt in rtts_ms:
            home.add_site(_site(rtt), f"{a_url[rtt]}/files/local", 2)
        for rtt in zero:
            home.add_site(_site(rtt, True), f"{proxied_url[rtt]}/files/local", 2)
        ds = home.create_dataset(DATASET, synthetic.schema())
        per_db = max(1, events // DATABASES)
        with bars.task("writing the dataset to site a (uploads)", events) as advance:
            with ds.writer(database_events=per_db, site="origin") as w:
                for start in range(0, events, per_db):
                    n = min(per_db, events - start)
                    w.append(synthetic.events(n, seed=start, first_event=start))
                    advance(n)
        containers = [c for db in home.catalog.databases(DATASET) for c in db.containers]
        size = sum(c.size for c in containers)
        a_dir = work / "site-a" / "data"
        b_dir = work / "site-b" / "data"
        sources = ["origin", *(_site(r) for r in rtts_ms), *(_site(r, True) for r in zero)]
        notes: list[str] = []
        # the same files between two XRootD servers; their sites join `sources`, which giod's rows mark bad
        xrootd_clocks = stack.enter_context(xrootd_copies(home, work, DATASET, rtts_ms, streams, bandwidth,
                                                          sources, notes))

        def copy_with(rtt: float, n: int, proxied: bool = False) -> Callable[[int], float]:
            source = _site(rtt, proxied)

            def clock(_: int) -> float:
                shutil.rmtree(b_dir / DATASET, ignore_errors=True)
                home.catalog.set_replica_states(
                    [(c.id, s, "good" if s == source else "bad") for c in containers for s in sources]
                    + [(c.id, "b", "bad") for c in containers])
                t0 = time.perf_counter()
                report = replicate(home.catalog, home.site, DATASET, "b", streams=n)
                seconds = time.perf_counter() - t0
                if not report.ok or report.copied != len(containers):
                    raise GiodError(f"replication at {rtt:g} ms with {n} streams failed: {report.failed[:3]}")
                return seconds
            return clock

        def curl(rtt: float) -> Callable[[int], float]:
            argv = ["curl", "--silent", "--show-error", "--fail", "-H", f"Authorization: Bearer {tokens['a']}"]
            for c in containers:
                argv += ["-o", os.devnull, f"{a_url[rtt]}/files/local/{c.path}"]

            def clock(_: int) -> float:
                t0 = time.perf_counter()
                subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
                return time.perf_counter() - t0
            return clock

        def cp(_: int) -> float:
            target = work / "cp-copy"
            shutil.rmtree(target, ignore_errors=True)
            t0 = time.perf_counter()
            subprocess.run(["cp", "-r", str(a_dir), str(target)], check=True)
            return time.perf_counter() - t0

        def cp_sync(_: int) -> float:
            target = work / "cp-copy"
            shutil.rmtree(target, ignore_errors=True)
            t0 = time.perf_counter()
            subprocess.run(["cp", "-r", str(a_dir), str(target)], check=True)
            _fsync_tree(target)
            return time.perf_counter() - t0

        clocks: dict[tuple[str, float, int], Callable[[int], float]] = {(CP, 0.0, 1): cp, (CP_SYNC, 0.0, 1): cp_sync}
        for rtt in rtts_ms:
            clocks[(CURL, rtt, 1)] = curl(rtt)
            for n in streams:
                clocks[(GIOD, rtt, n)] = copy_with(rtt, n)
                if rtt in zero:
                    clocks[(GIOD_PROXIED, rtt, n)] = copy_with(rtt, n, proxied=True)
        clocks.update(xrootd_clocks)
        with bars.task("copying, peers in turn", len(clocks) * (repeat + 1)) as advance:
            round_robin(clocks, 1, advance=advance)  # untimed: page cache, connections, imports
            timings = round_robin(clocks, repeat, advance=advance)
    return _outcome(events, len(containers), size, streams, rtts_ms, repeat, bandwidth,
                    {k: t.median for k, t in timings.items()}, notes)


COLUMNS = [
    Column("rtt_ms", "RTT ms", "{:g}"), Column("client", "client"), Column("streams", "streams"),
    Column("mb_per_s", "MB/s", "{:,.1f}"), Column("vs_curl", "× curl", "{:.2f}"),
    Column("vs_0ms", "× 0 ms", "{:.2f}"), Column("vs_proxied", "× proxied", "{:.2f}"),
    Column("vs_cp", "× cp", "{:.2f}"), Column("vs_durable", "× cp+fsync", "{:.2f}"),
]  # fmt: skip
TARGET_COLUMNS = [
    Column("target", "target"), Column("measured", "measured", "{:.2f}"), Column("wanted", "wanted", "{:.2f}"),
    Column("verdict", "verdict"),
]  # fmt: skip


def _verdict(target: str, got: float | None, wanted: float) -> dict[str, Any]:
    return {"target": target, "measured": got, "wanted": wanted,
            "verdict": "meets" if got is not None and got >= wanted else "misses"}


def _outcome(events: int, files: int, size: int, streams: Sequence[int], rtts_ms: Sequence[float], repeat: int,
             bandwidth: float | None, median: dict[tuple[str, float, int], float],
             extra_notes: Sequence[str] = ()) -> Outcome:
    cp_rate = size / MB / median[(CP, 0.0, 1)]
    durable = size / MB / median[(CP_SYNC, 0.0, 1)]
    rows: list[dict[str, Any]] = [
        {"rtt_ms": 0.0, "client": CP, "streams": 1, "mb_per_s": cp_rate, "seconds": median[(CP, 0.0, 1)],
         "vs_cp": 1.0, "vs_durable": ratio(cp_rate, durable)},
        {"rtt_ms": 0.0, "client": CP_SYNC, "streams": 1, "mb_per_s": durable, "seconds": median[(CP_SYNC, 0.0, 1)],
         "vs_cp": ratio(durable, cp_rate), "vs_durable": 1.0}]
    rate = {k: size / MB / s for k, s in median.items()}
    near = rtts_ms[0]
    # the far runs pass through a proxy: where a proxied twin of the nearest run exists, it is their reference
    proxied = (GIOD_PROXIED, near) if (GIOD_PROXIED, near, streams[0]) in rate else (GIOD, near)
    for rtt in rtts_ms:
        curl = rate[(CURL, rtt, 1)]
        rows.append({"rtt_ms": rtt, "client": CURL, "streams": 1, "mb_per_s": curl, "seconds": median[(CURL, rtt, 1)],
                     "vs_curl": 1.0, "vs_0ms": ratio(curl, rate.get((CURL, near, 1))),
                     "vs_cp": ratio(curl, cp_rate), "vs_durable": ratio(curl, durable)})
        for client in (GIOD, GIOD_PROXIED, XRD_TPC):
            for n in streams:
                if (client, rtt, n) not in rate:
                    continue
                r = rate[(client, rtt, n)]
                rows.append({"rtt_ms": rtt, "client": client, "streams": n, "mb_per_s": r,
                             "seconds": median[(client, rtt, n)], "vs_curl": ratio(r, curl),
                             "vs_0ms": ratio(r, rate.get((GIOD, near, n))),
                             "vs_proxied": ratio(r, rate.get((*proxied, n))),
                             "vs_cp": ratio(r, cp_rate), "vs_durable": ratio(r, durable)})
    best = {rtt: max(rate[(GIOD, rtt, n)] for n in streams) for rtt in rtts_ms}
    best_proxied = max(rate[(*proxied, n)] for n in streams)
    targets = []
    far = max(rtts_ms)
    if far > near:
        targets.append(_verdict(f"{far:g} ms with enough streams vs {near:g} ms through the same proxy "
                                "(latency alone)", ratio(best[far], best_proxied), 0.8))
        if proxied[0] == GIOD_PROXIED:
            targets.append(_verdict(f"{far:g} ms with enough streams vs {near:g} ms without proxy "
                                    "(latency and the proxy's CPU)", ratio(best[far], best[near]), 0.8))
    targets.append(_verdict(f"{near:g} ms vs durable local copy (cp + fsync)", ratio(best[near], durable), 0.7))
    targets.append(_verdict(f"{near:g} ms vs local copy into the page cache (cp)", ratio(best[near], cp_rate), 0.7))
    cap = "no bandwidth cap" if bandwidth is None else f"a {bandwidth * 8 / 1e6:g} Mbit/s cap"
    notes = [
        f"{files} container files, {size / MB:.1f} MB ({events:,} synthetic events); MB/s = those bytes over the "
        f"wall time of the whole copy; median of {repeat} rounds, peers in turn",
        f"{GIOD}: site a → site b, two giod serve processes on loopback; b's server fetches each file from a "
        f"(at 0 ms directly, else through a latency proxy: a child process, {cap}) as the copying process asks "
        "it (third-party copy); every file checked by CRC-32C and fsynced by b before it is published, then "
        "registered in the catalog",
        f"{GIOD_PROXIED}: the same through a proxy that adds no delay: the far runs' reference for latency "
        "alone ('× proxied'), since the proxy's own CPU is taken from the same cores",
        f"{CURL}: the same files downloaded one after the other on one connection, through the same proxy",
        f"{CP}: cp -r of site a's directory to another directory on the same disk, files in the page cache",
        f"{CP_SYNC}: the same cp -r, then an fsync of every copied file and folder (as durable as giod's copies)",
        *extra_notes,
    ]
    return Outcome(
        name="replicate",
        parameters={"events": events, "files": files, "mb": size / MB, "streams": list(streams),
                    "rtts_ms": list(rtts_ms), "repeat": repeat,
                    "bandwidth_mbit": None if bandwidth is None else bandwidth * 8 / 1e6},
        tables=[Table("results", f"replicating {size / MB:.0f} MB between two giod servers", COLUMNS, rows),
                Table("targets", "targets of the replication issue", TARGET_COLUMNS, targets)],
        notes=notes,
    )


def _fsync_tree(root: Path) -> None:
    """fsync every file and folder below ``root`` (what giod does for each copy before publishing it)."""
    from giod.storage.site import fsync_path

    for folder, _dirs, files in os.walk(root):
        for name in [*files, "."]:
            fsync_path(os.path.join(folder, name))


def plot(outcome: Outcome, path: Path) -> None:
    rows = outcome.table("results").rows
    groups: list[tuple[str, str, float]] = []  # (label, giod's client, RTT)
    for t in sorted({r["rtt_ms"] for r in rows if r["client"] == GIOD}):
        groups.append((f"{t:g} ms", GIOD, t))
        if any(r["client"] == GIOD_PROXIED and r["rtt_ms"] == t for r in rows):
            groups.append((f"{t:g} ms, proxy", GIOD_PROXIED, t))

    def value(client: str, t: float, n: int = 1) -> float | None:
        return next((r["mb_per_s"] for r in rows if r["client"] == client and r["rtt_ms"] == t
                     and r["streams"] == n), None)

    series: dict[str, list[float | None]] = {
        CURL: [value(CURL, t) if client == GIOD else None for _, client, t in groups]}
    for n in sorted({r["streams"] for r in rows if r["client"] == GIOD}):
        series[f"giod, {n} stream{'s' if n > 1 else ''}"] = [value(client, t, n) for _, client, t in groups]
    fig, (ax,) = figure("giod replicate between two giod servers")
    grouped_bars(ax, [label for label, _, _ in groups], series, "MB/s")
    cp_rate = next(r["mb_per_s"] for r in rows if r["client"] == CP)
    ax.axhline(cp_rate, color="k", linestyle="--", linewidth=1, label=f"cp: {cp_rate:,.0f} MB/s")
    durable = next(r["mb_per_s"] for r in rows if r["client"] == CP_SYNC)
    ax.axhline(durable, color="k", linestyle=":", linewidth=1, label=f"cp + fsync: {durable:,.0f} MB/s")
    ax.legend(fontsize="small")
    save(fig, path)


@click.command("replicate")
@click.option("--events", type=click.IntRange(min=DATABASES), default=None,
              help=f"Events [default: {DEFAULT_EVENTS:,}; {QUICK_EVENTS:,} with --quick].")
@click.option("--repeat", type=click.IntRange(min=1), default=None,
              help="Timed repeats; medians are quoted [default: 3; 1 with --quick].")
@click.option("--quick", is_flag=True, help="Tiny sizes: a smoke test of the whole benchmark.")
@click.option("-o", "--output", type=click.Path(file_okay=False), default="benchmarks/results", show_default=True,
              help="Directory for bench-<name>.json and .png.")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Directory (on the disk to measure) for the benchmark's temporary data "
                   "[default: the system's temporary directory].")
@click.option("--streams", "streams_text", default=None,
              help="Comma-separated numbers of streams [default: 1,4,16,64; 1,4 with --quick].")
@click.option("--rtts", "rtts_text", default=None,
              help="Comma-separated round-trip times in ms [default: 0,50,250; 0,50 with --quick].")
@click.option("--bandwidth-mbit", type=click.FloatRange(min=0), default=0, show_default=True,
              help="Bandwidth cap of the link in Mbit/s (0: no cap).")
def command(events: int | None, repeat: int | None, quick: bool, output: str, workdir: str | None,
            streams_text: str | None, rtts_text: str | None, bandwidth_mbit: float) -> None:
    """Replication between two giod serve sites at 0, 50, 250 ms, 1/4/16/64 streams, beside cp and curl.

    Example: giod bench replicate --quick
    """
    from giod_bench.report import publish

    streams = QUICK_STREAMS if quick else STREAMS
    if streams_text is not None:
        streams = numbers(streams_text, "--streams", int, 1)
    rtts = (QUICK_RTTS_MS if quick else RTTS_MS) if rtts_text is None else numbers(rtts_text, "--rtts")
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    with Bars() as bars:
        outcome = run(events or (QUICK_EVENTS if quick else DEFAULT_EVENTS), streams, rtts,
                      repeat or (1 if quick else 3), bandwidth_mbit * 1e6 / 8 if bandwidth_mbit else None,
                      workdir, bars)
    json_path, png_path = publish(outcome, output, plot)
    click.echo(f"wrote {json_path} and {png_path}")
