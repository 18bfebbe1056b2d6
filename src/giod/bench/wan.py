"""WAN benchmark: one collection read through the server as the round-trip time grows, beside its peers.

The setup writes one dataset (the read collection, ``hits``, is about 150 MB
by default), exports that collection to one ROOT file, and serves both: the
federation with ``giod serve`` and the ROOT file with an XRootD server, each
in a process of its own. For every round-trip time a
:class:`~giod.bench.netlab.LatencyProxy` (in a child process, with the
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
"""

from __future__ import annotations

import http.client
import os
import re
import selectors
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from giod.bench.report import MB, Bars, Column, Outcome, Table, figure, ratio, save
from giod.errors import ConfigError, GiodError

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
COLLECTION = "hits"
DATASET = "wan"
DATABASE_EVENTS = 20_000
PAGE = 32 * 1024  # the AMS page
PIECE = 4 << 20  # concurrent clients' range requests: the read scheduler's piece size
AMS_SECONDS = 3.0  # the synchronous page reader stops after this long (or AMS_PAGES pages)
QUICK_AMS_SECONDS = 0.5
AMS_PAGES = 20_000
AGGREGATE_SHARE = 16  # at most this many times the collection is read in all by the concurrent clients

AMS = "AMS-style 32 KB pages"
GIOD = "giod client"
FSSPEC = "pyarrow + fsspec HTTP"
XROOTD = "uproot + XRootD"
QUERY = "giod server-side query"
CLIENT_ORDER = (AMS, GIOD, FSSPEC, XROOTD, QUERY)


# ------------------------------------------------------------------ setup


@dataclass
class _Data:
    """What the clients read: the collection's container files, and the same collection as ROOT."""

    fed_path: Path
    site: str
    files: list[tuple[str, int]]  # (path in the site, size) of the collection's containers
    n_events: int
    root_file: Path
    site_root: Path  # where the site keeps the container files on this disk

    @property
    def nbytes(self) -> int:
        return sum(size for _, size in self.files)


def _hits_schema(schema: Any) -> Any:
    """A schema holding only the read collection (what the ROOT file carries)."""
    from giod.schema import Schema

    d = schema.to_dict()
    kind = d["collections"][COLLECTION]
    return Schema.from_dict({
        "schema_version": d["schema_version"], "name": f"{d['name']}_{COLLECTION}",
        "types": {kind: d["types"][kind]}, "collections": {COLLECTION: kind},
        "containers": {schema.container_of(COLLECTION): [COLLECTION]}, "tags": {},
    })  # fmt: skip


