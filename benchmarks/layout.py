"""Container layouts measured on this machine: Parquet as giod writes it against Arrow IPC files.

The same synthetic events (``giod.testing.synthetic``: hits, cells, tracks and
jets as ``list<struct<…>>``) are written once per layout, one file per
container as giod lays them out, clusters of about 16 MB, and an fsync before
the clock stops. A read is file → Arrow → awkward (``ak.from_arrow``) of every
container, warm cache; every layout is read once per round, rounds are
interleaved and the median is quoted. "+ CRC" adds a CRC-32C over the bytes of
every record batch read, the check giod makes on Arrow containers.

    python benchmarks/layout.py --events 100000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import awkward as ak
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from giod.columns import containers_in, to_tables
from giod.storage.checksum import checksum_bytes
from giod.storage.container import WriteOptions
from giod.testing import synthetic

MB = 1e6
CLUSTER_BYTES = 16 << 20


def _clusters(table: pa.Table) -> list[pa.Table]:
    per_event = max(1, table.nbytes // max(1, table.num_rows))
    step = max(1, CLUSTER_BYTES // per_event)
    return [table.slice(i, step) for i in range(0, table.num_rows, step)]


def write_parquet(path: Path, table: pa.Table, options: WriteOptions) -> None:
    with pq.ParquetWriter(path, table.schema, **options.parquet_kwargs(table.schema)) as w:
        for part in _clusters(table):
            w.write_table(part, row_group_size=part.num_rows)
    _fsync(path)


def write_arrow(path: Path, table: pa.Table, codec: str | None) -> None:
    opts = ipc.IpcWriteOptions(compression=None if codec is None else pa.Codec(codec, 1 if codec == "zstd" else None))
    with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, table.schema, options=opts) as w:
        for part in _clusters(table):
            w.write_batch(part.combine_chunks().to_batches()[0])
    _fsync(path)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_parquet(path: Path, threads: bool) -> ak.Array:
    return ak.from_arrow(pq.read_table(path, use_threads=threads))


def read_arrow(path: Path, threads: bool, crc: bool = False) -> ak.Array:
    with pa.memory_map(str(path)) as source:
        reader = ipc.open_file(source, options=ipc.IpcReadOptions(use_threads=threads))
        if crc:  # the whole file's batches: same bytes as the per-batch check
            checksum_bytes(memoryview(source.read_buffer()))
        return ak.from_arrow(reader.read_all())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    schema = synthetic.schema()
    events = synthetic.events(args.events, seed=3)
    tables = to_tables(events, schema, containers_in(events, schema))
    payload = sum(t.nbytes for t in tables.values())
    layouts = {
        "Parquet list<struct> zstd-1 + byte-stream split (today)": ("parquet", WriteOptions()),
        "Parquet list<struct> uncompressed": ("parquet", WriteOptions(compression="none", byte_stream_split=False)),
        "Arrow IPC file, zstd-1 per buffer": ("arrow", "zstd"),
        "Arrow IPC file, lz4 per buffer": ("arrow", "lz4"),
        "Arrow IPC file, uncompressed": ("arrow", None),
    }
    with tempfile.TemporaryDirectory(prefix="giod-layout-") as tmp:
        write_t: dict[str, list[float]] = {k: [] for k in layouts}
        read_t: dict[tuple[str, str], list[float]] = {}
        sizes: dict[str, int] = {}
        for r in range(args.repeat):
            for name, (kind, opt) in layouts.items():
                d = Path(tmp) / f"{abs(hash(name))}-{r}"
                d.mkdir()
                t0 = time.perf_counter()
                for c, t in tables.items():
                    (write_parquet if kind == "parquet" else write_arrow)(d / c, t, opt)
                write_t[name].append(time.perf_counter() - t0)
                sizes[name] = sum(f.stat().st_size for f in d.iterdir())
        for _ in range(args.repeat):
            for name, (kind, _opt) in layouts.items():
                d = Path(tmp) / f"{abs(hash(name))}-0"
                variants = [("1 thread", False, False), ("2 threads", True, False)]
                if kind == "arrow":
                    variants.append(("2 threads + CRC", True, True))
                for label, threads, crc in variants:
                    t0 = time.perf_counter()
                    for c in tables:
                        if kind == "parquet":
                            read_parquet(d / c, threads)
                        else:
                            read_arrow(d / c, threads, crc)
                    read_t.setdefault((name, label), []).append(time.perf_counter() - t0)
    print(f"{args.events:,} events, {payload / MB:.0f} MB payload, medians of {args.repeat}")
    print("| layout | write MB/s | read MB/s, 1 thread | read MB/s, 2 threads | 2 threads + CRC | size MB |")
    print("|---|---|---|---|---|---|")
    for name in layouts:
        def rate(label: str, name: str = name) -> str:
            ts = read_t.get((name, label))
            return f"{payload / MB / statistics.median(ts):,.0f}" if ts else "–"
        print(f"| {name} | {payload / MB / statistics.median(write_t[name]):,.0f} | {rate('1 thread')} | "
              f"{rate('2 threads')} | {rate('2 threads + CRC')} | {sizes[name] / MB:,.0f} |")


if __name__ == "__main__":
    main()
