"""``giod bench propagate``: the GIOD soak redone — how soon a commit is visible downstream.

A DAQ writer (a child process) commits one database every ``1/rate``
seconds into a source federation. Downstream, two followers:

- an analysis federation kept in step by ``giod copy raw --from DAQ --to
  ANALYSIS --follow`` (a child process, woken by the DAQ catalog's change
  feed);
- a rule-bound remote site, a ``giod serve`` behind the latency proxy
  (250 ms round trip by default), fed by ``giod replicator --follow`` (a
  child process) through a rule of two copies.

The benchmark watches both (their own change feeds) and records, per
database, commit-to-visible latency: from the commit's time in the catalog
to the moment the database is registered in the analysis federation, or
its last container registered good at the remote site (the catalogs' own
times). Beside it: each database's transfer to the remote site (its first
replica marked copying to its last set good), and one database's transfer
through the same proxy measured alone before the soak. The target is
judged on the latency beyond each database's own transfer. The
writer and the follower are each killed (SIGKILL) and restarted at random
times; at the end every database must be at both places exactly once.

The writer gives each database an idempotency key (``daq-<n>``) and, when
restarted, goes on from the number of databases the catalog holds, as a
DAQ writer that lost its state would: a database whose commit landed just
before the kill is not written twice.
"""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import numpy as np

from giod.errors import ConfigError
from giod_bench.options import _options, _publish, _workdir_path
from giod_bench.report import Column, Outcome, Table, figure

DATASET = "raw"
SITE = "far"
DEFAULT_SECONDS = 1800.0
QUICK_SECONDS = 8.0
DEFAULT_EVENTS = 500  # per database
QUICK_EVENTS = 50
TARGET_SLACK = 1.0  # seconds a database may take beyond its transfer time (p99)
DRAIN = 120.0  # seconds the followers get to catch up after the writer stops

# the DAQ writer as a child process: ROOT RATE EVENTS (one database per 1/RATE s, until killed)
WRITER = """
import sys, time
import giod
from giod.testing import synthetic
root, rate, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
fed = giod.open(root)
ds = fed.dataset("raw")
i = len(ds.databases())  # restarted: go on where the catalog says, keys make a repeat land once
start, k = time.monotonic(), 0
while True:
    with ds.writer(database_events=n, idempotency_key=f"daq-{i}", program="daq") as w:
        w.append(synthetic.events(n, seed=i, first_event=i * n))
    i, k = i + 1, k + 1
    time.sleep(max(0.0, start + k / rate - time.monotonic()))  # a steady rate, not a pause after each
"""


@dataclass
class _Seen:
    """When each source database became visible at one place, in the catalog's own times."""

    times: dict[int, float] = field(default_factory=dict)  # source database id -> unix time
    lock: threading.Lock = field(default_factory=threading.Lock)

    def put(self, found: dict[int, float], *, first: bool = True) -> None:
        with self.lock:
            for i, t in found.items():
                self.times[i] = min(self.times.get(i, t), t) if first else t


def _watch(fed: Any, record: Callable[[], None], stop: threading.Event) -> threading.Thread:
    """A thread calling ``record()`` each time ``fed`` commits."""
    from giod.exchange import open_feed

    def run() -> None:
        feed = open_feed(fed, stop=stop)
        version = -1
        try:
            while not stop.is_set():
                try:
                    record()
                except Exception:  # noqa: BLE001, S110 - a dataset not yet created, a catalog busy: next wake
                    pass
                version = feed.wait(version, 1.0)
        finally:
            feed.close()

    t = threading.Thread(target=run, daemon=True, name="giod-bench-watch")
    t.start()
    return t


class _Child:
    """A child process that the soak kills (SIGKILL) and starts again."""

    def __init__(self, argv: list[str], log: Path):
        self.argv, self.log = argv, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def start(self) -> None:
        with self.log.open("ab") as err:  # what a child said, for the error if it dies on its own
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err)

    def said(self) -> str:
        lines = self.log.read_text(errors="replace").strip().splitlines() if self.log.exists() else []
        return lines[-1] if lines else ""

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def _giod(*args: str) -> list[str]:
    return [sys.executable, "-c", "from giod.cli import main; main(prog_name='giod')", *args]


@contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
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


