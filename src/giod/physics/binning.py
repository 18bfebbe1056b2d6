"""The validation's cuts, bins and binned statistics, shared by the measurement
(:mod:`giod.physics.validation`) and its plots (:mod:`giod.physics.validation_plots`), which
the measurement draws: kept below both so that neither imports the other back."""

from __future__ import annotations

import numpy as np

__all__ = [
    "BARREL_ETA_MAX",
    "ETA_BINS",
    "ETA_PLOT_PT",
    "JET_ETA_MAX",
    "JET_PT_BINS",
    "PT_BINS",
    "TARGETS",
    "TRACK_ETA_MAX",
    "TRACK_PT_MIN",
    "binned_medians",
    "binned_widths",
]

#: The issue's targets.
TARGETS = {"tracking_efficiency": 0.95, "fake_rate": 0.05, "jet_response_tolerance": 0.10,
           "jet_response_min_pt": 50.0}
TRACK_PT_MIN, TRACK_ETA_MAX = 1.0, 2.4
MATCH_FRACTION = 0.75
JET_ETA_MAX = 2.5
PT_BINS = np.array([0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 200.0])
ETA_BINS = np.linspace(-2.5, 2.5, 21)
JET_PT_BINS = np.array([20.0, 30.0, 50.0, 75.0, 100.0, 150.0, 200.0, 300.0, 500.0, 1000.0, 2500.0])
#: Tracks whose resolution is compared with CMS's barrel figures, and the pT range of the
#: resolution-vs-eta plot.
BARREL_ETA_MAX = 1.4
ETA_PLOT_PT = (1.0, 10.0)


def binned_medians(x: np.ndarray, y: np.ndarray, edges: np.ndarray, min_count: int = 10) -> np.ndarray:
    """Median of ``y`` in bins of ``x`` (NaN where fewer than ``min_count`` entries)."""
    which = np.searchsorted(edges, x, side="right") - 1
    out = np.full(len(edges) - 1, np.nan)
    for b in range(len(edges) - 1):  # one numpy call per bin, not per object
        sel = which == b
        if sel.sum() >= min_count:
            out[b] = np.median(y[sel])
    return out


def binned_widths(x: np.ndarray, y: np.ndarray, edges: np.ndarray, min_count: int = 10) -> np.ndarray:
    """Half the 16-84 % interval of ``y`` in bins of ``x``."""
    which = np.searchsorted(edges, x, side="right") - 1
    out = np.full(len(edges) - 1, np.nan)
    for b in range(len(edges) - 1):
        sel = which == b
        if sel.sum() >= min_count:
            lo, hi = np.percentile(y[sel], [16, 84])
            out[b] = 0.5 * (hi - lo)
    return out
