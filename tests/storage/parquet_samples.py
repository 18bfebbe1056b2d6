"""Random Arrow tables with the column kinds giod stores, and Parquet files written from them."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def _offsets(rng: np.random.Generator, n: int, mean: float, empty: float) -> np.ndarray:
    counts = rng.poisson(mean, n)
    counts[rng.random(n) < empty] = 0
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return offsets


def _mask(rng: np.random.Generator, n: int, p: float) -> pa.Array | None:
    return pa.array(rng.random(n) < p) if p > 0 else None


def table(n: int, seed: int, *, nulls: float = 0.0, empty: float = 0.2, mean: float = 3.0) -> pa.Table:
    """``n`` rows: flat numbers and bools, list<struct<float, fixed-size list, list<int32>, bool>>,
    list<int32>, and a struct holding a list. ``nulls`` > 0 makes nullable levels carry nulls."""
    rng = np.random.default_rng(seed)
    outer = _offsets(rng, n, mean, empty)
    m = int(outer[-1])
    inner = _offsets(rng, m, 2.0, 0.3)
    k = int(inner[-1])
    cov = pa.FixedSizeListArray.from_arrays(pa.array(rng.normal(size=3 * m).astype(np.float32)), 3)
    hits = pa.ListArray.from_arrays(pa.array(inner), pa.array(rng.integers(-5, 50, k).astype(np.int32)))
    jet = pa.StructArray.from_arrays(
        [pa.array(rng.exponential(30, m).astype(np.float32)), cov, hits, pa.array(rng.random(m) < 0.5)],
        fields=[pa.field("pt", pa.float32(), nullable=False), pa.field("cov", cov.type, nullable=False),
                pa.field("hits", hits.type, nullable=False), pa.field("tight", pa.bool_(), nullable=False)])
    # (no null jets: pyarrow 26 cannot read back a null struct holding a non-null fixed-size list)
    jets = pa.ListArray.from_arrays(pa.array(outer), jet, mask=_mask(rng, n, nulls))
    ids_off = _offsets(rng, n, 1.5, 0.4)
    ids = pa.ListArray.from_arrays(pa.array(ids_off),
                                   pa.array(rng.integers(0, 1000, int(ids_off[-1]), dtype=np.int32)))
    met_off = _offsets(rng, n, 1.0, 0.5)
    met = pa.StructArray.from_arrays(
        [pa.array(rng.normal(size=n)), pa.ListArray.from_arrays(pa.array(met_off),
                                                                 pa.array(rng.normal(size=int(met_off[-1]))))],
        names=["sumet", "terms"], mask=_mask(rng, n, nulls))
    flat_null = rng.random(n) < nulls
    return pa.table({
        "event": pa.array(np.arange(n, dtype=np.uint64)),
        "jets": jets,
        "ht": pa.array(rng.exponential(100, n).astype(np.float32), mask=flat_null),
        "pass": pa.array(rng.random(n) < 0.3),
        "ids": ids,
        "met": met,
        "layer": pa.array(rng.integers(0, 14, n).astype(np.uint8)),
    })


def write(t: pa.Table, **options: Any) -> bytes:
    """Parquet bytes with a page index; ``options`` go to ``pq.write_table``."""
    kwargs: dict[str, Any] = dict(write_page_index=True, compression="zstd")
    kwargs.update(options)
    sink = io.BytesIO()
    pq.write_table(t, sink, **kwargs)
    return sink.getvalue()
