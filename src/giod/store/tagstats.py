"""Tag statistics: each database's (min, max) of every tag, as the catalog keeps them to prune selections."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["merge_stats"]


def merge_stats(stats: dict[str, tuple[float, float]], table: pa.Table) -> None:
    """Widen per-field (min, max) with the values in ``table``."""
    for name in table.column_names:
        col = table.column(name)
        if len(col) == 0 or pa.types.is_string(col.type):  # text has no bounds that selections use
            continue
        mm = pc.min_max(col)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
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
