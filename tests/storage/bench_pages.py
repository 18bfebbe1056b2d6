"""Page-level reads against whole-file and whole-row-group reads (results in docs/pages.md).

    python tests/storage/bench_pages.py [--events 200000] [--cluster-events 10000] [--pages 8 32 128 1024 8:20]

Writes the synthetic events through giod once per page setting — ``kB``, or
``kB:rows`` to also cap pyarrow's ``max_rows_per_page``, or ``kB:rows:batch``
to also set its ``write_batch_size`` (pages never hold fewer values than a
batch, 1024 by default) — then, for random
selections of 0.1 %, 1 % and 10 % of the events, reads every column of every
container three ways: a full scan (``pq.read_table(...).take``), only the row
groups that hold selected rows, and :func:`giod.storage.formats.parquet.read_rows` —
cold (footer and page indexes decoded on the call) and warm (cached). Times
are process CPU seconds with Arrow on one thread, best of a few runs, files
in the page cache: robust on a shared machine, and what a busy analysis
node pays.
"""

from __future__ import annotations

import argparse
import glob
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import giod
from giod.storage import pages
from giod.storage.container import WriteOptions
from giod.testing import synthetic

PAGES = ("8", "32", "128", "1024")
FRACTIONS = (0.001, 0.01, 0.1)


@dataclass(frozen=True)
class PageOptions(WriteOptions):
    """giod's write options plus pyarrow's limit on rows per page."""

    container_format: str = "parquet"  # pages are a Parquet matter
    max_rows_per_page: int | None = None
    write_batch_size: int | None = None

    def parquet_kwargs(self, schema: Any) -> dict[str, Any]:
        kwargs = super().parquet_kwargs(schema)
        if self.max_rows_per_page:
            kwargs["max_rows_per_page"] = self.max_rows_per_page
        if self.write_batch_size:
            kwargs["write_batch_size"] = self.write_batch_size
        return kwargs


class CountingFile:
    """A read-only file object that counts the bytes and reads it hands out."""

    def __init__(self, path: str):
        self.f = open(path, "rb", buffering=0)
        self.name = path
        self.bytes = 0
        self.reads = 0

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.f.seek(offset, whence)

    def tell(self) -> int:
        return self.f.tell()

    def readinto(self, view: Any) -> int:
        n = self.f.readinto(view)
        self.bytes += n
        self.reads += 1
        return n

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.bytes += len(data)
        self.reads += 1
        return data

    def close(self) -> None:
        self.f.close()


def cpu(fn: Callable[[], Any], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def write(root: str, events: Any, options: WriteOptions, cluster_events: int) -> list[str]:
    fed = giod.open(root, create=True)
    ds = fed.create_dataset("s", synthetic.schema())
    with ds.writer(cluster_events=cluster_events, database_events=len(events), database_bytes=1 << 40,
                   options=options) as w:
        w.append(events)
    return sorted(glob.glob(os.path.join(root, "data", "s", "*", "*.parquet")))


def read_row_groups(path: str, rows: np.ndarray) -> tuple[pa.Table, int]:
    """The rows, reading whole row groups; and the compressed bytes of those row groups."""
    pf = pq.ParquetFile(path)
    md = pf.metadata
    first = np.cumsum([0] + [md.row_group(i).num_rows for i in range(md.num_row_groups)])
    rg = np.searchsorted(first, rows, side="right") - 1
    used = np.unique(rg)
    base = np.cumsum([0] + [md.row_group(int(i)).num_rows for i in used])
    table = pf.read_row_groups(used.tolist()).take(base[np.searchsorted(used, rg)] + rows - first[rg])
    return table, sum(md.row_group(int(i)).column(c).total_compressed_size
                      for i in used for c in range(md.num_columns))


def measure(files: list[str], rows: np.ndarray) -> dict[str, float]:
    t_full = cpu(lambda: [pq.read_table(f).take(rows) for f in files], repeat=2)
    t_rg = cpu(lambda: [read_row_groups(f, rows) for f in files], repeat=2)
    rg_bytes = sum(read_row_groups(f, rows)[1] for f in files)

    def cold() -> None:
        pages._by_file.clear()
        for f in files:
            pages.read_rows(f, None, rows)

    t_cold = cpu(cold)
    t_warm = cpu(lambda: [pages.read_rows(f, None, rows) for f in files])
    pages._by_file.clear()
    counted = [CountingFile(f) for f in files]
    for c in counted:
        got = pages.read_rows(c, None, rows)  # type: ignore[arg-type]
        assert got.equals(pq.read_table(c.name).take(rows)), f"read_rows differs from pyarrow on {c.name}"
        c.close()
    return dict(full=t_full, rg=t_rg, rg_mb=rg_bytes / 1e6, cold=t_cold, warm=t_warm,
                mb=sum(c.bytes for c in counted) / 1e6, reads=sum(c.reads for c in counted))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--cluster-events", type=int, default=10_000)
    ap.add_argument("--pages", nargs="*", default=list(PAGES), help="kB[:max_rows_per_page[:write_batch_size]]")
    args = ap.parse_args()
    pa.set_cpu_count(1)
    events = synthetic.events(args.events, seed=1)
    rng = np.random.default_rng(7)
    print(f"{args.events} events, {args.cluster_events} per cluster; CPU s, one thread, best of 2-3, warm cache")
    print("| pages | file MB | scan s | sel. | scan+take s | row groups s (MB) | read_rows cold s (MB, reads) "
          "| warm s | scan+take / cold | / warm |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for spec in args.pages:
        kb, max_rows, batch = (spec.split(":") + ["", ""])[:3]
        options = PageOptions(data_page_size=int(kb) << 10, max_rows_per_page=int(max_rows) if max_rows else None,
                              write_batch_size=int(batch) if batch else None)
        label = f"{kb} kB" + (f", ≤{max_rows} rows" if max_rows else "") + (f", batch {batch}" if batch else "")
        with tempfile.TemporaryDirectory() as tmp:
            files = write(tmp, events, options, args.cluster_events)
            size = sum(os.path.getsize(f) for f in files) / 1e6
            scan = cpu(lambda files=files: [pq.read_table(f) for f in files], repeat=2)
            for frac in FRACTIONS:
                rows = np.sort(rng.choice(args.events, max(1, int(frac * args.events)), replace=False))
                m = measure(files, rows)
                print(f"| {label} | {size:.0f} | {scan:.2f} | {frac:.1%} | {m['full']:.2f} "
                      f"| {m['rg']:.2f} ({m['rg_mb']:.0f}) | {m['cold']:.3f} ({m['mb']:.1f}, {m['reads']:.0f}) "
                      f"| {m['warm']:.3f} | {m['full'] / m['cold']:.0f}x | {m['full'] / m['warm']:.0f}x |",
                      flush=True)


if __name__ == "__main__":
    main()
