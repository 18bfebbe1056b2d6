"""A federation of many databases: what each operation costs as their number grows.

One real database of synthetic events is written through a writer (files,
fsyncs, catalog); the catalog is then filled in bulk (``commit_databases``,
``FILL_GROUP`` at a time) with copies of its record that name the same files
and carry their own tag statistics (``ht`` of database k lies in
``[1e6 + k, 1e6 + k + 0.5]``, beyond any real event's), so that a selection
on ``ht`` can match exactly one database and ``ds.event(i)`` reads real files
whatever database holds entry i. At every checkpoint, on SQLite and on
PostgreSQL, with a freshly opened federation for every timing:

* ``len(ds)``;
* planning a selection that one database can match (``ds.select(...)``
  and its ``databases()``: the catalog's pruning), checked to keep one;
* ``ds.event(i)`` for an entry in a random database;
* listing: records per second of the streamed listing of whole records
  (``Catalog.iter_databases``) and of one line per database
  (``Catalog.database_rows``, what ``giod show --all`` prints) over up to
  ``LIST_CAP`` databases, beside the driver alone reading as many rows of the
  ``databases`` table (the floor under any listing);
* registrations per second: ``REGISTRATIONS`` single ``commit_database``
  calls from ``WRITERS`` threads (group commit), counted in the fill.

Each beside its goal: ≤ 20 ms; ≥ 100,000 records/s; ≥ 500/s (SQLite) and
≥ 2,000/s (PostgreSQL).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from itertools import islice
from pathlib import Path
from typing import Any

import giod
from giod.catalog import Catalog, ContainerSpec, DatabaseCommit
from giod.catalog.records import DatabaseRecord
from giod.testing import synthetic
from giod_bench.catalogoutcome import _throwaway_postgres
from giod_bench.report import Bars, Column, Outcome, Table, figure, save

DEFAULT_DATABASES = 1_000_000
QUICK_DATABASES = 2_000
FILL_GROUP = 2_000  # commits per commit_databases call while filling
LIST_CAP = 100_000  # databases listed at a checkpoint (the rate, not the whole of a million)
REGISTRATIONS = 400
EVENT_CAP = 30.0  # seconds: a ds.event slower than this at one checkpoint is not timed at the next
WRITERS = 8
GOALS = {"len_ms": 20.0, "plan_ms": 20.0, "event_ms": 20.0, "rows_rate": 100_000.0}
REGISTRATION_GOAL = {"SQLite": 500.0, "PostgreSQL": 2_000.0}
DATASET = "many"
_HT = 1e6  # the synthetic databases' ht lies above every real event's


def checkpoints(n: int) -> list[int]:
    """1k, 10k, 100k, … up to ``n``, and ``n`` itself."""
    points = [c for c in (1_000, 10_000, 100_000, 1_000_000, 10_000_000) if c < n]
    return [*points, n]


def _copies(template: DatabaseRecord, site: str) -> Callable[[int], DatabaseCommit]:
    specs = tuple(
        ContainerSpec(c.name, c.path, c.checksum, c.size, c.cluster_entries, c.schema_id, format=c.format,
                      cluster_checksums=c.cluster_checksums)
        for c in template.containers
    )
    stats = dict(template.tag_stats)

    def commit(k: int) -> DatabaseCommit:
        return DatabaseCommit(DATASET, template.n_events, site, specs, {**stats, "ht": (_HT + k, _HT + k + 0.5)},
                              writer="bench", program="giod_bench.databases")

    return commit


def _median_ms(setup: Callable[[], Any], fn: Callable[[Any], Any], repeat: int, budget: float = 60.0) -> float:
    """Median of ``repeat`` timings of ``fn(setup())`` in ms (``setup`` untimed); fewer when they take
    longer than ``budget`` s."""
    times = []
    for _ in range(repeat):
        given = setup()
        start = time.perf_counter()
        fn(given)
        times.append(time.perf_counter() - start)
        if sum(times) > budget:
            break
    return 1e3 * statistics.median(times)


def _driver_rate(catalog: Catalog, n: int) -> float:
    """Rows/s of the driver alone reading ``n`` rows of the databases table: the floor under any listing."""
    raw = catalog._engine.raw_connection()
    try:
        cursor: Any = raw.cursor()
        start = time.perf_counter()
        cursor.execute(f"SELECT * FROM databases LIMIT {int(n)}")  # noqa: S608 - an integer
        got = len(cursor.fetchall())
        seconds = time.perf_counter() - start
        raw.rollback()
    finally:
        raw.close()
    return got / seconds


def measure(url_or_root: str, n: int, repeat: int = 5, progress: Callable[[int], None] | None = None
            ) -> list[dict[str, Any]]:
    """Fill one federation to ``n`` databases; one row of costs per checkpoint."""
    fed = giod.open(url_or_root, create=True)
    if not fed.store.sites():
        raise RuntimeError("the federation has no site")
    site = fed.store.sites()[0].name
    ds = fed.create_dataset(DATASET, synthetic.schema())
    with ds.writer(database_events=10) as w:
        w.append(synthetic.events(10, seed=1))
    catalog = fed.catalog
    assert isinstance(catalog, Catalog)
    template = catalog.databases(DATASET)[0]
    commit = _copies(template, site)
    done, rng = 1, random.Random(7)
    rows: list[dict[str, Any]] = []
    for point in checkpoints(n):
        while done < point - REGISTRATIONS:
            count = min(FILL_GROUP, point - REGISTRATIONS - done)
            catalog.commit_databases([commit(k) for k in range(done, done + count)])
            done += count
            if progress is not None:
                progress(count)
        count = point - done  # the last REGISTRATIONS, one commit_database each from WRITERS threads
        start = time.perf_counter()
        with ThreadPoolExecutor(WRITERS) as pool:
            list(pool.map(lambda k: catalog.commit_database(commit(k)), range(done, done + count)))
        registered = count / (time.perf_counter() - start) if count else float("nan")
        done += count
        if progress is not None:
            progress(count)
        def fresh() -> Any:  # a federation opened anew: nothing cached from the timing before
            return giod.open(url_or_root).dataset(DATASET)

        def plan(ds: Any, done: int = done) -> None:
            target = rng.randrange(1, done)  # another selection each time
            kept = ds.select(f"ht >= {_HT + target} and ht <= {_HT + target + 0.25}").databases()
            if len(kept) != 1:
                raise RuntimeError(f"the plan kept {len(kept)} databases, not 1")

        def event(ds: Any, done: int = done) -> None:
            ds.event(rng.randrange(10, 10 * done))

        cost_len = _median_ms(fresh, len, repeat)
        cost_plan = _median_ms(fresh, plan, repeat)
        # ds.event lists the whole dataset today (the read side): past EVENT_CAP s a call it is left out
        slow = bool(rows) and (rows[-1]["event_ms"] is None or rows[-1]["event_ms"] > 1e3 * EVENT_CAP)
        cost_event = None if slow else _median_ms(fresh, event, repeat)
        listed = min(done, LIST_CAP)
        rates = {}
        for key, listing in (("list_rate", catalog.iter_databases), ("rows_rate", catalog.database_rows)):
            start = time.perf_counter()
            got = sum(1 for _ in islice(listing(DATASET), listed))
            rates[key] = got / (time.perf_counter() - start)
        rows.append({"databases": done, "len_ms": cost_len, "plan_ms": cost_plan, "event_ms": cost_event,
                     **rates, "driver_rate": _driver_rate(catalog, listed), "listed": listed,
                     "register_rate": registered})
    fed.close()
    return rows


@contextmanager
def _backends(n: int, postgres: str | None, workdir: str | None, notes: list[str]) -> Iterator[list[tuple[str, str]]]:
    with tempfile.TemporaryDirectory(prefix="giod-bench-databases-", dir=workdir) as tmp:
        pg = _throwaway_postgres(postgres, notes) if postgres is not None else nullcontext(None)
        with pg as url:
            found = [("SQLite", str(Path(tmp) / "fed"))]
            if url is not None:
                root = Path(tmp) / "pgsite"
                root.mkdir()
                fed = giod.open(url, create=True)
                fed.add_site("local", str(root))
                fed.close()
                found.append(("PostgreSQL", url))
            yield found


def run(n: int, postgres: str | None, workdir: str | None, repeat: int = 5, bars: Bars | None = None) -> Outcome:
    """``measure`` on SQLite and (when reachable) PostgreSQL, as one outcome."""
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    with _backends(n, postgres, workdir, notes) as backends:
        for name, target in backends:
            with (bars or Bars(enabled=False)).task(name, n) as advance:
                advance(1)
                for row in measure(target, n, repeat, advance):
                    rows.append({"backend": name, **row, "register_goal": REGISTRATION_GOAL[name]})
    for r in rows:
        misses = [k for k, goal in GOALS.items()
                  if r[k] is None or (r[k] > goal if k.endswith("_ms") else r[k] < goal)]
        if r["register_rate"] < r["register_goal"]:
            misses.append("register_rate")
        r["misses"] = ", ".join(misses) or "none"
    notes.append(
        "goals: len(ds), planning a selection one database can match and ds.event(i) each <= 20 ms (medians of "
        f"{repeat}, a freshly opened federation each); listing >= 100,000 lines/s (streamed, up to "
        f"{LIST_CAP:,} records); registrations >= 500/s on SQLite and >= 2,000/s on PostgreSQL "
        f"({REGISTRATIONS} commit_database calls from {WRITERS} threads)"
    )
    notes.append(f"filled through commit_databases, {FILL_GROUP:,} databases a call, each 10 events, "
                 "the containers of one real database, 9 tag statistics")
    return Outcome(name="databases", parameters={"databases": n, "repeat": repeat},
                   tables=[Table("results", f"a federation of up to {n:,} databases", COLUMNS, rows)], notes=notes)


COLUMNS = [
    Column("backend", "catalog"), Column("databases", "databases", "{:,.0f}"),
    Column("len_ms", "len(ds) ms", "{:.1f}"), Column("plan_ms", "plan ms", "{:.1f}"),
    Column("event_ms", "ds.event ms", "{:.1f}"), Column("list_rate", "records/s", "{:,.0f}"),
    Column("rows_rate", "lines/s", "{:,.0f}"), Column("driver_rate", "driver rows/s", "{:,.0f}"),
    Column("register_rate", "registrations/s", "{:,.0f}"), Column("register_goal", "goal /s", "{:,.0f}"),
    Column("misses", "misses goal"),
]  # fmt: skip


def plot(outcome: Outcome, path: Path) -> None:
    """Each cost against the number of databases, one line per catalog, its goal dashed."""
    rows = outcome.table("results").rows
    fig, axes = figure("giod: a federation of many databases (flat is the goal)", ncols=5)
    panels = [("len_ms", "len(ds) ms", 20.0), ("plan_ms", "planning ms", 20.0), ("event_ms", "ds.event ms", 20.0),
              ("rows_rate", "listing lines/s (records/s dotted)", 100_000.0),
              ("register_rate", "registrations/s", None)]
    for ax, (key, label, goal) in zip(axes, panels, strict=True):
        for backend in dict.fromkeys(r["backend"] for r in rows):
            pts = [(r["databases"], r[key]) for r in rows if r["backend"] == backend and r[key] is not None]
            if not pts:
                continue
            x, y = zip(*pts, strict=True)
            line = ax.plot(x, y, marker="o", label=backend)[0]
            if key == "rows_rate":
                ax.plot(x, [r["list_rate"] for r in rows if r["backend"] == backend and r[key] is not None],
                        marker=".", linestyle=":", color=line.get_color(), label=f"{backend} records")
            if goal is None:
                ax.axhline(REGISTRATION_GOAL[backend], linestyle="--", color=line.get_color(), alpha=0.6,
                           label=f"goal {backend}")
        if goal is not None:
            ax.axhline(goal, linestyle="--", color="grey", label="goal")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("databases")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    save(fig, path)
