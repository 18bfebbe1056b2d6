"""``giod bench proxy``: the latency proxy as a command, to test reads from far away."""

from __future__ import annotations

import sys
from typing import Any

import click

from giod.errors import ConfigError
from giod_bench.options import _quick
from giod_bench.report import Column, Outcome, Table


@click.command("proxy")
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
    from giod.testing import netlab  # asyncio and the proxy load when the command runs
    from giod.testing.proxyloop import DEFAULT_WINDOW, Faults, Settings
    from giod_bench.report import print_tables

    rate = None if bandwidth is None else bandwidth * 1e6 / 8
    if check:
        rtts = (rtt / 1000,) if rtt else (0.0, 0.010, 0.050, 0.150, 0.250)
        size = 20_000_000 if quick else 200_000_000
        print_tables(
            calibrate(rtts, bandwidth=rate, size=size, pings=5 if quick else 20, repeat=1 if quick else 3)
        )
        return
    if target is None:
        raise ConfigError("--target HOST:PORT is required (or --check)")
    settings = Settings(
        target=netlab.parse_target(target),
        rtt=rtt / 1000,
        bandwidth=rate,
        window=window or DEFAULT_WINDOW,
        handshake=not no_handshake,
        listen=(host, listen),
        faults=Faults(drop_after=drop_after, flip_at=flip_at, connections=connections),
    )

    def announce(line: str) -> None:
        click.echo(line)
        sys.stdout.flush()

    netlab.serve(settings, announce)


def calibrate(
    rtts: tuple[float, ...] = (0.0, 0.010, 0.050, 0.150, 0.250),
    *,
    bandwidth: float | None = None,
    size: int = 100_000_000,
    pings: int = 10,
    repeat: int = 3,
    isolate: bool = True,
) -> Outcome:
    """Measure the proxy itself: ping times against the asked RTT, one-request transfers against the model.

    Servers run on loopback; the first row is the direct path, without proxy, as the peer.
    """
    from giod.testing.netlab import LatencyProxy
    from giod.testing.netprobe import echo_server, fetch, ping, source_server

    rows: list[dict[str, Any]] = []
    with echo_server() as echo, source_server() as source:

        def measure(label: str, rtt: float | None, echo_at: tuple[str, int], source_at: tuple[str, int]) -> None:
            times = sorted(ping(echo_at, count=pings))
            seconds = sorted(fetch(source_at, size) for _ in range(repeat))
            ping_s, fetch_s = times[len(times) // 2], seconds[len(seconds) // 2]
            model = None if rtt is None else rtt + (size / bandwidth if bandwidth else 0.0)
            rows.append({
                "path": label, "rtt_ms": None if rtt is None else rtt * 1000, "ping_ms": ping_s * 1000,
                "excess_ms": None if rtt is None else (ping_s - rtt) * 1000, "fetch_s": fetch_s,
                "model_s": model, "rate": size / fetch_s / 1e6,
                "goodput": size / (fetch_s - rtt) / 1e6 if rtt is not None and fetch_s > rtt else None,
            })  # fmt: skip

        measure("direct", None, echo, source)
        for rtt in rtts:
            with (
                LatencyProxy(echo, rtt=rtt, bandwidth=bandwidth, isolate=isolate) as pe,
                LatencyProxy(source, rtt=rtt, bandwidth=bandwidth, isolate=isolate) as ps,
            ):
                measure("proxy", rtt, pe.address, ps.address)
    cap = "no cap" if bandwidth is None else f"{bandwidth * 8 / 1e6:g} Mbit/s cap"
    columns = [
        Column("path", "path"), Column("rtt_ms", "asked RTT ms", "{:.0f}"),
        Column("ping_ms", "ping ms", "{:.2f}"), Column("excess_ms", "ping − asked ms", "{:+.2f}"),
        Column("fetch_s", f"{size / 1e6:.0f} MB s", "{:.3f}"), Column("model_s", "model s", "{:.3f}"),
        Column("rate", "MB/s", "{:,.0f}"), Column("goodput", "MB/s after 1st RTT", "{:,.0f}"),
    ]  # fmt: skip
    return Outcome(
        name="proxy",
        parameters={
            "rtts": list(rtts),
            "bandwidth": bandwidth,
            "size": size,
            "pings": pings,
            "repeat": repeat,
            "isolate": isolate,
        },
        tables=[Table("results", f"latency proxy on loopback ({cap}, medians)", columns, rows)],
        notes=[
            "ping: median of one-connection request/response of 32 bytes; model: RTT + size / bandwidth",
            "fetch: one request of SIZE bytes on a warm connection, one RTT included",
        ],
    )


