"""Variable-length lists kept flat: a count per list and the values one after another.

The reconstruction builds its relations (track -> hits, jet -> clusters, ...)
in this form before :func:`giod.physics.layout.build_collection` turns them
into awkward lists; these helpers reorder and subset such lists without a
Python loop per list.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ramp", "starts", "take_lists"]


def starts(counts: np.ndarray) -> np.ndarray:
    """Position of the first value of each list."""
    counts = np.asarray(counts, dtype=np.int64)
    out = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out


def ramp(counts: np.ndarray) -> np.ndarray:
    """``0 .. n-1`` for every ``n`` in ``counts``, concatenated."""
    counts = np.asarray(counts, dtype=np.int64)
    return np.asarray(np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts(counts), counts))


def take_lists(counts: np.ndarray, values: np.ndarray, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lists ``items`` (indices or a boolean mask), in that order: new counts and values."""
    counts = np.asarray(counts, dtype=np.int64)
    first = starts(counts)[items]
    new_counts = counts[items]
    return new_counts, np.asarray(values)[np.repeat(first, new_counts) + ramp(new_counts)]
