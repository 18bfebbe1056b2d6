"""The WAN benchmark's crowd: many concurrent clients reading the collection straight at the server."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from giod.errors import GiodError
from giod_bench.report import MB
from giod_bench.wanpeers import _Data, _file_url

PIECE = 4 << 20  # concurrent clients' range requests: the read scheduler's piece size
AGGREGATE_SHARE = 16  # at most this many times the collection is read in all by the concurrent clients


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
    argv = [sys.executable, "-c", "from giod_bench.wancrowd import _aggregate_worker; _aggregate_worker()"]
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
