"""Granularity benchmark: a dense calorimeter as one array per event or one record per cell.

The ATLAS note's question on today's tools. Every event carries a dense
3 × 64 × 1024 calorimeter (layer × phi × eta, 196,608 float32 energies),
stored three ways with the same values:

- ``image``: one object per event with a field ``e: float32[3][64][1024]``;
- ``flat``: one object per event with a field ``e: float32[196608]``;
- ``cells``: one record per cell, ``{ieta: int16, iphi: uint8, layer: uint8, e: float32}``.

Each is written through a giod writer into a fresh dataset and read back
(the whole collection); write time, read time and stored size are quoted
with their ratios to the ``image`` layout.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np

import giod
from giod.errors import ConfigError, StorageError
from giod.schema import Schema
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
)

__all__ = [
    "DEFAULT_EVENTS",
    "LAYOUTS",
    "QUICK_EVENTS",
    "SHAPE",
    "energies",
    "layout_events",
    "layout_schema",
    "plot",
    "run",
]

DEFAULT_EVENTS = 200
QUICK_EVENTS = 4
SHAPE = (3, 64, 1024)  # layer, phi, eta
CELLS = int(np.prod(SHAPE))
LAYOUTS = ("image", "flat", "cells")
_APPEND_EVENTS = 20  # events per append (about 16 MB of energies)


def layout_schema(layout: str) -> Schema:
    """The data model of one layout (no tags)."""
    if layout == "image":
        fields: dict[str, Any] = {"e": "float32" + "".join(f"[{n}]" for n in SHAPE)}
        coll = "calo"
    elif layout == "flat":
        fields = {"e": f"float32[{CELLS}]"}
        coll = "calo"
    elif layout == "cells":
        fields = {"ieta": "int16", "iphi": "uint8", "layer": "uint8", "e": "float32"}
        coll = "cells"
    else:
        raise ConfigError(f"unknown layout {layout!r} (known: {', '.join(LAYOUTS)})")
    return Schema.from_dict(
        {
            "schema_version": 1,
            "name": f"calorimeter_{layout}",
            "types": {"Calo": {"fields": fields}},
            "collections": {coll: "Calo"},
        },
        source=f"granularity {layout}",
    )


def energies(n: int, seed: int = 0) -> np.ndarray:
    """``n`` dense calorimeter images: noise everywhere, a few showers on top."""
    rng = np.random.default_rng(seed)
    e = rng.normal(0.0, 0.02, (n, *SHAPE)).astype(np.float32)
    # showers: a handful of hot cells per layer and event, so values are not pure noise
    hot = rng.integers(0, CELLS, (n, 50))
    flat = e.reshape(n, CELLS)
    np.put_along_axis(flat, hot, rng.exponential(5.0, (n, 50)).astype(np.float32), axis=1)
    return e


def _one_per_event(content: ak.contents.Content, n: int) -> ak.contents.ListOffsetArray:
    return ak.contents.ListOffsetArray(ak.index.Index64(np.arange(n + 1, dtype=np.int64)), content)


def layout_events(layout: str, e: np.ndarray) -> ak.Array:
    """The energies ``e`` (shape ``(n, 3, 64, 1024)``) as events of ``layout``."""
    n = len(e)
    if layout in ("image", "flat"):
        shape = SHAPE if layout == "image" else (CELLS,)
        inner: ak.contents.Content = ak.contents.NumpyArray(e.reshape(-1))
        for size in reversed(shape):
            inner = ak.contents.RegularArray(inner, size, zeros_length=n)
        record = ak.contents.RecordArray([inner], ["e"], length=n)
        return ak.Array(ak.contents.RecordArray([_one_per_event(record, n)], ["calo"], length=n))
    layer, iphi, ieta = np.indices(SHAPE).reshape(3, -1)
    columns = {
        "ieta": np.tile(ieta.astype(np.int16), n),
        "iphi": np.tile(iphi.astype(np.uint8), n),
        "layer": np.tile(layer.astype(np.uint8), n),
        "e": e.reshape(-1),
    }
    record = ak.contents.RecordArray([ak.contents.NumpyArray(v) for v in columns.values()], list(columns))
    offsets = np.arange(n + 1, dtype=np.int64) * CELLS
    cells = ak.contents.ListOffsetArray(ak.index.Index64(offsets), record)
    return ak.Array(ak.contents.RecordArray([cells], ["cells"], length=n))


def _write_and_read(work: Path, layout: str, events: ak.Array, tag: str) -> tuple[float, float, int, int]:
    """(write s, read s, stored bytes, values read) in a fresh federation, removed afterwards."""
    root = work / f"fed-{layout}-{tag}"
    fed = giod.open(root, create=True)
    try:
        ds = fed.create_dataset("calo", layout_schema(layout))
        start = time.perf_counter()
        with ds.writer() as w:
            for i in range(0, len(events), _APPEND_EVENTS):
                w.append(events[i : i + _APPEND_EVENTS])
        written = time.perf_counter() - start
        stored = int(ds.summary()["bytes"])
        coll = "cells" if layout == "cells" else "calo"
        start = time.perf_counter()
        back = ds.read([coll])
        read = time.perf_counter() - start
        values = len(ak.flatten(back[coll].e, axis=None))
    finally:
        fed.close()
        shutil.rmtree(root, ignore_errors=True)
    return written, read, stored, values


def run(
    events: int = DEFAULT_EVENTS,
    repeat: int = 3,
    workdir: str | os.PathLike[str] | None = None,
    bars: Bars | None = None,
) -> Outcome:
    """Measure write time, read time and size of the three layouts."""
    if events < 1 or repeat < 1:
        raise ConfigError("events and repeat must be positive")
    bars = bars or Bars(enabled=False)
    e = energies(events, seed=3)
    content = e.nbytes  # the energies: the same physics content in every layout
    data = {layout: layout_events(layout, e) for layout in LAYOUTS}  # views of ``e`` mostly
    reads: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
    stored: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="giod-bench-granularity-", dir=workdir) as tmp:
        clocks = {}
        for layout in LAYOUTS:

            def clock(i: int, layout: str = layout) -> float:
                """Write seconds; the read that follows is kept aside."""
                w, r, stored[layout], n = _write_and_read(Path(tmp), layout, data[layout], str(i))
                if n != events * CELLS:
                    raise StorageError(f"{layout}: read back {n} energies, wrote {events * CELLS}")
                reads[layout].append(r)
                return w

            clocks[layout] = clock
        with bars.task("writing and reading calorimeters (in turn)", repeat * len(clocks)) as adv:
            writes = round_robin(clocks, repeat, advance=adv)
    rows: list[dict[str, Any]] = []
    for layout in LAYOUTS:
        wt, rt = writes[layout], Timing(tuple(reads[layout]))
        rows.append(
            {
                "layout": layout,
                "events": events,
                "payload_mb": data[layout].nbytes / MB,  # this layout's Arrow-sized buffers
                "stored_mb": stored[layout] / MB,
                "write_s": wt.median,
                "read_s": rt.median,
                "write_mb_per_s": content / MB / wt.median,
                "read_mb_per_s": content / MB / rt.median,
                "write": wt.as_dict(),
                "read": rt.as_dict(),
            }
        )
    base = rows[0]
    for row in rows:
        row["write_ratio"] = ratio(row["write_s"], base["write_s"])
        row["read_ratio"] = ratio(row["read_s"], base["read_s"])
        row["size_ratio"] = ratio(row["stored_mb"], base["stored_mb"])
    notes = [
        f"{events} events of {SHAPE[0]}×{SHAPE[1]}×{SHAPE[2]} float32 cells "
        f"({CELLS * 4 / MB:.2f} MB each); "
        f"MB/s count the energies alone ({content / MB:.0f} MB), the same in every layout; "
        f"ratios are to the image layout; medians of {repeat} rounds, every layout once per round "
        "(a fresh write, then a read); zstd level 1"
    ]
    return Outcome(
        name="granularity",
        parameters={"events": events, "repeat": repeat, "shape": list(SHAPE)},
        tables=[
            Table(
                "results",
                f"granularity: {events} dense calorimeters, one array vs one record per cell",
                COLUMNS,
                rows,
            )
        ],
        notes=notes,
    )


COLUMNS = [
    Column("layout", "layout"), Column("payload_mb", "payload MB", "{:.0f}"),
    Column("stored_mb", "stored MB", "{:.0f}"), Column("write_s", "write s", "{:.2f}"),
    Column("write_mb_per_s", "write MB/s", "{:.0f}"), Column("read_s", "read s", "{:.2f}"),
    Column("read_mb_per_s", "read MB/s", "{:.0f}"), Column("write_ratio", "write ×", "{:.2f}"),
    Column("read_ratio", "read ×", "{:.2f}"), Column("size_ratio", "size ×", "{:.2f}"),
]  # fmt: skip


def plot(outcome: Outcome, path: Path) -> None:
    """Write time, read time and size of each layout, relative to the image layout."""
    rows = outcome.table("results").rows
    fig, (ax,) = figure("dense calorimeter: one array per event vs one record per cell")
    grouped_bars(
        ax,
        ["write time", "read time", "stored size"],
        {r["layout"]: [r["write_ratio"], r["read_ratio"], r["size_ratio"]] for r in rows},
        "ratio to the image layout",
    )
    save(fig, path)
