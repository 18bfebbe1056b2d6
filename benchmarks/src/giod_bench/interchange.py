"""Interchange benchmark: ROOT in and out of giod for a wide NanoAOD-like file, beside uproot.

A NanoAOD file has 10^5–10^6 events and about 1,000–1,500 branches. The
benchmark builds one: the branch layout (counters, collections, types) and
the per-event values of the real 200-event CMS NanoAOD ttbar file, events
drawn at random from it with their floating-point values smeared so that
no basket repeats another, widened with trigger-like flags to the number of
branches asked for. It is written with uproot, chunk by chunk.

Then, in turn, round after round:

- ``uproot write``: the same arrays written again with uproot;
- ``uproot read``: every branch read back with uproot (``iterate``, 100 MB steps);
- ``giod import``: :func:`giod.interchange.import_root` into a fresh federation;
- ``giod write``: the imported events (in memory) appended to a fresh dataset;
- ``giod read``: the dataset read back whole, chunk by chunk;
- ``giod export``: :func:`giod.interchange.write_root` of the dataset, as ``giod export --format root``.

An import cannot cost less than reading the file and writing the events, nor
an export less than reading the dataset and writing the file: the table
sets ``giod import`` beside ``uproot read + giod write`` and ``giod export``
beside ``giod read + uproot write``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np

from giod.errors import ConfigError, StorageError
from giod_bench.report import MB, Bars, Column, Outcome, Table, Timing, figure, round_robin, save

__all__ = ["DEFAULT_BRANCHES", "DEFAULT_EVENTS", "QUICK_EVENTS", "SOURCE", "plot", "run", "wide_chunks", "write_wide"]

DEFAULT_EVENTS = 100_000
QUICK_EVENTS = 2_000
DEFAULT_BRANCHES = 1_200
CHUNK = 10_000  # events per uproot extend: baskets of about NanoAOD's size
TTBAR = "nanoAOD_2015_CMS_Open_Data_ttbar.root"
#: the real NanoAOD file whose layout and values the wide file takes, beside the repository
SOURCE = Path(__file__).resolve().parents[3].parent / "shared" / "data" / TTBAR


def _groups(tree: Any) -> tuple[dict[str, list[str]], list[str]]:
    """Collections (by counter: their members' branch names) and the branches without a counter."""
    groups: dict[str, list[str]] = {}
    flat: list[str] = []
    counters = {b.count_branch.name for b in tree.branches if b.count_branch is not None}
    for b in tree.branches:
        if b.count_branch is not None:
            groups.setdefault(b.count_branch.name, []).append(b.name)
        elif b.name not in counters:
            flat.append(b.name)
    return groups, flat


def _smear(content: ak.contents.Content, rng: np.random.Generator) -> ak.contents.Content:
    """Floating-point values multiplied by 1 + 1e-3 noise: drawn events stay physical, baskets differ."""
    if isinstance(content, ak.contents.NumpyArray):
        data = np.asarray(content.data)
        if data.dtype.kind == "f":
            data = (data * (1 + 1e-3 * rng.standard_normal(len(data)))).astype(data.dtype)
        return ak.contents.NumpyArray(data)
    if isinstance(content, ak.contents.ListOffsetArray):
        return ak.contents.ListOffsetArray(content.offsets, _smear(content.content, rng))
    return content


def wide_chunks(
    n_events: int, branches: int = DEFAULT_BRANCHES, source: str | os.PathLike[str] = SOURCE, seed: int = 0
) -> Iterator[dict[str, Any]]:
    """The wide file's contents, ``CHUNK`` events at a time, as uproot's ``extend`` takes them.

    A collection is one record array (uproot writes its counter ``n<Name>`` and
    branches ``<Name>_<field>``); a branch whose counter does not name it so
    (``LHEPdfWeight`` counted by ``nLHEPdfWeight``) is a jagged array of its own.
    """
    import uproot

    with uproot.open(source) as file:
        tree = file["Events"]
        groups, flat = _groups(tree)
        real = tree.arrays(library="ak")
    budget = branches  # fewer than the file has: whole collections first, then single branches
    for counter in list(groups):
        if len(groups[counter]) + 1 > budget:
            del groups[counter]
        else:
            budget -= len(groups[counter]) + 1
    flat = flat[:budget]
    extra = budget - len(flat)
    rng = np.random.default_rng(seed)
    rates = rng.uniform(0.001, 0.5, extra)  # how often each added trigger-like flag fires
    for start in range(0, n_events, CHUNK):
        n = min(CHUNK, n_events - start)
        drawn = real[rng.integers(0, len(real), n)]
        out: dict[str, Any] = {}
        for counter, names in groups.items():
            coll = counter[1:]
            fields = {name[len(coll) + 1 :]: name for name in names if name.startswith(coll + "_")}
            if fields:
                out[coll] = ak.zip(
                    {f: ak.Array(_smear(ak.to_packed(drawn[name]).layout, rng)) for f, name in fields.items()}
                )
            for name in names:
                if not name.startswith(coll + "_"):
                    out[name] = ak.Array(_smear(ak.to_packed(drawn[name]).layout, rng))
        for name in flat:
            out[name] = np.asarray(_smear(ak.to_packed(drawn[name]).layout, rng).data)
        for i, rate in enumerate(rates):
            out[f"HLT_Wide{i}"] = rng.random(n) < rate
        yield out


def _counter_name(counted: str) -> str:
    return f"n{counted}"


def _field_name(outer: str, inner: str) -> str:
    return f"{outer}_{inner}"


def write_wide(path: str | os.PathLike[str], chunks: list[dict[str, Any]]) -> None:
    """Write the chunks as tree ``Events`` of a new ROOT file, NanoAOD's names and types."""
    import uproot

    with uproot.recreate(path) as file:
        types = {k: v.type if isinstance(v, ak.Array) else v.dtype for k, v in chunks[0].items()}
        tree = file.mktree("Events", types, counter_name=_counter_name, field_name=_field_name)
        for chunk in chunks:
            tree.extend(chunk)


def _uproot_read(path: Path) -> int:
    import uproot

    n = 0
    with uproot.open(path) as file:
        for chunk in file["Events"].iterate(step_size="100 MB", library="ak"):
            n += len(chunk)
    return n


def run(
    events: int = DEFAULT_EVENTS,
    repeat: int = 3,
    workdir: str | os.PathLike[str] | None = None,
    bars: Bars | None = None,
    branches: int = DEFAULT_BRANCHES,
    source: str | os.PathLike[str] = SOURCE,
) -> Outcome:
    """Measure import and export of a wide NanoAOD-like file beside uproot's read and write."""
    import uproot

    import giod
    from giod.interchange import import_root, inspect_tree, iterate_events, root_names, write_root

    if events < 1 or repeat < 1:
        raise ConfigError("events and repeat must be positive")
    if not Path(source).is_file():
        raise ConfigError(f"the NanoAOD file that gives the layout is not there: {source} (see --source)")
    bars = bars or Bars(enabled=False)
    with tempfile.TemporaryDirectory(prefix="giod-bench-interchange-", dir=workdir) as tmp:
        work = Path(tmp)
        with bars.task(f"making {events:,} NanoAOD-like events", (events + CHUNK - 1) // CHUNK) as adv:
            chunks = []
            for chunk in wide_chunks(events, branches, source):
                chunks.append(chunk)
                adv(1)
        wide = work / "wide.root"
        write_wide(wide, chunks)
        with uproot.open(wide) as file:
            n_branches = len(file["Events"].branches)
        file_mb = wide.stat().st_size / MB
        payload = sum(
            v.layout.nbytes if isinstance(v, ak.Array) else v.nbytes for chunk in chunks for v in chunk.values()
        )
        layout = inspect_tree(wide)
        state: dict[str, Any] = {}  # the dataset of the round's import, which giod write, read and export take

        def uproot_write(i: int) -> float:
            start = time.perf_counter()
            write_wide(work / "again.root", chunks)
            return time.perf_counter() - start

        def uproot_read(i: int) -> float:
            start = time.perf_counter()
            if _uproot_read(wide) != events:
                raise StorageError("uproot read another number of events")
            return time.perf_counter() - start

        def giod_import(i: int) -> float:
            if "fed" in state:  # the last round's
                state["fed"].close()
                shutil.rmtree(state["place"])
            place = work / f"import-{i}"
            fed = giod.open(place, create=True)
            start = time.perf_counter()
            report = import_root(fed, wide, "nano")
            took = time.perf_counter() - start
            if report.n_events != events:
                raise StorageError(f"giod imported {report.n_events:,} events of {events:,}")
            state.update(fed=fed, place=place, ds=fed.dataset("nano"))
            return took

        def giod_write(i: int) -> float:
            if "events" not in state:  # what the import hands its writer, made once, untimed
                state["events"] = list(iterate_events(wide, layout))
            in_memory = state["events"]
            place = work / f"write-{i}"
            other = giod.open(place, create=True)
            target = other.create_dataset("nano", layout.schema)
            start = time.perf_counter()
            with target.writer() as w:
                for part in in_memory:
                    w.append(part)
            took = time.perf_counter() - start
            other.close()
            shutil.rmtree(place)
            return took

        def giod_read(i: int) -> float:
            start = time.perf_counter()
            n = sum(len(part) for part in state["ds"].select(None).iterate())
            took = time.perf_counter() - start
            if n != events:
                raise StorageError(f"giod read {n:,} events of {events:,}")
            return took

        def giod_export(i: int) -> float:
            start = time.perf_counter()
            ds = state["ds"]
            sel = ds.select(None)
            write_root(work / "export.root", sel.iterate(), ds.schema, names=root_names(sel))
            return time.perf_counter() - start

        clocks = {
            "uproot write": uproot_write, "uproot read": uproot_read, "giod import": giod_import,
            "giod write": giod_write, "giod read": giod_read, "giod export": giod_export,
        }  # fmt: skip
        with bars.task("importing, exporting and the peers (in turn)", repeat * len(clocks)) as adv:
            timings = round_robin(clocks, repeat, advance=adv)
        with uproot.open(work / "export.root") as file:
            exported = file["Events"].num_entries
        if exported != events:
            raise StorageError(f"giod exported {exported:,} events of {events:,}")
        state["fed"].close()
    rows = [_row(name, t, events, payload) for name, t in timings.items()]
    bound_in = timings["uproot read"].median + timings["giod write"].median
    bound_out = timings["giod read"].median + timings["uproot write"].median
    rows.append(_bound("uproot read + giod write", bound_in, events, payload))
    rows.append(_bound("giod read + uproot write", bound_out, events, payload))
    imp, exp = timings["giod import"].median, timings["giod export"].median
    verdicts = [
        {"what": "giod import", "seconds": imp, "bound": "uproot read + giod write", "bound_s": bound_in,
         "ratio": imp / bound_in},
        {"what": "giod export", "seconds": exp, "bound": "giod read + uproot write", "bound_s": bound_out,
         "ratio": exp / bound_out},
    ]  # fmt: skip
    notes = [
        f"{events:,} events, {n_branches:,} branches ({file_mb:.0f} MB file, {payload / MB:.0f} MB of arrays "
        f"in memory: MB/s count those); layout and values of the CMS NanoAOD ttbar file, events drawn from it; "
        f"medians of {repeat} rounds, every step once per round"
    ]
    return Outcome(
        name="interchange",
        parameters={"events": events, "repeat": repeat, "branches": n_branches, "file_mb": file_mb,
                    "payload_mb": payload / MB},
        tables=[
            Table("results", f"interchange: {events:,} NanoAOD-like events, {n_branches:,} branches", COLUMNS, rows),
            Table("bounds", "import and export beside what they cannot cost less than", BOUND_COLUMNS, verdicts),
        ],
        notes=notes,
    )  # fmt: skip


def _row(name: str, t: Timing, events: int, payload: int) -> dict[str, Any]:
    return {"step": name, "seconds": t.median, "events_per_s": events / t.median,
            "mb_per_s": payload / MB / t.median, "timing": t.as_dict()}  # fmt: skip


def _bound(name: str, seconds: float, events: int, payload: int) -> dict[str, Any]:
    return {"step": name, "seconds": seconds, "events_per_s": events / seconds, "mb_per_s": payload / MB / seconds}


COLUMNS = [
    Column("step", "step"), Column("seconds", "s", "{:.2f}"), Column("events_per_s", "events/s", "{:,.0f}"),
    Column("mb_per_s", "MB/s", "{:.1f}"),
]  # fmt: skip
BOUND_COLUMNS = [
    Column("what", "what"), Column("seconds", "s", "{:.2f}"), Column("bound", "beside"),
    Column("bound_s", "its s", "{:.2f}"), Column("ratio", "×", "{:.2f}"),
]  # fmt: skip


def plot(outcome: Outcome, path: Path) -> None:
    """Seconds of each step, giod's import and export beside their bounds."""
    rows = outcome.table("results").rows
    fig, (ax,) = figure("ROOT in and out of giod, beside uproot")
    names = [r["step"] for r in rows]
    ax.barh(names, [r["seconds"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("seconds (median)")
    save(fig, path)
