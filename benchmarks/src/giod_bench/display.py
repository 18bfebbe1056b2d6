"""Event display benchmark: page load to first drawn event, in a real Chromium, beside a small event.

The set-up simulates three events into a fresh federation and reconstructs
them: a hard-QCD event without pile-up (a few hundred calorimeter cells);
the same kind of event with ECAL noise cells added to exactly ``cells``
calorimeter cells (50,000 by default: the issue's "event of 50,000 cells");
and a pile-up-140 event topped up the same way, whose tracker is as busy as
its calorimeter (some 50,000 hits and 2,000 tracks). Each event is written
twice, at entries 2k and 2k + 1, so that a step to the next entry draws an
event of the same size (the page cannot know: it fetches entries by number).
A ``giod serve`` app runs on loopback; each round opens
``/display?dataset=…&entry=2k`` in a fresh browser context (nothing cached, as
on a first visit) and times, for each event:

* ``first draw``: from navigation start to the event on screen in the 3-D
  view (the page's own clock, after the frame holding it: two animation
  frames once it is drawn). The page's WebGL views (``webgl3d.js``) draw the
  3-D view, then the r-φ and r-z projections; ``all views`` is when all of
  it is on screen. With ``renderer="plotly"`` (the fallback where
  ``webgl3d.js`` is absent) plotly.js draws every view: its first 3-D frame
  leaves out what is semi-transparent, drawn after the projections;
* its parts as the page sees them, also from navigation start: ``plotly.js``
  is when the library has loaded (downloaded, compiled and run), ``scene``
  when the event's JSON has arrived and been parsed (its request starts in
  the page's head), and ``3-D draw`` the time from what the 3-D view waits
  for (the scene; and plotly.js on the fallback) to the 3-D view on screen;
* ``main thread``: the renderer's busy time (Chrome's TaskDuration), which
  tells CPU work from waiting on a shared machine;
* ``next event``: a click on ▶ in the open page, to all three views drawn,
  once the page has fetched that entry while the event before was shown
  (as it does after every event it draws);
* ``jump``: an entry the page has not fetched yet, loaded in the open page
  (fetched, parsed and drawn), as when a number is typed in;
* ``second visit``: the page loaded again in the same browser (scripts
  from its cache), to first drawn event;
* ``server``: reading the event and building its scene JSON in Python.

The issue's targets (``TARGETS``): first draw under 1 s for the small event,
under 2 s for 50,000 cells, under 3 s for pile-up; all views under 3 s; the
next event under 0.5 s. The outcome says, for each, the median beside the
target and their ratio.

Chromium is Debian's ``chromium`` package (or ``$GIOD_CHROMIUM``), driven by
playwright; WebGL runs in software (SwiftShader) when there is no GPU.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np

import giod
from giod.errors import ConfigError, MissingDependency
from giod_bench.report import Bars, Column, Outcome, Table, figure, ratio, save

__all__ = ["DEFAULT_CELLS", "QUICK_CELLS", "RENDERERS", "TARGETS", "busy_events", "chromium", "launch", "plot", "run"]

DEFAULT_CELLS = 50_000
QUICK_CELLS = 5_000
#: (what, event row, measured key, limit in seconds): the issue's targets.
TARGETS = (
    ("first draw", 0, "first_draw_s", 1.0),
    ("first draw", 1, "first_draw_s", 2.0),
    ("first draw", 2, "first_draw_s", 3.0),
    ("all views", 0, "all_views_s", 3.0),
    ("all views", 1, "all_views_s", 3.0),
    ("all views", 2, "all_views_s", 3.0),
    ("next event", 0, "next_s", 0.5),
    ("next event", 1, "next_s", 0.5),
    ("next event", 2, "next_s", 0.5),
)
RENDERERS = ("webgl", "plotly")
DATASET = "display"
SEED = 77
PILEUP = 140.0
PILEUP_CELLS = 12_000  # about what pile-up 140 leaves in the calorimeters
VIEWPORT = {"width": 1500, "height": 900}
#: WebGL in software where there is no GPU (recent Chromium asks for the flag explicitly).
CHROMIUM_ARGS = ["--enable-unsafe-swiftshader", "--ignore-gpu-blocklist"]


def chromium() -> str:
    """Path of the Chromium to drive: ``$GIOD_CHROMIUM``, else ``chromium`` on the PATH."""
    path = os.environ.get("GIOD_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path or not Path(path).exists():
        raise MissingDependency("the display benchmark needs Chromium: apt-get install chromium "
                                "(or set GIOD_CHROMIUM to a Chromium binary)")
    return path


def launch(playwright: Any) -> Any:
    """A headless Chromium browser (playwright's browser download is never used)."""
    return playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)


