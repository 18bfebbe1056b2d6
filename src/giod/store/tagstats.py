"""Tag statistics: each database's (min, max) of every tag, as the catalog keeps them to prune selections."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from giod.storage.numpyview import chunked_values

__all__ = ["merge_stats"]


def merge_stats(stats: dict[str, tuple[float, float]], table: pa.Table) -> None:
    """Widen per-field (min, max) with the values in ``table``."""
    for name in table.column_names:
        col = table.column(name)
        if len(col) == 0 or pa.types.is_string(col.type):  # text has no bounds that selections use
            continue
        bounds = _plain_bounds(col)
        if bounds is None:
            mm = pc.min_max(col)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
        else:
            lo, hi = bounds
        if lo is None or (isinstance(lo, float) and (np.isnan(lo) or np.isnan(hi))):
            stats[name] = (float("nan"), float("nan"))  # unknown: never prunes
            continue
        lo, hi = float(lo), float(hi)
        if name in stats:
            old = stats[name]
            if np.isnan(old[0]):
                continue
            lo, hi = min(lo, old[0]), max(hi, old[1])
        stats[name] = (lo, hi)


def _plain_bounds(col: pa.ChunkedArray) -> tuple[float, float] | None:
    """``pc.min_max`` of a column of integers, or of floats without NaN or zero, in numpy (a commit's tags:
    a few µs, not 15 a tag); None where Arrow answers: nulls, booleans, half floats, and the floats whose
    answer is Arrow's to give — NaN (ignored unless every value is) and ±0 (which sign it keeps)."""
    t = col.type
    if col.null_count or not (pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t)):
        return None
    values = chunked_values(col)
    lo, hi = values.min(), values.max()
    if values.dtype.kind == "f" and (np.isnan(lo) or lo == 0 or hi == 0):
        return None
    return lo.item(), hi.item()