def run(seconds: float = DEFAULT_SECONDS, rate: float = 1.0, events: int = DEFAULT_EVENTS, rtt_ms: float = 250.0,
        kills: int = 2, seed: int = 1, workdir: str | None = None, pass_interval: float = 60.0) -> Outcome:
    """The soak (see the module docstring); ``pass_interval``: seconds between the replicator's full passes."""
    import giod
    from giod.replication import replicate
    from giod.storage.http import site_token_env
    from giod.testing import synthetic
    from giod.testing.netlab import LatencyProxy
    from giod_bench.wanpeers import serve_federation

    if seconds <= 0 or rate <= 0 or events < 1 or rtt_ms < 0 or kills < 0 or pass_interval <= 0:
        raise ConfigError("seconds, rate, events and the pass interval must be positive, rtt and kills not negative")
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="giod-bench-propagate-", dir=workdir) as tmp, ExitStack() as stack:
        work = Path(tmp)
        far_root = work / "far"
        far = giod.open(far_root, create=True)
        token = far.catalog.create_token("admin", note="giod bench propagate")[1]
        far.close()
        addr = stack.enter_context(serve_federation(far_root))
        proxy = stack.enter_context(LatencyProxy(addr, rtt=rtt_ms / 1000, isolate=True))
        stack.enter_context(_env({site_token_env(SITE): token}))
        daq = giod.open(work / "daq", create=True)
        stack.callback(daq.close)
        daq.add_site(SITE, "http://{}:{}/files/local".format(*proxy.address), 10)
        daq.create_dataset(DATASET, synthetic.schema())

        # the physical part: one database to the far site alone, through the proxy
        transfer = []
        daq.create_dataset("calibration", synthetic.schema())
        for k in range(3):
            with daq.dataset("calibration").writer(database_events=events) as w:
                w.append(synthetic.events(events, seed=10_000 + k))
            t0 = time.perf_counter()
            replicate(daq.catalog, daq.site, "calibration", SITE)
            transfer.append(time.perf_counter() - t0)
        db_bytes = daq.dataset("calibration").summary()["bytes"] / 3
        transfer_s = float(np.median(transfer))
        daq.catalog.add_rule(DATASET, 2, ["local", SITE])
        analysis = giod.open(work / "analysis", create=True)
        stack.callback(analysis.close)

        def copied() -> list[int]:
            return [int(db.parameters["copied_from"]["database"]) for db in analysis.dataset(DATASET).databases()]

        def at_the_analysis() -> None:  # registration times in the analysis catalog
            at_analysis.put({int(db.parameters["copied_from"]["database"]): db.created
                             for db in analysis.dataset(DATASET).databases()})

        holder: dict[int, int] = {}  # container id -> its database id

        def at_the_far_site() -> None:
            # a replica's ``checked`` is when its state was set: copying (the transfer begins), then good
            states = {cid: r for cid, rs in daq.catalog.replica_states(DATASET).items() for r in rs if r.site == SITE}
            if any(cid not in holder for cid in states):
                holder.update({c.id: db.id for db in daq.dataset(DATASET).databases() for c in db.containers})
            begun: dict[int, float] = {}
            good: dict[int, list[float]] = {}
            for cid, r in states.items():
                db = holder.get(cid)
                if db is not None and r.checked is not None:
                    if r.state == "copying":
                        begun[db] = min(begun.get(db, r.checked), r.checked)
                    elif r.state == "good":
                        good.setdefault(db, []).append(r.checked)
            started.put(begun)
            sizes = {db: n for db, n in Counter(holder.values()).items()}
            at_far.put({db: max(ts) for db, ts in good.items() if len(ts) == sizes.get(db)}, first=False)

        stop = threading.Event()
        at_analysis, at_far, started = _Seen(), _Seen(), _Seen()
        watchers = [_watch(analysis, at_the_analysis, stop), _watch(daq, at_the_far_site, stop)]
        writer = _Child([sys.executable, "-c", WRITER, str(daq.root), str(rate), str(events)], work / "writer.log")
        follower = _Child(_giod("copy", DATASET, "--from", str(daq.root), "--to", str(analysis.root), "--follow"),
                          work / "follower.log")
        replicator = _Child(_giod("replicator", "--follow", "--interval", f"{pass_interval:g}", "-f",
                                      str(daq.root)), work / "replicator.log")
        children = [writer, follower, replicator]
        def kill_all() -> None:
            for c in children:
                c.kill()

        stack.callback(kill_all)
        for c in children:
            c.start()
        # the clock starts once every child is up (imports take seconds on a busy machine)
        deadline = time.monotonic() + DRAIN
        while not (at_analysis.times and at_far.times) and time.monotonic() < deadline:
            if any(c.proc is not None and c.proc.poll() is not None for c in children):
                raise ConfigError("a child of the soak died: " + "; ".join(c.said() for c in children if c.said()))
            stop.wait(0.2)  # the watchers record; this only waits for them to have seen a first database
        t_start = time.time()
        plan = sorted([(rng.uniform(0.15, 0.85) * seconds, writer) for _ in range(kills)]
                      + [(rng.uniform(0.15, 0.85) * seconds, follower) for _ in range(kills)],
                      key=lambda x: x[0])
        events_log: list[tuple[float, str]] = []
        for at, child in plan:
            stop.wait(max(0.0, t_start + at - time.time()))
            child.kill()
            child.kills += 1
            events_log.append((time.time() - t_start, "writer" if child is writer else "follower"))
            child.start()
        stop.wait(max(0.0, t_start + seconds - time.time()))
        writer.stop()
        written = {db.id: db for db in daq.dataset(DATASET).databases()}
        deadline = time.monotonic() + DRAIN
        while time.monotonic() < deadline and not (set(written) <= set(at_analysis.times)
                                                      and set(written) <= set(at_far.times)):
            stop.wait(0.2)  # the watchers record; this only waits for them to have seen everything
        for c in (follower, replicator):
            c.stop()
        stop.set()
        for t in watchers:
            t.join(5)
        dups_analysis = len(copied()) - len(set(copied()))
        keys = [db.idempotency_key for db in written.values()]
        outcome = _outcome(seconds, rate, events, rtt_ms, written, at_analysis, at_far, started, transfer_s,
                           db_bytes, t_start, events_log, dups_analysis, len(keys) - len(set(keys)), writer.kills,
                           follower.kills)
        outcome.parameters["pass_interval"] = pass_interval
        return outcome