def _playwright() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise MissingDependency("the display benchmark drives Chromium with playwright: pip install playwright") \
            from exc
    return sync_playwright


def busy_events(specs: list[tuple[int | None, float]], *, seed: int = SEED) -> ak.Array:
    """Raw simulated events, one per ``(cells, pileup)``: exactly ``cells`` calorimeter cells (None: as simulated).

    Cells are added as electronic noise in the ECAL (energy above the
    zero-suppression threshold, in cells no particle reached), in the
    simulation's order (calorimeter, ring, sector).
    """
    from giod.physics.detector import Detector
    from giod.physics.generator import generate
    from giod.physics.simulate import simulate

    det = Detector.load()
    rng = np.random.default_rng(seed)
    out = []
    for k, (n, pileup) in enumerate(specs):
        truth = generate(1, seed=seed + k, pthat_min=100.0, pileup=pileup, first_event=k)
        event = simulate(truth, det, seed=seed + 100 + k)
        if n is not None:
            event = _top_up(event, n, det, rng)
        out.append(event)
    return ak.concatenate(out)


def _top_up(event: ak.Array, n: int, det: Any, rng: np.random.Generator) -> ak.Array:
    cells = event.calo_cells[0]
    have = len(cells)
    if n < have:
        raise ConfigError(f"the simulated event already has {have:,} cells; ask for at least that many")
    ecal = det.calorimeter.ecal
    rings, sectors = ecal.n_rings, ecal.n_phi
    ieta = np.asarray(cells.ieta, dtype=np.int64)  # int16 on disk: ring * sector overflows it
    sub = np.asarray(cells.subdetector)
    in_ecal = sub <= 2
    # every ECAL cell is (signed ring, sector); draw unused ones without replacement
    taken = np.zeros(2 * rings * sectors, bool)
    ring_index = np.where(ieta > 0, ieta - 1, rings - ieta - 1)  # 0..rings-1 for +eta, then -eta
    taken[(ring_index * sectors + np.asarray(cells.iphi, dtype=np.int64))[in_ecal]] = True
    free = np.flatnonzero(~taken)
    pick = np.sort(rng.choice(free, size=n - have, replace=False))
    ring_index, iphi = np.divmod(pick, sectors)
    negative = ring_index >= rings
    ring = np.where(negative, ring_index - rings, ring_index)  # 0-based |ring|
    barrel = ring < ecal.barrel.n_eta
    eta = np.where(negative, -1, 1) * ecal.ring_eta(ring + 0.5)
    phi = (iphi + 0.5) * (2 * np.pi / sectors)
    section_noise = np.where(barrel, ecal.barrel.noise, ecal.endcap.noise)
    threshold = np.where(barrel, ecal.barrel.threshold, ecal.endcap.threshold)
    extra = {
        "subdetector": np.where(barrel, 1, 2).astype(np.int8),
        "ieta": np.where(negative, -(ring + 1), ring + 1).astype(np.int16),
        "iphi": iphi.astype(np.int16),
        "eta": eta.astype(np.float32),
        "phi": np.where(phi > np.pi, phi - 2 * np.pi, phi).astype(np.float32),
        "energy": (threshold + rng.exponential(section_noise)).astype(np.float32),
        "particle": np.full(len(pick), -1, dtype=np.int64),
    }
    columns = {}
    for name in extra:
        old = np.asarray(ak.to_numpy(cells[name]))
        columns[name] = np.concatenate([old, extra[name].astype(old.dtype)])
    calo = np.where(columns["subdetector"] <= 2, 0, 1)
    order = np.lexsort((columns["iphi"], columns["ieta"], calo))
    merged = ak.zip({k: v[order] for k, v in columns.items()}, depth_limit=1)
    return ak.with_field(event, ak.unflatten(merged, [len(order)]), "calo_cells")


