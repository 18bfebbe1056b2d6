"""WAN benchmark: one collection read through the server as the round-trip time grows, beside its peers.

The setup writes one dataset (the read collection, ``hits``, is about 150 MB
by default), exports that collection to one ROOT file, and serves both: the
federation with ``giod serve`` and the ROOT file with an XRootD server, each
in a process of its own. For every round-trip time a
:class:`~giod.testing.netlab.LatencyProxy` (in a child process, with the
bandwidth cap) stands in front of each server, and these clients read the
collection through it, in turn, round after round:

- **AMS-style pages**: one synchronous 32 KB range request at a time on one
  kept-alive connection, the page protocol of the AMS-era object servers.
  It is stopped after a few seconds (or a number of pages) and its rate
  extrapolated to the whole collection.
- **giod client**: ``giod.open(url) … ds.read([collection])``, timed from
  the open to the last byte (the open, catalog calls included, also alone).
- **pyarrow + fsspec HTTP**: ``pq.read_table`` of the same container files
  from the same server through fsspec's ``HTTPFileSystem``.
- **uproot + XRootD**: uproot reading the collection from the ROOT file over
  ``root://`` through fsspec-xrootd, the field's own data server.
- **giod server-side query**: ``ds.query(columns=[collection])``: the server
  reads and sends an Arrow IPC stream.

Throughput is the collection's container bytes (what giod stores for it)
over the time, for every client, so the rates compare the same delivered
data; the bytes that crossed the link are reported where known. The local
read (same files from disk) and the link's cap are the physical limits.
A second part measures 1, 8, 64 concurrent clients straight at the server
(no proxy): aggregate MB/s, errors and request latency percentiles.

The data and peers live in :mod:`giod_bench.wanpeers`, the concurrent
clients in :mod:`giod_bench.wancrowd`, the tables and the plot in
:mod:`giod_bench.wanresults`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from giod.errors import ConfigError, GiodError
from giod_bench.report import Bars, Outcome
from giod_bench.wancrowd import (  # noqa: F401 - re-exported
    AGGREGATE_SHARE,
    PIECE,
    _aggregate_worker,
    aggregate,
)
from giod_bench.wanpeers import (  # noqa: F401 - re-exported
    AMS,
    AMS_PAGES,
    AMS_SECONDS,
    CLIENT_ORDER,
    COLLECTION,
    DATABASE_EVENTS,
    DATASET,
    DIRECT_GIOD,
    FSSPEC,
    GIOD,
    LOCAL_GIOD,
    LOCAL_READERS,
    PAGE,
    QUERY,
    QUICK_AMS_SECONDS,
    XROOTD,
    _build,
    _Data,
    _Read,
    _xrootd_server,
    read_ams,
    read_fsspec,
    read_giod,
    read_local,
    read_local_pyarrow,
    read_local_uproot,
    read_query,
    read_xrootd,
    serve_federation,
)
from giod_bench.wanresults import (  # noqa: F401 - re-exported
    AGGREGATE_COLUMNS,
    COLUMNS,
    LIMIT_COLUMNS,
    TARGET_COLUMNS,
    _outcome,
    plot,
)
from giod_bench.wanwire import LOOPBACK, loopback_server, read_loopback  # noqa: F401 - LOOPBACK re-exported
from giod_bench.wanxrootd import GIOD_XROOTD, giod_over_xrootd

__all__ = [
    "CLIENTS",
    "COLLECTION",
    "DEFAULT_EVENTS",
    "QUICK_CLIENTS",
    "QUICK_EVENTS",
    "QUICK_RTTS_MS",
    "RTTS_MS",
    "plot",
    "run",
]

DEFAULT_EVENTS = 400_000  # about 380 MB of hits: long enough that 250 ms of latency is not the whole story
QUICK_EVENTS = 4_000
RTTS_MS = (0.0, 10.0, 50.0, 150.0, 250.0)
QUICK_RTTS_MS = (0.0, 50.0)
CLIENTS = (1, 8, 64)
QUICK_CLIENTS = (1, 8)


# -------------------------------------------------------------------- run


def run(
    events: int = DEFAULT_EVENTS,
    rtts_ms: Sequence[float] = RTTS_MS,
    bandwidth: float | None = 1000e6 / 8,
    repeat: int = 3,
    clients: Sequence[int] = CLIENTS,
    quick: bool = False,
    workdir: str | os.PathLike[str] | None = None,
    bars: Bars | None = None,
) -> Outcome:
    """Measure the collection read through the server at each RTT, beside its peers and limits.

    ``bandwidth`` is the cap in bytes/s (None: no cap).
    """
    from giod.testing.netlab import LatencyProxy

    if events < 4 or repeat < 1 or not rtts_ms or any(r < 0 for r in rtts_ms) or any(c < 1 for c in clients):
        raise ConfigError("events (≥ 4), repeat and clients must be positive, RTTs not negative")
    if bandwidth is not None and bandwidth <= 0:
        raise ConfigError("the bandwidth cap must be positive")
    bars = bars or Bars(enabled=False)
    budget = QUICK_AMS_SECONDS if quick else AMS_SECONDS
    notes: list[str] = []
    samples: dict[tuple[str, float], list[_Read]] = {}
    failures: dict[tuple[str, float], str] = {}
    with tempfile.TemporaryDirectory(prefix="giod-bench-wan-", dir=workdir) as tmp:
        work = Path(tmp)
        n_batches = -(-events // max(1, min(DATABASE_EVENTS, events // 4)))
        with bars.task("writing the dataset and the ROOT file", n_batches + 1) as advance:
            data = _build(work, events, advance)
        tokens = _Tokens(data.fed_path)
        try:
            with (
                serve_federation(data.fed_path) as server,
                _xrootd_server(data.root_file.parent, notes) as xrd,
                giod_over_xrootd(data, work, notes) as gx,  # the giod client over root://, same files
            ):
                # one untimed round straight at the servers: imports, page cache, the server's first requests
                for reader in LOCAL_READERS.values():
                    reader(data)
                read_query(_base(server), tokens.new(), data, data.n_events)
                if xrd is not None:
                    read_xrootd(xrd, data)
                if gx is not None:
                    gx.read(gx.address)
                local = {label: [reader(data) for _ in range(repeat)] for label, reader in LOCAL_READERS.items()}
                direct, direct_fsspec, wire, checked = _straight(server, tokens, data, repeat)
                direct_xrootd = [gx.read(gx.address) for _ in range(repeat)] if gx is not None else []
                steps = len(rtts_ms) * repeat
                with bars.task("reading at each round-trip time", steps) as advance:
                    for rtt in rtts_ms:
                        with (
                            LatencyProxy(server, rtt=rtt / 1000, bandwidth=bandwidth, isolate=True) as p_http,
                            _maybe_proxy(xrd, rtt, bandwidth) as p_xrd,
                            _maybe_proxy(None if gx is None else gx.address, rtt, bandwidth) as p_gx,
                        ):
                            for i in range(repeat):
                                clocks = _clocks(data, tokens, p_http.address, p_xrd, budget, i)
                                if gx is not None:
                                    clocks[GIOD_XROOTD] = lambda: gx.read(p_gx.address)
                                for label, clock in clocks.items():
                                    key = (label, rtt)
                                    if key in failures:
                                        continue
                                    try:
                                        samples.setdefault(key, []).append(clock())
                                    except Exception as exc:
                                        if label == GIOD:
                                            raise
                                        failures[key] = f"{type(exc).__name__}: {str(exc)[:200]}"
                                advance(1)
                with bars.task("concurrent clients at 0 ms", len(clients)) as advance:
                    crowd = []
                    for c in clients:
                        crowd.append(aggregate(server, tokens.new(), data, c))
                        advance(1)
        finally:
            tokens.close()
    return _outcome(
        data,
        events,
        rtts_ms,
        bandwidth,
        repeat,
        budget,
        samples,
        failures,
        local,
        direct,
        direct_fsspec,
        crowd,
        xrd is not None,
        notes,
        direct_xrootd,
        wire,
        checked,
    )


def _straight(server: tuple[str, int], tokens: _Tokens, data: _Data, repeat: int
              ) -> tuple[list[_Read], list[_Read], dict[int, list[float]], dict[int, list[float]]]:
    """The direct path, round by round: the giod client, pyarrow + fsspec and the loopback itself (sendfile to
    recv_into over 1, 2 and 4 connections, without and with a CRC-32C of every byte as it lands) each read
    the collection once a round, so that their ratios come from the same moments of a shared machine. One
    untimed round first: imports, the page cache, the servers' first requests."""
    paths = [path for path, _ in data.files]
    direct: list[_Read] = []
    fsspec: list[_Read] = []
    wire: dict[int, list[float]] = {1: [], 2: [], 4: []}
    checked: dict[int, list[float]] = {1: [], 2: [], 4: []}
    with loopback_server(data.site_root) as address:
        for i in range(repeat + 1):
            giod_read = read_giod(_base(server), tokens.new(), data)
            fsspec_read = read_fsspec(_base(server), tokens.new(), data)
            moved = {(n, check): read_loopback(address, paths, n, checked=check)
                     for n in wire for check in (False, True)}
            if any(got != data.nbytes for _, got in moved.values()):
                raise GiodError(f"the loopback moved {sorted(g for _, g in moved.values())} bytes of {data.nbytes}")
            if i:
                direct.append(giod_read)
                fsspec.append(fsspec_read)
                for (n, check), (seconds, _) in moved.items():
                    (checked if check else wire)[n].append(seconds)
    return direct, fsspec, wire, checked


