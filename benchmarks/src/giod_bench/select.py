"""Selection benchmark: tag selections of 0.1 %, 1 %, 10 % beside a full scan.

One dataset of ``events`` synthetic events (hits and tags only: about 10 hits
and 200 payload bytes per event) is written once per cluster size. Each
selection cuts on the tag ``ht`` at the quantile that keeps the wanted
fraction, then reads ``hits`` of the selected events through
``ds.select(expr).read(["hits"])``; the full scan reads ``hits`` and ``ht``
of every event and applies the same cut with numpy. The speed-up is the
ratio of the medians. Because ``ht`` is independent of the entry number,
selected events are spread evenly: a cluster is read when it holds at least
one of them, so the fraction of clusters read, ``1 - (1 - f)^cluster``, not
the fraction of events, sets what a selection can save.

Each cluster size is written once per number of databases (``databases``:
the writer cuts a database every ``events / databases`` events), so that the
table shows what a selection costs as the events spread over more databases;
beside it, ``len`` of the selection alone (the count) and ``ds.event(i)``
(one event, every container; median over random entries, warm).

A process's first count reads each database's own tag index; its second
merges them into the dataset's index and saves it in the federation
(``indexes/``, ``giod.read.datasetindex``). So that the saved index's gain
shows, the 0.1 % cut is also counted by new Python processes (nothing kept
in memory) that open the federation: with the saved index, and with the
dataset's ``indexes/`` folder moved away for that process and put back after.

Through a server (``served_rtt_ms``, default 250 ms): the dataset with the
most databases is served by ``giod serve`` on loopback behind the latency
proxy, and the 0.1 % cut is counted and read by a remote client: the time in
round trips and the requests it made, planned and read where the data are
(``POST /api/v1/select``) beside the client reading the files itself (the
path before, measured once: it takes a round trip per database).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np

import giod
from giod.errors import ConfigError, StorageError
from giod.read import datasetindex
from giod.read.selection import MERGE_FROM
from giod.testing import synthetic
from giod_bench.report import (
    MB,
    Bars,
    Column,
    Outcome,
    Table,
    Timing,
    figure,
    grouped_bars,
    ratio,
    round_robin,
    save,
    stopwatch,
)

__all__ = ["CLUSTERS", "COLLECTION", "DATABASES", "DEFAULT_EVENTS", "FRACTIONS", "QUICK_EVENTS", "plot", "run"]

DEFAULT_EVENTS = 2_000_000
QUICK_EVENTS = 20_000
FRACTIONS = (0.001, 0.01, 0.1)
CLUSTERS: tuple[int | None, ...] = (
    100,
    10_000,
    None,
)  # events per cluster; None: giod's default (16 MB)
DATABASES = (10, 100)  # databases per dataset
EVENT_LOOKUPS = 20  # random entries per ds.event(i) measurement
EVENT_GOAL_MS = 1.0  # ds.event(i) warm, one event with every container it names (issue 25)
COLLECTION = "hits"
HITS_PER_EVENT = 10
TAG = "ht"
_CHUNK = 250_000  # events generated and appended at a time
FIRST_COUNT: dict[int, float] = {}  # dataset -> seconds of its first count (each database's own tag index)
BUILD_COUNT: dict[int, float] = {}  # dataset -> seconds of its second count, which builds the merged index
_FIELDS = [COLLECTION, "run", "event", "njets", "ntracks", "ht", "lead_pt"]

# a new process's first count: ROOT DATASET EXPRESSION; prints the count, its seconds, the seconds of the imports,
# the opening and the dataset's listing of databases before it, and whether the merged index answered it (in memory
# after the count: read from the saved file, or built by the count itself)
NEW_PROCESS_COUNT = """
import json, sys, time
start = time.perf_counter()
import giod
from giod.read import datasetindex
from giod.read.selection import MERGE_FROM
root, name, expr = sys.argv[1:4]
fed = giod.open(root)
ds = fed.dataset(name)
len(ds.databases())  # the catalog's first listing, as the bench process's first count follows its own
opened = time.perf_counter() - start
start = time.perf_counter()
n = len(ds.select(expr))
seconds = time.perf_counter() - start
merged = datasetindex._cache(fed.store).newest(name, expr.split()[0]) is not None
fed.close()
print(json.dumps({"count": n, "seconds": seconds, "open_s": opened, "merged": merged}))
"""


def _cluster_label(cluster: int | None) -> str:
    return "16 MB (default)" if cluster is None else f"{cluster:,} events"


def _write(fed: Any, events: int, layouts: Sequence[tuple[int | None, int]], advance: Any
           ) -> tuple[list[Any], np.ndarray, int]:
    """One dataset per (cluster size, number of databases), the same events in each.

    Returns the datasets, every event's tag value and the payload bytes a
    full scan decodes (hits and the tag).
    """
    schema = synthetic.schema()
    datasets = [fed.create_dataset(f"select_{k}", schema) for k in range(len(layouts))]
    writers = [ds.writer(cluster_events=c, database_events=-(-events // d), database_bytes=1 << 62)
               for ds, (c, d) in zip(datasets, layouts, strict=True)]
    tags = []
    payload = 0
    try:
        for start in range(0, events, _CHUNK):
            n = min(_CHUNK, events - start)
            chunk = synthetic.events(
                n,
                seed=start // _CHUNK,
                first_event=start,
                hits=HITS_PER_EVENT,
                cells=0,
                tracks=0,
                jets=4,
            )[_FIELDS]
            tags.append(ak.to_numpy(chunk[TAG]))
            payload += chunk[COLLECTION].nbytes + chunk[TAG].nbytes
            for w in writers:
                w.append(chunk)
            advance(n)
    except BaseException:
        for w in writers:
            w.abort()
        raise
    for w in writers:
        w.commit()
    return datasets, np.concatenate(tags), payload


_MARK = "giod-bench-select.json"


def _kept(folder: Path, events: int, layouts: Sequence[tuple[int | None, int]]) -> tuple[np.ndarray, int] | None:
    """The tag values and scan payload of datasets kept in ``folder`` by an earlier run; None if empty."""
    mark = folder / _MARK
    if not mark.exists():
        if any(folder.iterdir()):
            raise ConfigError(f"--keep: {folder} holds other files; give an empty or a kept folder")
        return None
    try:
        made = json.loads(mark.read_text())
        same = made["events"] == events and [tuple(x) for x in made["layouts"]] == [tuple(x) for x in layouts]
        tag = np.load(folder / "tags.npy") if same else None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--keep: {folder} does not hold a readable kept run ({exc})") from None
    if tag is None:
        raise ConfigError(f"--keep: {folder} holds {made['events']:,} events in layouts {made['layouts']}, "
                          f"not {events:,} in {[list(x) for x in layouts]}; give another folder")
    if len(tag) != events:
        raise ConfigError(f"--keep: {folder}'s tags hold {len(tag):,} events, not {events:,}")
    return tag, int(made["payload"])


def _remember(folder: Path, events: int, layouts: Sequence[tuple[int | None, int]], tag: np.ndarray,
              payload: int) -> None:
    """Mark ``folder`` as holding these datasets (written last: a run cut short leaves no mark)."""
    np.save(folder / "tags.npy", tag)
    (folder / _MARK).write_text(json.dumps({"events": events, "layouts": [list(x) for x in layouts],
                                            "payload": payload}))


def _clusters_read(ds: Any, entries: np.ndarray) -> tuple[int, int]:
    """(clusters of ``hits`` holding a selected entry, all clusters of ``hits``)."""
    container = ds.schema.container_of(COLLECTION)
    touched = total = 0
    for db in ds.databases():  # one step per database, vectorised inside
        sizes = db.container(container).cluster_entries
        bounds = np.cumsum(sizes)
        local = entries[(entries >= db.first_entry) & (entries < db.stop_entry)] - db.first_entry
        touched += len(np.unique(np.searchsorted(bounds, local, side="right")))
        total += len(sizes)
    return touched, total


def run(
    events: int = DEFAULT_EVENTS,
    fractions: Sequence[float] = FRACTIONS,
    clusters: Sequence[int | None] = CLUSTERS,
    repeat: int = 3,
    databases: Sequence[int] = DATABASES,
    workdir: str | os.PathLike[str] | None = None,
    bars: Bars | None = None,
    served_rtt_ms: float | None = 250.0,
    keep: str | os.PathLike[str] | None = None,
) -> Outcome:
    """Measure tag selections and the full scan for each cluster size (and through a server at
    ``served_rtt_ms``; None: not).

    ``keep``: a folder that holds the written datasets after the run; a later run with the same
    events and layouts reuses them instead of writing them again (another run's folder, or a
    folder holding anything else, is refused).
    """
    if events < 1 or repeat < 1 or not fractions or not clusters:
        raise ConfigError("events, repeat, fractions and cluster sizes must be given and positive")
    if any(not 0 < f < 1 for f in fractions):
        raise ConfigError("selected fractions must lie strictly between 0 and 1")
    if any(c is not None and c < 1 for c in clusters):
        raise ConfigError("cluster sizes must be positive")
    if not databases or any(d < 1 or d > events for d in databases):
        raise ConfigError("numbers of databases must be given, positive and at most the number of events")
    layouts = [(c, d) for c in clusters for d in databases]
    bars = bars or Bars(enabled=False)
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        if keep is None:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="giod-bench-select-", dir=workdir)))
        else:
            tmp = Path(keep)
            tmp.mkdir(parents=True, exist_ok=True)
        kept = _kept(tmp, events, layouts) if keep is not None else None
        if kept is not None:
            fed = giod.open(tmp / "fed")
            datasets = [fed.dataset(f"select_{k}") for k in range(len(layouts))]
            tag, payload = kept
        else:
            fed = giod.open(tmp / "fed", create=True)
            with bars.task(f"writing {events:,} events × {len(layouts)} layouts", events) as advance:
                datasets, tag, payload = _write(fed, events, layouts, advance)
            if keep is not None:
                _remember(tmp, events, layouts, tag, payload)
        ordered = np.sort(tag)
        cuts = []
        for f in fractions:
            passing = max(1, round(f * events))
            # a cut at a stored value keeps exactly ``passing`` events when values do not tie
            cuts.append((f, float(ordered[events - passing - 1]) if passing < events else float(ordered[0]) - 1.0))
        expected = [int(np.count_nonzero(tag > cut)) for _, cut in cuts]
        clocks: dict[tuple[int, str, int], Callable[[int], float]] = {}
        for k, ds in enumerate(datasets):
            clocks.update(_clocks(ds, k, cuts, expected))
        with bars.task("selecting and scanning (in turn)", repeat * len(clocks)) as advance:
            timings = round_robin(clocks, repeat, advance=advance)
        for k, (ds, layout) in enumerate(zip(datasets, layouts, strict=True)):
            rows += _rows(ds, k, layout, cuts, expected, timings)
        firsts = []
        with bars.task("first counts in new processes", len(datasets)) as advance:
            for k, (ds, layout) in enumerate(zip(datasets, layouts, strict=True)):
                firsts.append(_first_counts(tmp / "fed", tmp / "indexes-aside", ds, k, layout, cuts[0],
                                            expected[0], repeat))
                advance(1)
        served: list[dict[str, Any]] = []
        if served_rtt_ms is not None:
            k = max(range(len(layouts)), key=lambda i: (layouts[i][1], layouts[i][0] is None))
            with bars.task(f"through a server at {served_rtt_ms:g} ms", 1):
                served = _served(fed, datasets[k].name, layouts[k][1], cuts[0], expected[0], repeat,
                                 served_rtt_ms / 1e3)
        fed.close()
    notes = [
        f"{events:,} events, {HITS_PER_EVENT} hits per event on average; the full scan reads "
        f"{payload / MB:.0f} MB of payload (hits + ht) and cuts with numpy; medians of {repeat} "
        "rounds, every measurement once per round",
        "selection time = tag query (through the tag index, or reading ht of every event past a tenth "
        "of the index: docs/selection.md) + reading the clusters of hits that hold a selected event; "
        "'clusters read' is that share; 'count s' is len(ds.select(expr)) alone, its speed-up the full "
        "scan over it; 'worst round' is the lowest of each round's scan over the same round's select+read, "
        "'1st round' the first round's (the process's first read of those events: nothing kept yet); "
        "'1st count s' is the process's first count (each database's own tag index), "
        "'2nd count s' the next, which builds the dataset's merged index the timed counts use; "
        f"'event ms' is ds.event(i) (every container) at {EVENT_LOOKUPS} random entries, "
        "'pinned ms' the same on the dataset pinned at its version (ds.at(v): no query for the current version); "
        f"the goal for both is <= {EVENT_GOAL_MS:g} ms warm, the last column says whether both meet it",
        "first counts: 'new process s' is the first count of a new Python process that opens the federation "
        "(its imports, the opening and a listing of the dataset's databases untimed: 'open s'), the merged "
        "index saved under indexes/ "
        "present; 'no saved index s' the same with the dataset's saved index moved away for that process "
        "(and put back after); medians of "
        f"{repeat} of each in turn, every count checked; 'saved read' whether the saved file answered "
        f"(none is saved for fewer than {MERGE_FROM} databases: no count merges them)",
    ]
    return Outcome(
        name="select",
        parameters={
            "events": events,
            "fractions": list(fractions),
            "repeat": repeat,
            "clusters": list(clusters),
            "databases": list(databases),
            "hits_per_event": HITS_PER_EVENT,
            "tag": TAG,
            "scan_payload_mb": payload / MB,
        },
        tables=[
            Table(
                "results",
                f"select: {events:,} events, cut on {TAG}, read {COLLECTION}",
                COLUMNS,
                rows,
            ),
            Table("first_counts", f"the {cuts[0][0]:.1%} cut: a process's first count, and a new process's "
                  "with the saved merged index and without", FIRST_COLUMNS, firsts),
            *([Table("served", f"the {cuts[0][0]:.1%} cut through a server at {served_rtt_ms:g} ms RTT "
                     "(goal: at most 3 round trips plus the selected bytes)", SERVED_COLUMNS, served)]
              if served else []),
        ],
        notes=notes,
    )


def _clocks(
    ds: Any, k: int, cuts: list[tuple[float, float]], expected: list[int]
) -> dict[tuple[int, str, int], Callable[[int], float]]:
    """The measurements of dataset ``k``: its full scan, and each cut's tag query and read."""

    def scan(_: int) -> None:
        arr = ds.read([COLLECTION, TAG])
        passed = arr[COLLECTION][ak.to_numpy(arr[TAG]) > cuts[0][1]]
        if len(passed) != expected[0]:
            raise StorageError(f"the full scan found {len(passed)} events, {expected[0]} pass")

    lookups = np.random.default_rng(k).integers(0, len(ds), EVENT_LOOKUPS)

    pinned = ds.at(ds.federation.version)  # no catalog query for the current version on each call

    def event(i: int, at: Any = ds) -> Callable[[int], Any]:
        return lambda _: at.event(int(lookups[i]))

    out: dict[tuple[int, str, int], Callable[[int], float]] = {(k, "scan", 0): stopwatch(scan)}
    for i in range(EVENT_LOOKUPS):  # one clock per entry: each measured once per round, in turn with the rest
        out[(k, "event", i)] = stopwatch(event(i))
        out[(k, "pinned event", i)] = stopwatch(event(i, pinned))
    for j, ((_, cut), want) in enumerate(zip(cuts, expected, strict=True)):
        expr = f"{TAG} > {cut!r}"
        start = time.perf_counter()
        found = len(ds.select(expr))
        if j == 0:  # the process's first count: each database's own tag index answers it
            FIRST_COUNT[k] = time.perf_counter() - start
            start = time.perf_counter()  # the second builds the merged index the timed ones reuse
            if len(ds.select(expr)) != want:
                raise StorageError(f"selection {expr!r} does not find the {want} events that pass")
            BUILD_COUNT[k] = time.perf_counter() - start
        if found != want:
            raise StorageError(f"selection {expr!r} does not find the {want} events that pass")

        def query(_: int, expr: str = expr) -> int:
            return len(ds.select(expr))

        def read(_: int, expr: str = expr) -> ak.Array:
            return ds.select(expr).read([COLLECTION])

        out[(k, "query", j)] = stopwatch(query)
        out[(k, "read", j)] = stopwatch(read)
    return out


