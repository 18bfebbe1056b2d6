"""Where a track crosses the tracker layers, and which hits lie there.

The track finder's geometry, compiled with numba: the layer table built from
the detector description (one row per ``TrackerHit.layer`` index), the
ordered list of layers a helix crosses (its *road*), the exact crossing of
one layer from the current fit, and the search of a layer's hits (sorted by
azimuth) for the one nearest a prediction.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from giod.physics.compiled import njit
from giod.physics.detector import Detector
from giod.physics.helix_fit import arc_length, cylinder_path, position

__all__ = [
    "BARREL", "HIGH", "KIND", "LOW", "PIXEL", "POS", "SIG_2", "SIG_RPHI", "X0",
    "EventHits", "azimuth_window", "best_hit", "crossing", "in_two_ranges", "layer_table", "passive_table", "road",
]

# Columns of the layer table.
KIND, POS, LOW, HIGH, SIG_RPHI, SIG_2, PIXEL, X0 = range(8)
#: ``KIND`` of a barrel layer (disks have 1).
BARREL = 0.0


class EventHits(NamedTuple):
    """One event's hits as the road search reads them (numba takes a named tuple of arrays).

    ``order`` sorts the hits by layer, then azimuth; ``sphi`` holds the azimuths in that order
    and ``starts[l]`` where layer ``l`` begins in it; ``used`` marks hits taken by a track.
    """

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    r: np.ndarray
    phi: np.ndarray
    layer: np.ndarray
    order: np.ndarray
    sphi: np.ndarray
    starts: np.ndarray
    used: np.ndarray


def passive_table(detector: Detector) -> np.ndarray:
    """One row per passive cylinder: radius, half length, thickness in radiation lengths."""
    rows = [(c.radius, c.half_length, c.x0) for c in detector.tracker.material]
    return np.asarray(rows, dtype=np.float64).reshape(-1, 3)


def layer_table(detector: Detector) -> np.ndarray:
    """One row per tracker layer index: kind, position, active range, resolutions, pixel flag,
    thickness in radiation lengths at normal incidence."""
    rows = []
    for layer in detector.tracker.barrel:
        rows.append((BARREL, layer.radius, -layer.half_length, layer.half_length,
                     layer.sigma_rphi, layer.sigma_z, layer.subdetector == "pixel", layer.x0))
    for side in (1.0, -1.0):
        for disk in detector.tracker.endcap:
            rows.append((1.0, side * disk.z, disk.r_min, disk.r_max,
                         disk.sigma_rphi, disk.sigma_r, disk.subdetector == "pixel", disk.x0))
    return np.asarray(rows, dtype=np.float64)


@njit
def azimuth_window(sphi, lo, hi, centre, half):
    """Index ranges ``[a, b)`` and ``[c, d)`` of ``sphi[lo:hi]`` (sorted azimuths) within
    ``half`` of ``centre``; two ranges when the window wraps at pi."""
    if hi <= lo:
        return lo, lo, lo, lo
    if half >= math.pi:
        return lo, hi, lo, lo
    a, b = centre - half, centre + half
    if a < -math.pi:
        return (lo + np.searchsorted(sphi[lo:hi], a + 2 * math.pi), hi,
                lo, lo + np.searchsorted(sphi[lo:hi], b, side="right"))
    if b > math.pi:
        return (lo + np.searchsorted(sphi[lo:hi], a), hi,
                lo, lo + np.searchsorted(sphi[lo:hi], b - 2 * math.pi, side="right"))
    return (lo + np.searchsorted(sphi[lo:hi], a), lo + np.searchsorted(sphi[lo:hi], b, side="right"),
            lo, lo)


@njit
def in_two_ranges(k, j0, j1, j2):
    """The ``k``-th index of the ranges ``[j0, j1)`` then ``[j2, ...)``: loop ``k`` over
    ``(j1 - j0) + (j3 - j2)``. (Not a generator: a numba generator loaded from the on-disk cache
    cannot be compiled into a caller of another module that is compiled afresh.)"""
    return j0 + k if k < j1 - j0 else j2 + (k - (j1 - j0))


@njit
def road(table, pixel_only, l1, l2, l3, rho, z0, t, r_last, z_last, s_last, margin, road_s, road_l):
    """Layers a helix near the beam line crosses after the point at path ``s_last``, in order.

    Fills ``road_s`` (approximate paths: the textbook ones for a helix
    through the beam line) and ``road_l`` (layers), sorted by path; returns
    how many. The exact crossing is computed again, from the current fit,
    when the road search reaches each layer.
    """
    half_turn = math.pi / max(abs(rho), 1e-12)
    ns = 0
    for lay in range(table.shape[0]):
        if lay == l1 or lay == l2 or lay == l3 or (pixel_only and table[lay, PIXEL] == 0):
            continue
        pos, low, high = table[lay, POS], table[lay, LOW] - margin, table[lay, HIGH] + margin
        if table[lay, KIND] == BARREL:
            if pos <= r_last or abs(0.5 * rho * pos) >= 1.0:
                continue
            s = arc_length(rho, pos)
            zc = z0 + t * s
            if zc < low or zc > high:
                continue
        else:
            if pos * t <= 0 or abs(pos) <= abs(z_last):
                continue
            s = (pos - z0) / t
            if s > half_turn:
                continue
            half = 0.5 * rho * s
            rc = s * math.sin(half) / half if abs(half) > 1e-9 else s
            if rc < low or rc > high:
                continue
        if s <= s_last + 0.05 or s > half_turn:
            continue
        # insertion in order: a few layers, and no allocation in this hot path
        j = ns
        while j > 0 and road_s[j - 1] > s:
            road_s[j], road_l[j] = road_s[j - 1], road_l[j - 1]
            j -= 1
        road_s[j], road_l[j] = s, lay
        ns += 1
    return ns


@njit
def crossing(table, lay, x0, y0, phi0, kappa, z0, t, margin):
    """Path to layer ``lay`` from the point of closest approach; NaN outside its active area."""
    if table[lay, KIND] == BARREL:
        s = cylinder_path(x0, y0, phi0, kappa, table[lay, POS])
        if math.isnan(s):
            return s
        zc = z0 + t * s
        if zc < table[lay, LOW] - margin or zc > table[lay, HIGH] + margin:
            return math.nan
        return s
    if t == 0:
        return math.nan
    s = (table[lay, POS] - z0) / t
    if s <= 0:
        return math.nan
    px, py = position(x0, y0, phi0, kappa, s)
    rc = math.hypot(px, py)
    if rc < table[lay, LOW] - margin or rc > table[lay, HIGH] + margin:
        return math.nan
    return s


@njit
def best_hit(table, lay, px, py, pz, t, var_v, var_z, window, hits):
    """The unused hit of layer ``lay`` nearest the prediction within the window; -1 if none."""
    rp = math.hypot(px, py)
    barrel = table[lay, KIND] == BARREL
    sig_rphi = math.sqrt(var_v + table[lay, SIG_RPHI] ** 2)
    if barrel:
        sig_2 = math.sqrt(var_z + table[lay, SIG_2] ** 2)
    else:  # on a disk the longitudinal uncertainty shows up in r
        sig_2 = math.sqrt(var_z / max(t * t, 1e-6) + table[lay, SIG_2] ** 2)
    centre = math.atan2(py, px)
    best, best_chi2 = -1, 2.0 * window * window
    j0, j1, j2, j3 = azimuth_window(hits.sphi, hits.starts[lay], hits.starts[lay + 1], centre,
                                    window * sig_rphi / max(rp, 1e-3))
    for k in range((j1 - j0) + (j3 - j2)):
        h = hits.order[in_two_ranges(k, j0, j1, j2)]
        if hits.used[h]:
            continue
        dphi = hits.phi[h] - centre
        if dphi > math.pi:
            dphi -= 2 * math.pi
        elif dphi < -math.pi:
            dphi += 2 * math.pi
        p1 = rp * dphi / sig_rphi
        p2 = ((hits.z[h] - pz) if barrel else (hits.r[h] - rp)) / sig_2
        if abs(p1) < window and abs(p2) < window:
            chi2 = p1 * p1 + p2 * p2
            if chi2 < best_chi2:
                best, best_chi2 = h, chi2
    return best