def _base(address: tuple[str, int]) -> str:
    return f"http://{address[0]}:{address[1]}"


class _Tokens:
    """Fresh read tokens: a new token gives the giod client a new connection pool, as a new process has."""

    def __init__(self, fed_path: Path):
        import giod

        self.fed = giod.open(fed_path, create=False)

    def new(self) -> str:
        return str(self.fed.catalog.create_token("read", DATASET, note="giod bench wan")[1])

    def close(self) -> None:
        self.fed.close()


@contextmanager
def _maybe_proxy(target: tuple[str, int] | None, rtt: float, bandwidth: float | None) -> Iterator[Any]:
    from giod.testing.netlab import LatencyProxy

    if target is None:
        yield None
        return
    with LatencyProxy(target, rtt=rtt / 1000, bandwidth=bandwidth, isolate=True) as proxy:
        yield proxy


def _clocks(
    data: _Data, tokens: _Tokens, http_at: tuple[str, int], xrd: Any, budget: float, round_: int
) -> dict[str, Callable[[], _Read]]:
    base = _base(http_at)
    clocks: dict[str, Callable[[], _Read]] = {
        AMS: lambda: read_ams(http_at, tokens.new(), data, budget, AMS_PAGES),
        GIOD: lambda: read_giod(base, tokens.new(), data),
        FSSPEC: lambda: read_fsspec(base, tokens.new(), data),
    }
    if xrd is not None:
        clocks[XROOTD] = lambda: read_xrootd(xrd.address, data)
    # a limit past the end changes nothing but the cache key: every round is computed, not a cache hit
    clocks[QUERY] = lambda: read_query(base, tokens.new(), data, data.n_events + 1 + round_)
    return clocks