def _build(work: Path, events: int, advance: Callable[[int], None]) -> _Data:
    """The dataset (databases of DATABASE_EVENTS events at most) and the collection as one ROOT file."""
    import giod
    from giod.bench import synthetic
    from giod.interchange.export import write_root

    per_db = max(1, min(DATABASE_EVENTS, events // 4))
    fed = giod.open(work / "fed")
    try:
        schema = synthetic.schema()
        ds = fed.create_dataset(DATASET, schema)
        with ds.writer(database_events=per_db) as w:
            for i, start in enumerate(range(0, events, per_db)):
                w.append(synthetic.events(min(per_db, events - start), seed=100 + i, first_event=start))
                advance(1)
        ds = ds.pinned()
        container = schema.container_of(COLLECTION)
        files = []
        for db in ds.databases():
            rec = db.container(container)
            if rec is None:
                raise GiodError(f"database {db.id} has no container {container}")
            files.append((rec.path, rec.size))
        site = fed.sites()[0].name
        site_root = Path(fed.site(site).root)  # type: ignore[attr-defined]
        root_dir = work / "xrootd"
        root_dir.mkdir()
        # a root process runs xrootd as an unprivileged user: the export must be readable by others
        for d in (work, root_dir):
            d.chmod(0o755)
        root_file = root_dir / f"{COLLECTION}.root"
        write_root(root_file, ds.iterate([COLLECTION], step_size=per_db), _hits_schema(schema), embed_schema=False)
        root_file.chmod(0o644)
        advance(1)
    finally:
        fed.close()
    return _Data(work / "fed", site, files, events, root_file, site_root)


@contextmanager
def serve_federation(fed_path: Path) -> Iterator[tuple[str, int]]:
    """``giod serve`` on a free loopback port in a child process; yields its address."""
    argv = [sys.executable, "-c", "from giod.cli import main; main(prog_name='giod')",
            "serve", "-f", str(fed_path), "--port", "0"]  # fmt: skip
    child = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert child.stderr is not None
    said: deque[str] = deque(maxlen=20)
    try:
        match = None
        deadline = time.monotonic() + 60
        with selectors.DefaultSelector() as sel:
            sel.register(child.stderr, selectors.EVENT_READ)
            while match is None and time.monotonic() < deadline:
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    break
                line = child.stderr.readline()
                if not line:
                    break
                said.append(line.strip())
                match = re.search(r"at http://([\d.]+):(\d+)", line)
        if match is None:
            raise GiodError("giod serve did not start: " + (" | ".join(list(said)[-5:]) or "no answer"))
        # drained, so that a chatty server never blocks on a full pipe
        threading.Thread(target=said.extend, args=(child.stderr,), daemon=True).start()
        yield match.group(1), int(match.group(2))
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


@contextmanager
def _xrootd_server(directory: Path, notes: list[str]) -> Iterator[tuple[str, int] | None]:
    """An XRootD server exporting ``directory``; None, with a note saying why, when it cannot run here."""
    from giod.bench import xrootd

    reason = xrootd.missing()
    if reason is not None:
        notes.append(f"{XROOTD} left out: {reason}")
        yield None
        return
    server = xrootd.XRootDServer(directory)
    try:
        server.start()
    except GiodError as exc:
        notes.append(f"{XROOTD} left out: the XRootD server did not start ({exc})")
        yield None
        return
    try:
        yield server.address
    finally:
        server.stop()


# ---------------------------------------------------------------- clients


@dataclass
class _Read:
    """One timed read: seconds for the whole collection (extrapolated for AMS), and what else is known."""

    seconds: float
    open_s: float | None = None
    wire: int | None = None  # bytes that crossed the link, when known
    detail: dict[str, Any] | None = None


def _check_rows(got: int, want: int, who: str) -> None:
    if got != want:
        raise GiodError(f"{who} read {got} events, the dataset has {want}")


def _file_url(site: str, path: str) -> str:
    return f"/files/{quote(site)}/{quote(path)}"


def read_ams(address: tuple[str, int], token: str, data: _Data, budget_s: float, max_pages: int) -> _Read:
    """Synchronous 32 KB pages, one request at a time; the rate extrapolated to the whole collection."""
    conn = http.client.HTTPConnection(*address, timeout=120)
    auth = f"Bearer {token}"

    def page(path: str, start: int, stop: int) -> int:
        conn.request(
            "GET", _file_url(data.site, path), headers={"authorization": auth, "range": f"bytes={start}-{stop - 1}"}
        )
        r = conn.getresponse()
        body = r.read()
        if r.status != 206 or len(body) != stop - start:
            raise GiodError(f"page {path}@{start}: status {r.status}, {len(body)} bytes")
        return len(body)

    try:
        first_path, first_size = data.files[0]
        page(first_path, 0, min(PAGE, first_size))  # the connection is opened once, before timing
        pages = got = 0
        start = time.perf_counter()
        for path, size in data.files:
            for a in range(0, size, PAGE):
                got += page(path, a, min(a + PAGE, size))
                pages += 1
                if pages >= max_pages or time.perf_counter() - start >= budget_s:
                    break
            else:
                continue
            break
        elapsed = time.perf_counter() - start
    finally:
        conn.close()
    rate = got / elapsed
    return _Read(
        data.nbytes / rate,
        wire=got,
        detail={"pages": pages, "measured_s": elapsed, "ms_per_page": elapsed / pages * 1000},
    )


def read_giod(base: str, token: str, data: _Data) -> _Read:
    """giod's remote client: open, list, read the collection; seconds from the open to the last byte."""
    import giod

    start = time.perf_counter()
    fed = giod.open(base, token=token)
    try:
        ds = fed.dataset(DATASET).pinned()
        ds.databases()
        opened = time.perf_counter() - start
        events = ds.read([COLLECTION])
        seconds = time.perf_counter() - start
        _check_rows(len(events), data.n_events, "the giod client")
        site = fed.site(data.site)
        endpoint = site.endpoint  # type: ignore[attr-defined]
        detail = {"requests": endpoint.requests, **site.scheduler.stats}  # type: ignore[attr-defined]
        wire = endpoint.received
        site.scheduler.close()  # type: ignore[attr-defined]
        endpoint.close()
    finally:
        fed.close()
    return _Read(seconds, open_s=opened, wire=wire, detail=detail)


def read_fsspec(base: str, token: str, data: _Data) -> _Read:
    """pyarrow reading the same container files from the server through fsspec's HTTPFileSystem."""
    import pyarrow.parquet as pq
    from fsspec.implementations.http import HTTPFileSystem

    start = time.perf_counter()
    fs = HTTPFileSystem(headers={"authorization": f"Bearer {token}"}, skip_instance_cache=True)
    urls = [base + _file_url(data.site, path) for path, _ in data.files]
    table = pq.read_table(urls, filesystem=fs, columns=[COLLECTION])
    seconds = time.perf_counter() - start
    _check_rows(table.num_rows, data.n_events, "pyarrow + fsspec")
    return _Read(seconds)


def read_xrootd(address: tuple[str, int], data: _Data) -> _Read:
    """uproot reading the collection's branches from the ROOT file over root:// (fsspec-xrootd)."""
    import uproot
    from uproot.source.fsspec import FSSpecSource

    start = time.perf_counter()
    url = f"root://{address[0]}:{address[1]}//{data.root_file.name}"
    with uproot.open(url, handler=FSSpecSource) as f:
        tree = f["Events"]
        arrays = tree.arrays()
        wire = int(tree.compressed_bytes)
    seconds = time.perf_counter() - start
    _check_rows(len(arrays), data.n_events, "uproot over XRootD")
    return _Read(seconds, wire=wire)


def read_query(base: str, token: str, data: _Data, limit: int) -> _Read:
    """The server reads the collection and streams it as Arrow IPC (``Dataset.query``)."""
    import giod

    start = time.perf_counter()
    fed = giod.open(base, token=token)
    try:
        endpoint = fed.catalog.endpoint  # type: ignore[attr-defined]
        before = endpoint.received
        events = fed.dataset(DATASET).query(None, [COLLECTION], limit=limit)
        seconds = time.perf_counter() - start
        _check_rows(len(events), data.n_events, "the server-side query")
        wire = endpoint.received - before
        endpoint.close()
    finally:
        fed.close()
    return _Read(seconds, wire=wire)


def read_local(data: _Data) -> float:
    """Seconds for giod to read the collection from the same files on the local disk."""
    import giod

    start = time.perf_counter()
    with giod.open(data.fed_path, create=False) as fed:
        events = fed.dataset(DATASET).read([COLLECTION])
    seconds = time.perf_counter() - start
    _check_rows(len(events), data.n_events, "the local read")
    return seconds


def read_local_pyarrow(data: _Data) -> float:
    """Seconds for pyarrow to read the collection's container files from the local disk."""
    import pyarrow.parquet as pq

    start = time.perf_counter()
    table = pq.read_table([str(data.site_root / path) for path, _ in data.files], columns=[COLLECTION])
    seconds = time.perf_counter() - start
    _check_rows(table.num_rows, data.n_events, "pyarrow from disk")
    return seconds


def read_local_uproot(data: _Data) -> float:
    """Seconds for uproot to read the collection from the ROOT file on the local disk."""
    import uproot

    start = time.perf_counter()
    with uproot.open(data.root_file) as f:
        arrays = f["Events"].arrays()
    seconds = time.perf_counter() - start
    _check_rows(len(arrays), data.n_events, "uproot from disk")
    return seconds


LOCAL_GIOD = "giod local read (same files, from disk)"
DIRECT_GIOD = "giod client, straight at the server (no proxy)"
LOCAL_READERS: dict[str, Callable[[_Data], float]] = {
    LOCAL_GIOD: read_local,
    "pyarrow, the same container files from disk": read_local_pyarrow,
    "uproot, the ROOT file from disk": read_local_uproot,
}


# -------------------------------------------------------------- aggregate


def _aggregate_client(
    address: tuple[str, int], auth: str, plan: Sequence[tuple[str, int, int]], go: threading.Event, out: dict[str, Any]
) -> None:
    conn = http.client.HTTPConnection(*address, timeout=300)
    conn.connect()
    latencies: list[float] = []
    got = errors = 0
    go.wait()
    begin = time.monotonic()  # CLOCK_MONOTONIC: one clock for all processes of the machine
    for url, a, b in plan:
        t0 = time.monotonic()
        try:
            conn.request("GET", url, headers={"authorization": auth, "range": f"bytes={a}-{b - 1}"})
            r = conn.getresponse()
            body = r.read()
            if r.status != 206 or len(body) != b - a:
                errors += 1
                continue
        except (OSError, http.client.HTTPException):
            errors += 1
            conn.close()
            conn = http.client.HTTPConnection(*address, timeout=300)
            continue
        latencies.append(time.monotonic() - t0)
        got += len(body)
    out.update(begin=begin, end=time.monotonic(), bytes=got, errors=errors, latencies=latencies)
    conn.close()


def _aggregate_worker() -> None:
    """One process of concurrent clients (``python -c``): plan on stdin, "ready", wait for "go", results."""
    import json

    job = json.loads(sys.stdin.readline())
    address = (job["host"], job["port"])
    go = threading.Event()
    plans = [[tuple(p) for p in plan] for plan in job["plans"]]
    outs: list[dict[str, Any]] = [{} for _ in plans]
    threads = [
        threading.Thread(target=_aggregate_client, args=(address, job["auth"], p, go, o), daemon=True)
        for p, o in zip(plans, outs, strict=True)
    ]
    for t in threads:
        t.start()
    print("ready", flush=True)
    if sys.stdin.readline().strip() == "go":
        go.set()
        for t in threads:
            t.join()
    print(
        json.dumps([o or {"errors": len(p), "bytes": 0, "latencies": []} for p, o in zip(plans, outs, strict=True)]),
        flush=True,
    )


def aggregate(address: tuple[str, int], token: str, data: _Data, clients: int) -> dict[str, Any]:
    """``clients`` concurrent readers (processes × threads) of the collection's files in PIECE ranges.

    Client processes are plain interpreters (not multiprocessing), so that
    the benchmark runs the same from any main module.
    """
    import json

    import numpy as np

    pieces = [
        (_file_url(data.site, path), a, min(a + PIECE, size))
        for path, size in data.files
        for a in range(0, size, PIECE)
    ]
    each = max(1, min(len(pieces), len(pieces) * AGGREGATE_SHARE // clients))
    plans = []
    for i in range(clients):
        first = i * len(pieces) // clients  # clients start at different places, as independent jobs would
        plans.append([pieces[(first + k) % len(pieces)] for k in range(each)])
    processes = min(clients, max(1, os.cpu_count() or 1))
    argv = [sys.executable, "-c", "from giod.bench.wan import _aggregate_worker; _aggregate_worker()"]
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(processes)]
    results: list[dict[str, Any]] = []
    try:
        for p, k in zip(procs, range(processes), strict=True):
            assert p.stdin is not None
            p.stdin.write(
                json.dumps(
                    {"host": address[0], "port": address[1], "auth": f"Bearer {token}", "plans": plans[k::processes]}
                )
                + "\n"
            )
            p.stdin.flush()
        for p in procs:  # every client connected before any starts
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise GiodError("a concurrent client process did not start")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            assert p.stdout is not None
            results += json.loads(p.stdout.readline())
    finally:
        for p in procs:
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
    lat = np.array([x for r in results for x in r["latencies"]]) * 1000
    begins = [r["begin"] for r in results if "begin" in r]
    ends = [r["end"] for r in results if "end" in r]
    seconds = max(ends) - min(begins) if begins and ends else float("nan")
    total = sum(r["bytes"] for r in results)
    layout = f"{processes}×{clients // processes}" if clients % processes == 0 else f"{processes} processes"
    return {
        "clients": clients, "layout": layout, "mb_each": sum(b - a for _, a, b in plans[0]) / MB,
        "total_mb": total / MB, "seconds": seconds, "mb_per_s": total / MB / seconds,
        "requests": int(len(lat)), "errors": sum(r["errors"] for r in results),
        "p50_ms": float(np.percentile(lat, 50)) if len(lat) else None,
        "p99_ms": float(np.percentile(lat, 99)) if len(lat) else None,
        "max_ms": float(lat.max()) if len(lat) else None,
    }  # fmt: skip


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
    from giod.bench.netlab import LatencyProxy

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
            with serve_federation(data.fed_path) as server, _xrootd_server(data.root_file.parent, notes) as xrd:
                # one untimed round straight at the servers: imports, page cache, the server's first requests
                for reader in LOCAL_READERS.values():
                    reader(data)
                read_query(_base(server), tokens.new(), data, data.n_events)
                if xrd is not None:
                    read_xrootd(xrd, data)
                local = {label: [reader(data) for _ in range(repeat)] for label, reader in LOCAL_READERS.items()}
                direct = [read_giod(_base(server), tokens.new(), data) for _ in range(repeat + 1)][1:]
                direct_fsspec = [read_fsspec(_base(server), tokens.new(), data) for _ in range(repeat + 1)][1:]
                steps = len(rtts_ms) * repeat
                with bars.task("reading at each round-trip time", steps) as advance:
                    for rtt in rtts_ms:
                        with (
                            LatencyProxy(server, rtt=rtt / 1000, bandwidth=bandwidth, isolate=True) as p_http,
                            _maybe_proxy(xrd, rtt, bandwidth) as p_xrd,
                        ):
                            for i in range(repeat):
                                clocks = _clocks(data, tokens, p_http.address, p_xrd, budget, i)
                                for label, clock in clocks.items():
                                    key = (label, rtt)
                                    if key in failures:
                                        continue
                                    try:
                                        samples.setdefault(key, []).append(clock())
                                    except Exception as exc:  # noqa: BLE001 - a peer that fails is reported, not fatal
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
    )


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
    from giod.bench.netlab import LatencyProxy

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


# ---------------------------------------------------------------- results


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _outcome(
    data: _Data,
    events: int,
    rtts_ms: Sequence[float],
    bandwidth: float | None,
    repeat: int,
    budget: float,
    samples: dict[tuple[str, float], list[_Read]],
    failures: dict[tuple[str, float], str],
    local: dict[str, list[float]],
    direct: list[_Read],
    direct_fsspec: list[_Read],
    crowd: list[dict[str, Any]],
    have_xrootd: bool,
    notes: list[str],
) -> Outcome:
    size = data.nbytes
    cap = None if bandwidth is None else bandwidth / MB
    rows: list[dict[str, Any]] = []
    for rtt in rtts_ms:
        for label in CLIENT_ORDER:
            key = (label, rtt)
            reads = samples.get(key)
            if not reads or key in failures:
                why = failures.get(key) or ("no XRootD server (see the notes)" if label == XROOTD else "not measured")
                rows.append({"client": label, "rtt_ms": rtt, "mb_per_s": None, "absent": why})
                continue
            seconds = [r.seconds for r in reads]
            med = statistics.median(seconds)
            rows.append({
                "client": label, "rtt_ms": rtt, "median_s": med, "best_s": min(seconds), "seconds": seconds,
                "mb_per_s": size / MB / med, "open_s": _median([r.open_s for r in reads]),
                "after_open_mb_per_s": None if reads[0].open_s is None
                else size / MB / _median([r.seconds - (r.open_s or 0.0) for r in reads]),
                "wire_mb": None if reads[0].wire is None or label == AMS else _median([r.wire for r in reads]) / MB,
                "detail": min(reads, key=lambda r: abs(r.seconds - med)).detail,  # of the most typical round
            })  # fmt: skip
    by = {(r["client"], r["rtt_ms"]): r for r in rows}
    for r in rows:
        ams = by[(AMS, r["rtt_ms"])].get("mb_per_s")
        xrd = by[(XROOTD, r["rtt_ms"])].get("mb_per_s")
        r["vs_cap"] = ratio(r["mb_per_s"], cap)
        r["vs_ams"] = ratio(r["mb_per_s"], ams)
        r["vs_xrootd"] = ratio(r["mb_per_s"], xrd)
    direct_s = statistics.median(r.seconds for r in direct)
    limits = [
        {"what": "link cap", "mb_per_s": cap, "seconds": None if cap is None else size / bandwidth},  # type: ignore[operator]
        *({"what": label, "mb_per_s": size / MB / statistics.median(t), "seconds": statistics.median(t)}
          for label, t in local.items()),
        {"what": DIRECT_GIOD, "mb_per_s": size / MB / direct_s,
         "seconds": direct_s, "open_s": _median([r.open_s for r in direct])},
        {"what": "pyarrow + fsspec HTTP, straight at the server",
         "mb_per_s": size / MB / statistics.median(r.seconds for r in direct_fsspec),
         "seconds": statistics.median(r.seconds for r in direct_fsspec)},
    ]  # fmt: skip
    here = next(lim["mb_per_s"] for lim in limits if lim["what"] == LOCAL_GIOD)
    for lim in limits:
        lim["vs_local"] = ratio(lim["mb_per_s"], here)
    targets = _targets(rows, rtts_ms, limits, crowd, have_xrootd)
    cap_text = "no cap" if cap is None else f"{bandwidth * 8 / 1e6:g} Mbit/s cap"  # type: ignore[operator]
    notes[:0] = [
        f"the read collection ({COLLECTION}): {data.n_events:,} events in {len(data.files)} container files, "
        f"{size / MB:.1f} MB; MB/s = those bytes / seconds for every client (the same data delivered); "
        f"'wire MB' = bytes that crossed the link where known (the query sends uncompressed Arrow IPC)",
        f"{AMS}: one synchronous range request at a time on one kept-alive connection, stopped after "
        f"{budget:g} s or {AMS_PAGES:,} pages; its rate is extrapolated to the whole collection",
        f"{GIOD}: fresh client each time (new connections), seconds from giod.open to the last byte; "
        f"'open s' is giod.open + dataset + database list alone, 'MB/s after open' the rate without it",
        f"{FSSPEC}: pq.read_table of the same container files (column {COLLECTION}) through fsspec's "
        f"HTTPFileSystem; {XROOTD}: the collection exported to one ROOT file (uproot, zlib), read with "
        f"uproot over root:// through fsspec-xrootd, a latency proxy in front of the XRootD server too",
        f"{QUERY}: Dataset.query with columns {COLLECTION!r}, answered by the server as Arrow IPC; a different "
        f"limit past the end each round keeps the shared cache from answering",
        f"each RTT: latency proxies (child processes, {cap_text}) in front of giod serve (its own process) "
        f"and XRootD; clients in turn, median of {repeat} rounds",
    ]
    parameters = {
        "events": events, "rtts_ms": list(rtts_ms), "bandwidth_mbit": None if cap is None else cap * 8,
        "repeat": repeat, "collection": COLLECTION, "collection_mb": size / MB, "files": len(data.files),
        "page_bytes": PAGE, "aggregate_request_bytes": PIECE, "ams_budget_s": budget,
    }  # fmt: skip
    title_cap = "no cap" if cap is None else f"{cap * 8:g} Mbit/s"
    return Outcome(
        name="wan",
        parameters=parameters,
        tables=[
            Table(
                "results", f"reading {size / MB:.0f} MB of {COLLECTION} through the server ({title_cap})", COLUMNS, rows
            ),
            Table("limits", "physical limits and the direct path (0 ms, no proxy)", LIMIT_COLUMNS, limits),
            Table("aggregate", "concurrent clients straight at the server (0 ms, no proxy)", AGGREGATE_COLUMNS, crowd),
            Table("targets", "targets of the issue", TARGET_COLUMNS, targets),
        ],
        notes=notes,
    )


def _targets(
    rows: list[dict[str, Any]],
    rtts_ms: Sequence[float],
    limits: list[dict[str, Any]],
    crowd: list[dict[str, Any]],
    have_xrootd: bool,
) -> list[dict[str, Any]]:
    def verdict(ok: bool | None) -> str:
        return "–" if ok is None else ("met" if ok else "missed")

    far = max(rtts_ms)
    giod_far = next(r for r in rows if r["client"] == GIOD and r["rtt_ms"] == far)
    direct = next(lim for lim in limits if lim["what"] == DIRECT_GIOD)
    out = [
        {"target": f"giod at {far:g} ms ≥ 50 % of the cap", "measured": _pct(giod_far["vs_cap"]),
         "verdict": verdict(None if giod_far["vs_cap"] is None else giod_far["vs_cap"] >= 0.5)},
        {"target": f"giod at {far:g} ms ≥ 500× AMS pages", "measured": _times(giod_far["vs_ams"]),
         "verdict": verdict(None if giod_far["vs_ams"] is None else giod_far["vs_ams"] >= 500)},
        {"target": "giod at 0 ms (no proxy) ≥ 50 % of the local read", "measured": _pct(direct["vs_local"]),
         "verdict": verdict(direct["vs_local"] >= 0.5)},
    ]  # fmt: skip
    vs = [r["vs_xrootd"] for r in rows if r["client"] == GIOD]
    known = [v for v in vs if v is not None]
    out.append(
        {
            "target": "giod ≥ uproot + XRootD at every RTT",
            "measured": "no XRootD" if not have_xrootd or not known else f"worst {min(known):.2f}×",
            "verdict": verdict(None if not have_xrootd or not known else min(known) >= 1.0 and len(known) == len(vs)),
        }
    )
    if crowd:
        big = crowd[-1]
        out.append(
            {
                "target": f"{big['clients']} clients: no errors, p99 reported",
                "measured": f"{big['errors']} errors, p99 {big['p99_ms']:.0f} ms"
                if big["p99_ms"] is not None
                else f"{big['errors']} errors",
                "verdict": verdict(big["errors"] == 0),
            }
        )
    return out


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.0%}"


def _times(v: float | None) -> str:
    return "–" if v is None else f"{v:,.0f}×"


COLUMNS = [
    Column("client", "client"), Column("rtt_ms", "RTT ms", "{:g}"), Column("median_s", "median s", "{:.2f}"),
    Column("open_s", "open s", "{:.3f}"), Column("mb_per_s", "MB/s", "{:,.1f}"),
    Column("after_open_mb_per_s", "MB/s after open", "{:,.1f}"), Column("wire_mb", "wire MB", "{:,.0f}"),
    Column("vs_cap", "× cap", "{:.2f}"), Column("vs_ams", "× AMS", "{:,.0f}"),
    Column("vs_xrootd", "× XRootD", "{:.2f}"), Column("absent", "absent"),
]  # fmt: skip

LIMIT_COLUMNS = [
    Column("what", "limit / path"), Column("seconds", "s", "{:.2f}"), Column("open_s", "open s", "{:.3f}"),
    Column("mb_per_s", "MB/s", "{:,.0f}"), Column("vs_local", "× local", "{:.2f}"),
]  # fmt: skip

AGGREGATE_COLUMNS = [
    Column("clients", "clients", "{:d}"), Column("layout", "processes×threads"),
    Column("mb_each", "MB each", "{:,.0f}"), Column("total_mb", "MB", "{:,.0f}"), Column("seconds", "s", "{:.2f}"),
    Column("mb_per_s", "MB/s", "{:,.0f}"), Column("requests", "requests", "{:,d}"), Column("errors", "errors", "{:d}"),
    Column("p50_ms", "p50 ms", "{:.1f}"), Column("p99_ms", "p99 ms", "{:.1f}"),
]  # fmt: skip

TARGET_COLUMNS = [Column("target", "target"), Column("measured", "measured"), Column("verdict", "verdict")]


def plot(outcome: Outcome, path: Path) -> None:
    """Throughput against RTT (log y) with the limits; aggregate rate and p99 latency of concurrent clients."""
    import numpy as np

    rows = outcome.table("results").rows
    limits = {r["what"]: r["mb_per_s"] for r in outcome.table("limits").rows}
    fig, (ax, ax2) = figure("giod bench wan: one collection through the server as the RTT grows", ncols=2)
    for label in CLIENT_ORDER:
        pts = [(r["rtt_ms"], r["mb_per_s"]) for r in rows if r["client"] == label and r["mb_per_s"]]
        if pts:
            x, y = zip(*pts, strict=True)
            ax.plot(x, y, marker="o", label=label)
    styles = {"link cap": ":", LOCAL_GIOD: "--"}
    for what, style in styles.items():
        if limits.get(what):
            ax.axhline(limits[what], linestyle=style, color="grey", label=what)
    ax.set_yscale("log")
    ax.set_xlabel("round-trip time (ms)")
    ax.set_ylabel("collection MB/s (median)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small")
    crowd = outcome.table("aggregate").rows
    if crowd:
        x = np.arange(len(crowd))
        ax2.bar(x, [c["mb_per_s"] for c in crowd], color="tab:orange", label="aggregate MB/s")
        ax2.set_xticks(x, [str(c["clients"]) for c in crowd])
        ax2.set_xlabel("concurrent clients (0 ms, no proxy)")
        ax2.set_ylabel("aggregate MB/s")
        twin = ax2.twinx()
        twin.plot(x, [c["p99_ms"] for c in crowd], marker="s", color="tab:red", label="p99 request ms")
        twin.plot(x, [c["p50_ms"] for c in crowd], marker="o", color="tab:purple", label="p50 request ms")
        twin.set_ylabel(f"request latency ms ({PIECE >> 20} MB ranges)")
        twin.legend(fontsize="small", loc="upper left")
        ax2.grid(axis="y", alpha=0.3)
    save(fig, path)