def _specs(cells: int) -> list[tuple[str, int | None, float]]:
    """The events measured: a small one, and ``cells`` cells without and with pile-up."""
    specs: list[tuple[str, int | None, float]] = [("hard QCD", None, 0.0), ("hard QCD + ECAL noise", cells, 0.0)]
    if cells >= PILEUP_CELLS:  # pile-up 140 alone fills this many cells
        specs.append((f"pile-up {PILEUP:g} + ECAL noise", cells, PILEUP))
    return specs


def _build(root: Path, cells: int) -> tuple[Any, list[dict[str, Any]]]:
    from giod.physics.chain import RAW_COLLECTIONS, reconstruct_dataset
    from giod.physics.layout import model_text
    from giod.schema import Schema

    specs = _specs(cells)
    fed = giod.open(root, create=True)
    ds = fed.create_dataset(DATASET, Schema.from_yaml(model_text()))
    events = busy_events([(n, pileup) for _, n, pileup in specs])
    twice = np.repeat(np.arange(len(specs)), 2)  # entries 2k and 2k + 1: the same event
    with ds.writer() as writer:
        writer.append(events[list(RAW_COLLECTIONS)][twice])
    reconstruct_dataset(ds)
    ds = fed.dataset(DATASET)
    info = []
    for entry, (label, _, _) in zip(range(0, 2 * len(specs), 2), specs, strict=True):
        e = ds.event(entry, ["calo_cells.energy", "tracker_hits.x", "tracks.pt", "jets.pt"])
        info.append({"entry": entry, "event": label, "cells": len(e.calo_cells), "hits": len(e.tracker_hits),
                     "tracks": len(e.tracks), "jets": len(e.jets)})
    return fed, info


def _server_side(fed: Any, entry: int, repeat: int) -> dict[str, float]:
    from giod.display import load_event, scene_of

    ds = fed.dataset(DATASET)
    seconds, body = [], b""
    for _ in range(repeat):
        t0 = time.perf_counter()
        body = json.dumps(scene_of(load_event(ds, entry)), separators=(",", ":")).encode()
        seconds.append(time.perf_counter() - t0)
    return {"server_s": statistics.median(seconds), "scene_mb": len(body) / 1e6,
            "gzip_mb": len(gzip.compress(body, compresslevel=4)) / 1e6}


