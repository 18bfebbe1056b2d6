"""Read benchmark: giod beside plain pyarrow, uproot TTree and uproot RNTuple on the same events.

The setup writes one giod dataset and the peer files (the writers of
:mod:`giod_bench.daq`: same events, zstd level 1, clusters of about 16 MB).
Each reader then reads everything, and one collection (``hits``), warm
cache: one untimed read, then ``repeat`` timed ones (best and median).
A second table splits the time: decoding the files (``pq.read_table`` or
giod's container reads) against the conversion to awkward (``ak.from_arrow``
or giod's assembly, relation linking included). ROOT's RDataFrame joins
only when ``import ROOT`` works; it is an optional extra, never a dependency.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import giod
from giod.columns import containers_in, to_tables
from giod.errors import ConfigError
from giod.read.projection import assemble, read_database, resolve_columns
from giod.schema import Schema
from giod.testing import synthetic
from giod_bench import daq
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

__all__ = ["COLLECTION", "DEFAULT_EVENTS", "QUICK_EVENTS", "plot", "run"]

DEFAULT_EVENTS = 200_000
QUICK_EVENTS = 2_000
COLLECTION = "hits"  # the one collection read alone
#: mantissa bits of the float fields of the second giod dataset (NanoAOD keeps 10–12 for most)
PRECISION = 10
PRECISE = f"giod, {PRECISION}-bit floats"


def precise_schema(bits: int = PRECISION) -> Schema:
    """The synthetic model with a ``precision`` on every float32 member of its collections (not the tags)."""
    text = resources.files("giod.testing").joinpath("synthetic.yaml").read_text()
    # members are written in flow mappings ({x: float32, ...}); tags in block style are left alone
    text = re.sub(r"(\w+): float32(?=[,}])", rf"\1: {{type: float32, precision: {bits}}}", text)
    return Schema.from_yaml(text.replace("name: synthetic", "name: synthetic_precise"))


def _giod_split(ds: Any, columns: list[str] | None) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
    """giod's read in its two halves: container reads (decode), then assembly to awkward."""
    ds = ds.pinned()
    dbs = ds.databases()
    avail = set.intersection(*({c.name for c in db.containers} for db in dbs))
    proj = resolve_columns(ds.schema, columns, avail)

    def decode() -> dict[str, pa.Table]:
        parts = [read_database(ds.snapshot, db, proj, None) for db in dbs]
        return {c: pa.concat_tables([p[c] for p in parts]) for c in proj.columns}

    def convert(tables: dict[str, pa.Table]) -> ak.Array:
        return assemble(ds.schema, proj, tables)

    return decode, convert


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, ignoring the round number that a clock receives last."""
    return fn(*args[:-1])


def _root_available() -> bool:
    try:
        import ROOT  # noqa: F401
    except Exception:  # noqa: BLE001 - any failure to load ROOT means "not here"
        return False
    return True


def _rdataframe_reader(path: Path) -> Callable[[int], Any]:
    import ROOT

    def read(_: int) -> Any:
        return ROOT.RDataFrame("t", str(path)).AsNumpy()

    return read


def run(
    events: int = DEFAULT_EVENTS,
    repeat: int = 3,
    workdir: str | os.PathLike[str] | None = None,
    bars: Bars | None = None,
) -> Outcome:
    """Measure full and one-collection reads through giod and its peers."""
    if events < 1 or repeat < 1:
        raise ConfigError("events and repeat must be positive")
    bars = bars or Bars(enabled=False)
    schema = synthetic.schema()
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="giod-bench-read-", dir=workdir) as tmp:
        work = Path(tmp)
        with bars.task("writing giod and peer files", 6) as advance:
            data = synthetic.events(events, seed=2)
            tables = to_tables(data, schema, containers_in(data, schema))
            payload = sum(t.nbytes for t in tables.values())
            part = tables[schema.container_of(COLLECTION)].column(COLLECTION).nbytes
            chunk = daq.peer_chunk(events, payload)
            advance(1)
            fed = giod.open(work / "fed", create=True)
            ds = fed.create_dataset("read", schema)
            with ds.writer() as w:
                for start in range(0, events, daq.BATCH_EVENTS):
                    w.append(data[start : start + daq.BATCH_EVENTS])
            advance(1)
            precise = fed.create_dataset("read_precise", precise_schema())
            with precise.writer() as w:
                for start in range(0, events, daq.BATCH_EVENTS):
                    w.append(data[start : start + daq.BATCH_EVENTS])
            advance(1)
            files = {
                "pyarrow Parquet": work / "peer.parquet",
                "uproot TTree": work / "peer-ttree.root",
                "uproot RNTuple": work / "peer-rntuple.root",
            }
            daq.write_parquet(files["pyarrow Parquet"], data, chunk)
            advance(1)
            daq.write_ttree(files["uproot TTree"], daq.ttree_arrays(data, schema), chunk)
            advance(1)
            if daq.rntuple_supported():
                daq.write_rntuple(files["uproot RNTuple"], data, chunk)
            else:
                del files["uproot RNTuple"]
                notes.append("this uproot cannot write RNTuple: RNTuple rows left out")
            advance(1)
        del data, tables
        stored = {
            "giod": int(ds.summary()["bytes"]),
            PRECISE: int(precise.summary()["bytes"]),
            **{k: p.stat().st_size for k, p in files.items()},
        }
        readers = _readers(ds, files)
        readers[PRECISE] = (lambda _: precise.read(), lambda _: precise.read([COLLECTION]))
        notes.append(f"{PRECISE}: the same events in a model whose float members keep {PRECISION} mantissa bits "
                     "(precision in the YAML model; the tags keep all): the codec is kept where it then pays")
        if _root_available():
            readers["ROOT RDataFrame"] = (_rdataframe_reader(files["uproot TTree"]), None)
            stored["ROOT RDataFrame"] = stored["uproot TTree"]
            notes.append("ROOT RDataFrame reads the uproot TTree file (AsNumpy of every column)")
        else:
            notes.append("ROOT RDataFrame left out: `import ROOT` fails here (optional: pip install ROOT)")
        kinds = (("everything", payload, None, 0), (COLLECTION, part, [COLLECTION], 1))
        clocks: dict[tuple[str, str, str], Callable[[int], float]] = {}
        for what, _, _, index in kinds:
            for label, pair in readers.items():
                fn = pair[index]
                if fn is not None:
                    clocks[("read", label, what)] = stopwatch(fn)
        decoded: dict[tuple[str, str], Any] = {}  # kept so that conversions time alone
        for what, _, columns, _ in kinds:
            for label, decode, convert in _split_steps(ds, files["pyarrow Parquet"], columns):
                decoded[(label, what)] = decode()
                clocks[("decode", label, what)] = stopwatch(partial(_call, decode))
                clocks[("convert", label, what)] = stopwatch(partial(_call, convert, decoded[(label, what)]))
        with bars.task("reading (all readers in turn)", repeat * len(clocks)) as advance:
            timings = round_robin(clocks, repeat, warmup=1, advance=advance)
        del decoded
        rows = [
            _row(label, what, events, amount, timings[("read", label, what)], stored.get(label))
            for what, amount, _, _ in kinds
            for label in readers
            if ("read", label, what) in timings
        ]
        split_rows = [
            _split_row(label, what, amount, timings[("decode", label, what)],
                       timings[("convert", label, what)])
            for what, amount, _, _ in kinds
            for label in ("pyarrow Parquet", "giod")
        ]  # fmt: skip
        fed.close()
    _add_ratios(rows)
    notes.append(
        f"payload = uncompressed Arrow bytes: {payload / MB:.1f} MB for everything, "
        f"{part / MB:.1f} MB for {COLLECTION}; warm cache: one untimed round, then the median "
        f"of {repeat} rounds, every reader once per round"
    )
    return Outcome(
        name="read",
        parameters={
            "events": events,
            "repeat": repeat,
            "collection": COLLECTION,
            "peer_chunk_events": chunk,
            "zstd_level": daq.ZSTD_LEVEL,
        },
        tables=[
            Table("results", f"read: {events:,} events, {payload / MB:.0f} MB payload", COLUMNS, rows),
            Table(
                "split",
                "where the time goes: decoding the files (Parquet; giod's containers) vs Arrow → awkward",
                SPLIT_COLUMNS,
                split_rows,
            ),
        ],
        notes=notes,
    )


Reader = Callable[[int], Any]


def _readers(ds: Any, files: dict[str, Path]) -> dict[str, tuple[Reader | None, Reader | None]]:
    """label -> (read everything, read the one collection)."""
    import uproot

    parquet = files["pyarrow Parquet"]
    out: dict[str, tuple[Reader | None, Reader | None]] = {
        "giod": (lambda _: ds.read(), lambda _: ds.read([COLLECTION])),
        "pyarrow Parquet": (
            lambda _: ak.from_arrow(pq.read_table(parquet)),
            lambda _: ak.from_arrow(pq.read_table(parquet, columns=[COLLECTION])),
        ),
    }
    ttree = files["uproot TTree"]

    def ttree_read(filter_name: Any) -> Reader:
        def read(_: int) -> Any:
            with uproot.open(ttree) as f:
                return f["t"].arrays(filter_name=filter_name)

        return read

    out["uproot TTree"] = (ttree_read(None), ttree_read([f"n_{COLLECTION}", f"{COLLECTION}_*"]))
    if "uproot RNTuple" in files:
        rntuple = files["uproot RNTuple"]

        def rntuple_read(field: str | None) -> Reader:
            def read(_: int) -> Any:
                with uproot.open(rntuple) as f:
                    return f["n"].arrays() if field is None else f["n"][field].array()

            return read

        out["uproot RNTuple"] = (rntuple_read(None), rntuple_read(COLLECTION))
    return out


def _split_steps(
    ds: Any, parquet: Path, columns: list[str] | None
) -> list[tuple[str, Callable[[], Any], Callable[[Any], Any]]]:
    """(label, decode, convert) of plain pyarrow and of giod."""

    def pq_decode() -> pa.Table:
        return pq.read_table(parquet, columns=columns)

    return [("pyarrow Parquet", pq_decode, ak.from_arrow), ("giod", *_giod_split(ds, columns))]


def _split_row(label: str, what: str, amount: int, d: Timing, c: Timing) -> dict[str, Any]:
    return {
        "reader": label,
        "what": what,
        "decode_s": d.median,
        "convert_s": c.median,
        "decode_mb_per_s": amount / MB / d.median,
        "convert_mb_per_s": amount / MB / c.median,
        "convert_share": c.median / (d.median + c.median),
        "decode": d.as_dict(),
        "convert": c.as_dict(),
    }


def _row(label: str, what: str, n_events: int, amount: int, timing: Timing, stored: int | None) -> dict[str, Any]:
    return {
        "reader": label,
        "what": what,
        "payload_mb": amount / MB,
        "stored_mb": None if stored is None or what != "everything" else stored / MB,
        "best_s": timing.best,
        "median_s": timing.median,
        "timing": timing.as_dict(),
        "mb_per_s": amount / MB / timing.median,
        "events_per_s": n_events / timing.median,
    }


def _add_ratios(rows: list[dict[str, Any]]) -> None:
    for what in {r["what"] for r in rows}:
        same = [r for r in rows if r["what"] == what]
        fastest = max((r["mb_per_s"] for r in same if not r["reader"].startswith("giod")), default=None)
        for r in same:
            r["vs_fastest_peer"] = ratio(r["mb_per_s"], fastest)


COLUMNS = [
    Column("reader", "reader"), Column("what", "reads"), Column("stored_mb", "file MB", "{:.1f}"),
    Column("best_s", "best s", "{:.3f}"), Column("median_s", "median s", "{:.3f}"),
    Column("mb_per_s", "MB/s", "{:.0f}"), Column("events_per_s", "events/s", "{:,.0f}"),
    Column("vs_fastest_peer", "× fastest peer", "{:.2f}"),
]  # fmt: skip

SPLIT_COLUMNS = [
    Column("reader", "reader"),
    Column("what", "reads"),
    Column("decode_s", "decode s", "{:.3f}"),
    Column("convert_s", "→ awkward s", "{:.3f}"),
    Column("decode_mb_per_s", "decode MB/s", "{:.0f}"),
    Column("convert_mb_per_s", "→ awkward MB/s", "{:.0f}"),
    Column("convert_share", "→ awkward share", "{:.0%}"),
]


def plot(outcome: Outcome, path: Path) -> None:
    """Read rates of every reader, everything and one collection; and the time split."""
    rows = outcome.table("results").rows
    readers = list(dict.fromkeys(r["reader"] for r in rows))
    kinds = list(dict.fromkeys(r["what"] for r in rows))
    rate = {(r["reader"], r["what"]): r["mb_per_s"] for r in rows}
    fig, (ax, ax2) = figure("giod read beside its peers (warm cache, median)", ncols=2)
    grouped_bars(ax, kinds, {rd: [rate.get((rd, k)) for k in kinds] for rd in readers}, "payload MB/s")
    split = outcome.table("split").rows
    labels = [f"{r['reader']}\n{r['what']}" for r in split]
    x = np.arange(len(split))
    ax2.bar(x, [r["decode_s"] for r in split], label="file decode")
    ax2.bar(x, [r["convert_s"] for r in split], bottom=[r["decode_s"] for r in split], label="→ awkward")
    ax2.set_xticks(x, labels, fontsize="small")
    ax2.set_ylabel("seconds (median)")
    ax2.legend(fontsize="small")
    ax2.grid(axis="y", alpha=0.3)
    save(fig, path)