def _restarts(kills: list[float], seen: dict[int, float]) -> list[tuple[float, float]]:
    """``(kill, back)``: from each kill to the first database the place saw after it (soak seconds)."""
    out = []
    for k in kills:
        after = [t for t in seen.values() if t >= k]
        out.append((k, min(after) if after else math.inf))
    return out


def _stats(lat: list[float]) -> dict[str, float | None]:
    if not lat:
        return {"median": None, "p99": None, "max": None}
    a = np.asarray(lat)
    return {"median": float(np.median(a)), "p99": float(np.percentile(a, 99)), "max": float(a.max())}


def _outcome(seconds: float, rate: float, events: int, rtt_ms: float, written: dict[int, Any], at_analysis: _Seen,
             at_far: _Seen, started: _Seen, transfer_s: float, db_bytes: float, t_start: float,
             kills_log: list[tuple[float, str]], dups_analysis: int, dups_daq: int, writer_kills: int,
             follower_kills: int) -> Outcome:
    series: dict[str, list[tuple[float, float]]] = {}
    rows = []
    far = f"remote site at {rtt_ms:g} ms (giod replicator --follow)"
    # per database at the far site: its transfer (copy begun to registered), measured during the soak
    transfers = {i: at_far.times[i] - started.times[i] for i in written if i in at_far.times and i in started.times}
    for place, seen in (("analysis federation (giod copy --follow)", at_analysis), (far, at_far)):
        points = [(db.created - t_start, seen.times[i] - db.created) for i, db in sorted(written.items())
                  if i in seen.times]
        series[place] = points
        s = _stats([lat for at, lat in points if at >= 0])  # before 0 the children were still starting
        lost = len(set(written) - set(seen.times))
        if place == far:  # the target: at most TARGET_SLACK beyond each database's own transfer
            beyond = {i: seen.times[i] - written[i].created - transfers[i] for i in transfers
                      if written[i].created >= t_start}
            t = _stats([v for i, v in transfers.items() if written[i].created >= t_start])
            kills = []  # the replicator is not killed; a writer killed delays no copy
        else:
            beyond = {i: seen.times[i] - written[i].created for i in written
                      if i in seen.times and written[i].created >= t_start}
            t = {"median": None, "p99": None}
            kills = [at for at, who in kills_log if who == "follower"]
        # a follower killed is down until it has started again: databases committed meanwhile wait for it
        down = _restarts(kills, {i: seen.times[i] - t_start for i in seen.times})
        steady = [v for i, v in beyond.items() if not any(a <= written[i].created - t_start <= b for a, b in down)]
        b, st = _stats(list(beyond.values())), _stats(steady)
        rows.append({"place": place, "databases": len(points), "lost": lost, **s,
                     "transfer_median": t["median"], "transfer_p99": t["p99"], "beyond_p99": b["p99"],
                     "steady_p99": st["p99"],
                     "meets": None if st["p99"] is None else bool(st["p99"] <= TARGET_SLACK and lost == 0)})
    table = Table("latency", "commit-to-visible latency (s)", [
        Column("place", "where"), Column("databases", "databases"), Column("lost", "lost"),
        Column("median", "median s", "{:.3f}"), Column("p99", "p99 s", "{:.3f}"), Column("max", "max s", "{:.3f}"),
        Column("transfer_median", "transfer median s", "{:.3f}"), Column("transfer_p99", "transfer p99 s", "{:.3f}"),
        Column("beyond_p99", "p99 beyond transfer s", "{:.3f}"),
        Column("steady_p99", "same, restarts aside", "{:.3f}"), Column("meets", f"≤ {TARGET_SLACK:g} s")], rows)
    soak = Table("soak", "the soak", [Column("what", "what"), Column("value", "value")], [
        {"what": "databases committed", "value": len(written)},
        {"what": "duplicated at the analysis federation", "value": dups_analysis},
        {"what": "duplicate commits in the DAQ federation", "value": dups_daq},
        {"what": "writer killed (SIGKILL) and restarted", "value": writer_kills},
        {"what": "follower killed (SIGKILL) and restarted", "value": follower_kills},
        {"what": f"transfer of one database ({db_bytes / 1e6:.2f} MB) at {rtt_ms:g} ms before the soak, "
                 "alone (median of 3)", "value": f"{transfer_s:.3f} s"},
    ])
    notes = [
        f"{seconds:g} s soak, one database of {events} events every {1 / rate:g} s; the target is commit to "
        f"visible ≤ {TARGET_SLACK:g} s + the database's transfer time at p99, nothing lost or duplicated.",
        "Latency runs from the commit's time in the DAQ catalog to the registration's time in the other "
        "catalog (analysis: the copied database's creation; remote site: the last of its replicas set good), "
        "read by watchers woken by the places' change feeds. A database's transfer runs from its first "
        "replica marked copying at the remote site to the last set good, during the soak.",
        "Statistics count the databases committed from time 0 on (once every child had delivered one); "
        "'restarts aside': without the databases committed while a killed follower was down (from the kill "
        "to the first database it delivered after it); the target is judged on those.",
        "Measured on a machine shared with other work: figures are noisy; quote the medians.",
    ]
    outcome = Outcome("propagate", {"seconds": seconds, "rate": rate, "events": events, "rtt_ms": rtt_ms},
                      [table, soak], notes)
    outcome.parameters["series"] = {k: v for k, v in series.items()}
    outcome.parameters["transfers"] = [(written[i].created - t_start, v) for i, v in sorted(transfers.items())]
    outcome.parameters["kills"] = kills_log
    outcome.parameters["transfer_s"] = transfer_s
    return outcome