def _page(browser: Any, url: str, entry: int, renderer: str = "webgl") -> dict[str, float]:
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        cdp = context.new_cdp_session(page)
        cdp.send("Performance.enable")
        extra = "&renderer=plotly" if renderer == "plotly" else ""
        page.goto(f"{url}/display?dataset={DATASET}&entry={entry}{extra}")
        page.wait_for_function("(s => s && !s.loading && (s.ready || s.error))(window.giodDisplay)",
                               timeout=120_000)
        first = json.loads(page.evaluate("JSON.stringify({t: giodDisplay.timings, e: giodDisplay.error})"))
        if first["e"] or errors:
            raise ConfigError(f"the display failed on entry {entry}: {first['e'] or errors[0]}")
        if first["t"].get("renderer") != renderer:
            raise ConfigError(f"the page drew its 3-D view with {first['t'].get('renderer')}, not {renderer}")
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        # the next entry (the same event again), fetched by the page while this one was shown: ▶
        if page.evaluate("() => window.giodDisplay.prefetching") != entry + 1:
            raise ConfigError(f"the display did not fetch entry {entry + 1} ahead")
        page.click("#next")
        page.wait_for_function(f"(s => s.entry === {entry + 1} && s.ready && !s.loading)(window.giodDisplay)",
                               timeout=120_000)
        step = json.loads(page.evaluate("JSON.stringify(giodDisplay.timings)"))
        # an entry the page has not fetched: back to the first, everything fetched anew
        page.evaluate(f"() => {{ window.giodDisplay.forget(); return window.giodDisplay.load('{DATASET}', {entry}); }}")
        jump = json.loads(page.evaluate("JSON.stringify(giodDisplay.timings)"))
        # and the page loaded anew, as on a second visit (scripts from the browser's cache)
        page.reload()
        page.wait_for_function("(s => s && !s.loading && (s.ready || s.error))(window.giodDisplay)",
                               timeout=120_000)
        revisit = json.loads(page.evaluate("JSON.stringify(giodDisplay.timings)"))
        t = first["t"]
        # nan where plotly.js was never loaded (the WebGL views draw everything)
        plotly_s, scene_s = (t.get("plotly_ready_ms") or float("nan")) / 1000, t["scene_ms"] / 1000
        first_s = t["first_draw_at_ms"] / 1000
        return {"first_draw_s": first_s, "all_views_s": t["since_navigation_ms"] / 1000, "plotly_s": plotly_s,
                "scene_s": scene_s, "draw3d_s": first_s - (scene_s if renderer == "webgl" else max(plotly_s, scene_s)),
                "main_thread_s": metrics.get("TaskDuration", float("nan")), "next_s": step["total_ms"] / 1000,
                "jump_s": jump["total_ms"] / 1000,
                "revisit_s": revisit["first_draw_at_ms"] / 1000}
    finally:
        context.close()


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def run(cells: int = DEFAULT_CELLS, repeat: int = 3, workdir: str | os.PathLike[str] | None = None,
        bars: Bars | None = None, renderer: str = "webgl") -> Outcome:
    """Build the events, serve them, and time the display in Chromium ``repeat`` times each.

    ``renderer`` is the page's 3-D view: ``"webgl"`` (its own WebGL view) or ``"plotly"`` (the fallback).
    """
    from giod.server.app import ServerThread, create_app

    if cells < 1 or repeat < 1:
        raise ConfigError("cells and repeat must be positive")
    if renderer not in RENDERERS:
        raise ConfigError(f"renderer must be one of {', '.join(RENDERERS)}, not {renderer!r}")
    sync_playwright = _playwright()
    chromium()
    bars = bars or Bars(enabled=False)
    load = _load()
    with tempfile.TemporaryDirectory(prefix="giod-bench-display-", dir=workdir) as tmp:
        with bars.task("simulating and reconstructing the events", 1) as advance:
            fed, rows = _build(Path(tmp) / "fed", cells)
            advance(1)
        for row in rows:
            row.update(_server_side(fed, row["entry"], repeat))
        runs: dict[int, list[dict[str, float]]] = {row["entry"]: [] for row in rows}
        with ServerThread(create_app(fed, anonymous_read=True)) as url, sync_playwright() as pw:
            browser = launch(pw)
            try:
                with bars.task("loading the display in Chromium", (repeat + 1) * len(rows)) as advance:
                    for i in range(repeat + 1):  # the first round warms the server and the disk, untimed
                        for row in rows:  # peers in turn, round after round
                            result = _page(browser, url, row["entry"], renderer)
                            if i > 0:
                                runs[row["entry"]].append(result)
                            advance(1)
            finally:
                browser.close()
        fed.close()
    for row in rows:
        got = runs[row["entry"]]
        for key in got[0]:
            row[key] = statistics.median(r[key] for r in got)
        row["first_draw_all_s"] = [r["first_draw_s"] for r in got]
    targets = [{"target": f"{what}: {rows[i]['event']}, {rows[i]['cells']:,} cells", "limit_s": limit,
                "measured_s": rows[i][key], "vs_target": ratio(rows[i][key], limit),
                "met": "yes" if rows[i][key] < limit else f"no, {rows[i][key] / limit:.2f}×"}
               for what, i, key, limit in TARGETS if i < len(rows)]
    missed = [t for t in targets if t["measured_s"] >= t["limit_s"]]
    notes = [
        ("every view drawn by the page's WebGL views (webgl3d.js); plotly.js not loaded"
         if renderer == "webgl" else "every view drawn by plotly.js (the fallback where webgl3d.js is absent)"),
        (f"all {len(targets)} targets met (median of {repeat})" if not missed else
         f"{len(targets) - len(missed)} of {len(targets)} targets met (median of {repeat}); missed: "
         + "; ".join(f"{t['target']} {t['measured_s']:.2f} s against {t['limit_s']:g} s ({t['vs_target']:.2f}×)"
                     for t in missed)),
        "each load in a fresh browser context (cold cache); WebGL in software where there is no GPU; "
        f"load average at the start {load:.1f}, at the end {_load():.1f}, on {os.cpu_count()} CPUs "
        "(other work on the machine slows every figure)",
    ]
    return Outcome(
        name="display",
        parameters={"cells": cells, "repeat": repeat, "pileup": PILEUP, "seed": SEED, "viewport": VIEWPORT,
                    "renderer": renderer, "load_start": load},
        tables=[Table("results", f"event display: page load to first drawn event (median of {repeat})", COLUMNS,
                      rows),
                Table("targets", f"the issue's targets (median of {repeat})", TARGET_COLUMNS, targets)],
        notes=notes,
    )