def _new_process_count(root: Path, name: str, expr: str, want: int) -> dict[str, Any]:
    """The first count of ``expr`` in a new process that opens the federation at ``root``; checked to be ``want``."""
    done = subprocess.run([sys.executable, "-c", NEW_PROCESS_COUNT, str(root), name, expr],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise StorageError(f"a new process could not count {expr!r} in {name}: {done.stderr.strip()[-2000:]}")
    got: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if got["count"] != want:
        raise StorageError(f"a new process counted {got['count']} events of {expr!r} in {name}, not {want}")
    return got


def _first_counts(root: Path, aside: Path, ds: Any, k: int, layout: tuple[int | None, int],
                  cut: tuple[float, float], want: int, repeat: int) -> dict[str, Any]:
    """A new process's first count of ``cut`` on ``ds`` with the merged index saved in the federation and
    without it (``indexes/<dataset>`` moved to ``aside`` for that process, then put back), in turn
    ``repeat`` times."""
    expr = f"{TAG} > {cut[1]!r}"
    folder = datasetindex.saved_path(root, ds.name, TAG).parent
    saved = folder.is_dir()  # none when no count merged the databases (fewer than MERGE_FROM)
    runs: dict[str, list[dict[str, Any]]] = {"saved": [], "bare": []}
    for _ in range(repeat):
        if saved:
            runs["saved"].append(_new_process_count(root, ds.name, expr, want))
        moved = False
        if folder.is_dir():
            folder.rename(aside)
            moved = True
        try:
            runs["bare"].append(_new_process_count(root, ds.name, expr, want))
        finally:
            if folder.exists():  # saved by that count itself (it merges at once past MERGE_AT_ONCE databases)
                shutil.rmtree(folder)
            if moved:
                aside.rename(folder)
    if saved and not datasetindex.saved_path(root, ds.name, TAG).is_file():
        raise StorageError(f"the saved index of {ds.name} was not put back")

    def median(how: str, key: str = "seconds") -> float | None:
        return float(np.median([r[key] for r in runs[how]])) if runs[how] else None

    cluster, databases = layout
    return {
        "cluster": _cluster_label(cluster), "cluster_events": cluster, "databases": databases,
        "fraction": cut[0], "selected": want,
        "first_count_s": FIRST_COUNT.get(k), "build_count_s": BUILD_COUNT.get(k),
        "new_count_s": median("saved"), "bare_count_s": median("bare"),
        "saved_gain": ratio(median("bare"), median("saved")),
        "open_s": float(np.median([r["open_s"] for how in runs.values() for r in how])),
        "saved_read": ("yes" if all(r["merged"] for r in runs["saved"]) else "no") if saved else None,
        "counts": {how: [r["count"] for r in rs] for how, rs in runs.items()},
        "timing": {how: [r["seconds"] for r in rs] for how, rs in runs.items()},
        "merged": {how: [r["merged"] for r in rs] for how, rs in runs.items()},
    }  # fmt: skip


def _served(fed: Any, name: str, databases: int, cut: tuple[float, float], want: int, repeat: int,
            rtt: float) -> list[dict[str, Any]]:
    """Count and read of one cut by a remote client through a latency proxy: at the source, then the files."""
    from giod.server.app import ServerThread, create_app
    from giod.testing.netlab import LatencyProxy

    expr = f"{TAG} > {cut[1]!r}"
    local = ak.to_list(fed.dataset(name).select(expr).read([COLLECTION]))
    token = fed.catalog.create_token("read")[1]
    rows = []
    with ServerThread(create_app(str(fed.root))) as url:
        port = int(url.rsplit(":", 1)[1])
        with LatencyProxy(target=("127.0.0.1", port), rtt=rtt) as proxy:
            for how, rounds in (("at the source", repeat), ("client reads the files", 1)):
                counts, reads, asked = [], [], []
                for _ in range(rounds):
                    remote = giod.open(f"http://127.0.0.1:{proxy.port}", token=token)
                    catalog: Any = remote.catalog
                    try:
                        if how != "at the source":
                            catalog._no_select = True  # the client plans and reads, as before
                        # pinned: the dataset's version asked once, not again when the count and the read
                        # together outlast the client's one-second reuse of the current version
                        ds = remote.dataset(name).pinned()
                        before = catalog.endpoint.requests
                        start = time.perf_counter()
                        n = len(ds.select(expr))
                        counts.append(time.perf_counter() - start)
                        start = time.perf_counter()
                        got = ds.select(expr).read([COLLECTION])
                        reads.append(time.perf_counter() - start)
                        asked.append(catalog.endpoint.requests - before)
                    finally:
                        remote.close()
                    if n != want or ak.to_list(got) != local:
                        raise StorageError(f"{how}: the remote selection differs from the local one")
                count, read = float(np.median(counts)), float(np.median(reads))
                row: dict[str, Any] = {"how": how, "databases": databases, "selected": want, "rtt_ms": rtt * 1e3,
                             "count_s": count, "count_rtts": count / rtt if rtt else None,
                             "read_s": read, "read_rtts": read / rtt if rtt else None,
                             "requests": int(np.median(asked)), "rounds": rounds}
                rows.append(row)
    rows[0]["speedup"] = ratio(float(rows[1]["read_s"]), float(rows[0]["read_s"]))
    return rows


SERVED_COLUMNS = [
    Column("how", "remote client"), Column("databases", "databases", "{:,}"), Column("selected", "events", "{:,}"),
    Column("count_s", "count s", "{:.3f}"), Column("count_rtts", "count RTTs", "{:.1f}"),
    Column("read_s", "select+read s", "{:.3f}"), Column("read_rtts", "select+read RTTs", "{:.1f}"),
    Column("requests", "requests", "{:,}"), Column("speedup", "speed-up", "{:.1f}×"),
]  # fmt: skip


def _rows(
    ds: Any,
    k: int,
    layout: tuple[int | None, int],
    cuts: list[tuple[float, float]],
    expected: list[int],
    timings: dict[tuple[int, str, int], Timing],
) -> list[dict[str, Any]]:
    cluster, databases = layout
    scan = timings[(k, "scan", 0)]
    event = Timing(tuple(t for i in range(EVENT_LOOKUPS) for t in timings[(k, "event", i)].seconds))
    pinned = Timing(tuple(t for i in range(EVENT_LOOKUPS) for t in timings[(k, "pinned event", i)].seconds))
    stored = float(ds.summary()["bytes"]) / MB
    rows = []
    for j, ((fraction, cut), want) in enumerate(zip(cuts, expected, strict=True)):
        query, read = timings[(k, "query", j)], timings[(k, "read", j)]
        touched, total = _clusters_read(ds, ds.select(f"{TAG} > {cut!r}").entries())
        rows.append(
            {
                "cluster": _cluster_label(cluster),
                "cluster_events": cluster,
                "databases": databases,
                "fraction": fraction,
                "selected": want,
                "clusters_read": touched / total if total else None,
                "query_s": query.median,
                "select_s": read.median,
                "scan_s": scan.median,
                "speedup": ratio(scan.median, read.median),
                # each round's scan over the same round's select+read: the worst round, and the cold first one
                "worst_speedup": min(a / b for a, b in zip(scan.seconds, read.seconds, strict=True) if b > 0)
                if any(b > 0 for b in read.seconds) else None,
                "first_speedup": ratio(scan.seconds[0], read.seconds[0]),
                "count_speedup": ratio(scan.median, query.median),
                "first_count_s": FIRST_COUNT.get(k),
                "build_count_s": BUILD_COUNT.get(k),
                "event_ms": event.median * 1e3,
                "pinned_event_ms": pinned.median * 1e3,
                "event_goal": "met" if max(event.median, pinned.median) * 1e3 <= EVENT_GOAL_MS else "missed",
                "tag_rate_hz": len(ds) / query.median,
                "stored_mb": stored,
                "timing": {"query": query.as_dict(), "select": read.as_dict(), "scan": scan.as_dict(),
                           "event": event.as_dict(), "pinned_event": pinned.as_dict()},
            }
        )
    return rows


COLUMNS = [
    Column("cluster", "cluster"), Column("databases", "databases", "{:,}"),
    Column("fraction", "selected", "{:.1%}"),
    Column("selected", "events", "{:,}"), Column("clusters_read", "clusters read", "{:.1%}"),
    Column("query_s", "count s", "{:.4f}"), Column("count_speedup", "count speed-up", "{:.1f}×"),
    Column("first_count_s", "1st count s", "{:.3f}"), Column("build_count_s", "2nd count s", "{:.3f}"),
    Column("select_s", "select+read s", "{:.4f}"), Column("scan_s", "full scan s", "{:.3f}"),
    Column("speedup", "speed-up", "{:.1f}×"), Column("worst_speedup", "worst round", "{:.1f}×"),
    Column("first_speedup", "1st round", "{:.1f}×"), Column("event_ms", "event ms", "{:.2f}"),
    Column("pinned_event_ms", "pinned ms", "{:.2f}"), Column("event_goal", f"event ≤ {EVENT_GOAL_MS:g} ms"),
]  # fmt: skip


FIRST_COLUMNS = [
    Column("cluster", "cluster"), Column("databases", "databases", "{:,}"),
    Column("fraction", "selected", "{:.1%}"), Column("selected", "events", "{:,}"),
    Column("first_count_s", "1st count s", "{:.3f}"), Column("build_count_s", "2nd count s", "{:.3f}"),
    Column("new_count_s", "new process s", "{:.3f}"), Column("bare_count_s", "no saved index s", "{:.3f}"),
    Column("saved_gain", "saved index gain", "{:.1f}×"), Column("saved_read", "saved read"),
    Column("open_s", "open s", "{:.3f}"),
]  # fmt: skip


def plot(outcome: Outcome, path: Path) -> None:
    """Speed-up over the full scan against the selected fraction, per cluster size; beside it the first
    counts."""
    rows = outcome.table("results").rows
    fig, (ax, counts) = figure("giod tag selection: speed-up over a full scan; first counts", ncols=2)
    firsts = outcome.table("first_counts").rows
    grouped_bars(counts, [f"{r['cluster']}\n{r['databases']:,} databases" for r in firsts],
                 {"this process, 1st count": [r["first_count_s"] for r in firsts],
                  "new process, saved index": [r["new_count_s"] for r in firsts],
                  "new process, no saved index": [r["bare_count_s"] for r in firsts]},
                 f"first count of the {firsts[0]['fraction']:.1%} cut, s" if firsts else "first count, s", log=True)
    for label in dict.fromkeys((r["cluster"], r.get("databases")) for r in rows):
        pts = [(r["fraction"], r["speedup"]) for r in rows if (r["cluster"], r.get("databases")) == label]
        where = f", {label[1]:,} databases" if label[1] is not None else ""
        ax.plot(*zip(*pts, strict=True), marker="o", label=f"cluster {label[0]}{where}")
    ax.axhline(100, linestyle="--", color="grey", label="target at 0.1 %: 100×")
    ax.axhline(1, linestyle=":", color="black")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("selected fraction of events")
    ax.set_ylabel("full scan time / selection time")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, which="both")
    save(fig, path)