def plot(outcome: Outcome, path: Path) -> None:
    """Commit-to-visible latency against time into the soak, per place, kills marked."""
    fig, (ax,) = figure("giod bench propagate: commit-to-visible latency")
    for (label, points), marker in zip(outcome.parameters["series"].items(), ("o", "s"), strict=False):
        if points:
            x, y = zip(*points, strict=True)
            ax.plot(x, y, marker, markersize=3, label=label)
    if outcome.parameters["transfers"]:
        x, y = zip(*outcome.parameters["transfers"], strict=True)
        ax.plot(x, y, "x", markersize=4, color="grey", label="transfer to the remote site, per database")
        ax.plot(x, [v + TARGET_SLACK for v in y], "_", markersize=8, color="black",
                label=f"target: transfer + {TARGET_SLACK:g} s")
    ax.axhline(TARGET_SLACK, color="grey", linestyle=":", label=f"{TARGET_SLACK:g} s")
    for at, who in outcome.parameters["kills"]:
        ax.axvline(at, color="red" if who == "writer" else "orange", alpha=0.4)
    ax.set_xlabel("time into the soak (s); red: writer killed, orange: follower killed")
    ax.set_ylabel("commit to visible (s)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


@click.command("propagate")
@_options(DEFAULT_EVENTS, QUICK_EVENTS)
@click.option("--seconds", type=click.FloatRange(min=1), default=None,
              help=f"Length of the soak [default: {DEFAULT_SECONDS:g}; {QUICK_SECONDS:g} with --quick].")
@click.option("--rate", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="Databases the DAQ writer commits per second.")
@click.option("--rtt", "rtt_ms", type=click.FloatRange(min=0), default=250.0, show_default=True,
              help="Round-trip time to the remote site, ms.")
@click.option("--kills", type=click.IntRange(min=0), default=None,
              help="Times the writer, and the follower, are each killed and restarted [default: 3; 1 with --quick].")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the kill times.")
@click.option("--pass-interval", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="Seconds between the replicator's full passes (its --interval).")
def command(events: int | None, repeat: int | None, quick: bool, output: str, workdir: str | None,
            seconds: float | None, rate: float, rtt_ms: float, kills: int | None, seed: int,
            pass_interval: float) -> None:
    """A DAQ writer committing at a steady rate; a following federation and a rule-bound remote site.

    Commit-to-visible latency over time (median, p99, max) beside the transfer
    time, with the writer and the follower killed and restarted; --repeat is
    not used (one soak).

    Example: giod bench propagate --quick
    """
    outcome = run(seconds or (QUICK_SECONDS if quick else DEFAULT_SECONDS), rate,
                  events or (QUICK_EVENTS if quick else DEFAULT_EVENTS), rtt_ms,
                  kills if kills is not None else (1 if quick else 3), seed, _workdir_path(workdir), pass_interval)
    _publish(outcome, output, plot)