COLUMNS = [
    Column("event", "event"), Column("cells", "cells", "{:,}"), Column("hits", "hits", "{:,}"),
    Column("tracks", "tracks", "{:,}"), Column("scene_mb", "scene MB", "{:.2f}"),
    Column("gzip_mb", "gzip MB", "{:.2f}"),
    Column("server_s", "server s", "{:.2f}"), Column("plotly_s", "plotly.js ready s", "{:.2f}"),
    Column("scene_s", "scene ready s", "{:.2f}"), Column("draw3d_s", "3-D draw s", "{:.2f}"),
    Column("first_draw_s", "first draw s", "{:.2f}"), Column("all_views_s", "all views s", "{:.2f}"),
    Column("main_thread_s", "main thread s", "{:.2f}"),
    Column("revisit_s", "second visit s", "{:.2f}"), Column("next_s", "next event s", "{:.2f}"),
    Column("jump_s", "jump s", "{:.2f}"),
]  # fmt: skip

TARGET_COLUMNS = [
    Column("target", "target"), Column("limit_s", "under s", "{:g}"), Column("measured_s", "median s", "{:.2f}"),
    Column("vs_target", "× target", "{:.2f}"), Column("met", "met"),
]  # fmt: skip


def plot(outcome: Outcome, path: Path) -> None:
    """Load of each event split into its parts, and the next event in an open page, against the targets."""
    rows = outcome.table("results").rows
    fig, (ax, ax2) = figure("giod event display in Chromium (median)", ncols=2)
    labels = [f"{r['event']}\n{r['cells']:,} cells" for r in rows]
    fast = outcome.parameters.get("renderer", "plotly") == "webgl"
    # the WebGL view waits for the scene only; plotly.js's 3-D view for both
    before = [r["scene_s"] if fast else max(r["plotly_s"], r["scene_s"]) for r in rows]
    draw3d = [max(0.0, r["first_draw_s"] - b) for r, b in zip(rows, before, strict=True)]
    rest = [max(0.0, r["all_views_s"] - r["first_draw_s"]) for r in rows]
    ax.bar(labels, before, label="scene fetched" if fast else "plotly.js loaded and scene fetched (side by side)")
    ax.bar(labels, draw3d, bottom=before, label="3-D view drawn: first draw")
    ax.bar(labels, rest, bottom=[a + b for a, b in zip(before, draw3d, strict=True)], label="projections drawn")
    width = 0.27
    x = np.arange(len(rows))
    ax2.bar(x - width, [r["revisit_s"] for r in rows], width, color="tab:purple", label="second visit, first draw")
    ax2.bar(x, [r["jump_s"] for r in rows], width, color="tab:olive", label="entry not fetched yet, page open")
    ax2.bar(x + width, [r["next_s"] for r in rows], width, color="tab:green", label="next event (▶), page open")
    ax2.set_xticks(x, labels)
    for a, ylabel, limit, what in ((ax, "seconds from navigation start", 3.0, "all views"),
                                   (ax2, "seconds to draw", 0.5, "next event")):
        a.axhline(limit, linestyle="--", color="grey", label=f"target, {what}: {limit:g} s")
        a.set_ylabel(ylabel)
        a.legend(fontsize="small")
        a.grid(axis="y", alpha=0.3)
        a.tick_params(axis="x", labelsize="small")
    save(fig, path)
