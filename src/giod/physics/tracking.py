"""Track finding and fitting: pixel seeds, a road search outwards, a helix fit.

Pattern recognition from the hits alone (the ``particle`` relation of the
hits is never looked at), compiled with numba and run event by event inside
one compiled loop:

1. **Seeds.** For every unused hit on a pixel layer (innermost layers
   first), every pixel hit further out within the azimuth window allowed by
   ``pt_min`` forms a pair. The circle through the beam line and the two hits
   gives the curvature (``|kappa| <= kappa(pt_min)``) and the straight line in
   (s, z) the origin along the beam (``|z0| <= z0_max``).
2. **Road search.** The seed helix must find a third hit on one of the
   next two pixel layers it crosses (a seed leaving the pixel volume: on the
   next two layers of any kind); most chance pairs end there, before any
   fit. The helix then crosses every further layer (barrel cylinders and
   endcap disks, in the order the track meets them). On each layer the hit
   closest to the prediction within ``window`` standard deviations
   (measurement error and the fit's extrapolation error, both transverse and
   along z or r) joins the track, and the helix is refitted. The search
   stops after ``max_misses`` layers in a row without a hit.
3. **Fit.** Karimäki's circle fit and a straight line in (s, z), without the
   beam spot, guide the search; an accepted candidate is refitted with the
   material (:mod:`giod.physics.material_fit`: the multiple scattering's
   correlations in the covariance, the energy loss added back): ``pt`` from
   the curvature in the solenoid field, ``charge``, ``phi`` and ``d0`` at the
   point of closest approach, ``z0``, ``eta`` from the dip angle, ``chi2`` and
   ``ndf = 2 n - 5``. Candidates with fewer than ``min_hits`` hits or
   ``chi2 / ndf > max_chi2_ndf`` are dropped; the hits of an accepted track
   are not used again.

The search windows (step 2) add the multiple scattering expected since the
last hit to the measurement and extrapolation errors. The kernels read the
settings by name (:class:`Cuts`), never by position.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from giod.physics.compiled import njit
from giod.physics.detector import C_LIGHT, Detector
from giod.physics.helix_fit import (
    arc_length,
    circle_fit,
    line_fit,
    position,
    prediction_variances,
)
from giod.physics.material_fit import material_fit, ms_variances
from giod.physics.road import (
    BARREL,
    HIGH,
    KIND,
    PIXEL,
    POS,
    SIG_2,
    SIG_RPHI,
    X0,
    EventHits,
    azimuth_window,
    best_hit,
    crossing,
    in_two_ranges,
    layer_table,
    passive_table,
    road,
)

__all__ = ["TRACK_COLUMNS", "Cuts", "TrackingSettings", "find_tracks", "kernel_cuts"]

#: Most hits a candidate can hold (one per layer; the tracker has fewer layers).
_MAX_HITS = 64
#: Track parameters returned per track, in this order.
TRACK_COLUMNS = ("pt", "eta", "phi", "charge", "d0", "z0", "chi2", "ndf")


@dataclass(frozen=True)
class TrackingSettings:
    """Cuts of the track finder (cm, GeV)."""

    pt_min: float = 0.5  # seeds curl no more than a track of this pt
    z0_max: float = 25.0  # seeds point back to the luminous region (5 sigma of the beam spot)
    d0_max: float = 1.0  # accepted tracks pass this close to the beam line
    min_hits: int = 7
    max_misses: int = 3  # layers in a row crossed without a hit before the road search stops
    window: float = 5.0  # search window on each layer, in standard deviations
    max_chi2_ndf: float = 10.0
    beam_sigma: float = 0.02  # transverse size allowed for the origin of seeds (beam spot and d0)
    edge_margin: float = 0.5  # layers are searched this far beyond their active edges

    def __post_init__(self) -> None:
        from giod.errors import ConfigError

        if self.pt_min <= 0 or self.z0_max <= 0 or self.window <= 0 or self.beam_sigma <= 0:
            raise ConfigError("tracking settings pt_min, z0_max, window and beam_sigma must be positive")
        if self.min_hits < 3:
            raise ConfigError(f"tracking setting min_hits must be >= 3, got {self.min_hits}")


class Cuts(NamedTuple):
    """The cuts as the compiled track finder reads them: by name, so that adding or reordering a
    setting cannot shift the others (numba compiles a named tuple to a struct)."""

    kappa_max: float  # the curvature of a track of pt_min, 1/cm
    z0_max: float
    d0_max: float
    min_hits: int
    max_misses: int
    window: float
    max_chi2_ndf: float
    beam_weight: float  # 1 / beam_sigma^2, the beam line's weight in the seed fits
    edge_margin: float
    field_constant: float  # not a cut: C_LIGHT * field, pt = field_constant / |kappa|


def kernel_cuts(settings: TrackingSettings, field: float) -> Cuts:
    """The settings converted for the kernels, each passed by name."""
    return Cuts(
        kappa_max=C_LIGHT * field / settings.pt_min,
        z0_max=float(settings.z0_max),
        d0_max=float(settings.d0_max),
        min_hits=int(settings.min_hits),
        max_misses=int(settings.max_misses),
        window=float(settings.window),
        max_chi2_ndf=float(settings.max_chi2_ndf),
        beam_weight=1.0 / (settings.beam_sigma * settings.beam_sigma),
        edge_margin=float(settings.edge_margin),
        field_constant=C_LIGHT * field,
    )


class _Output(NamedTuple):
    """Where the kernel stores accepted tracks; ``counters`` = (tracks, hits) stored so far."""

    event: np.ndarray
    params: np.ndarray
    nhits: np.ndarray
    hits: np.ndarray
    counters: np.ndarray


def find_tracks(
    offsets: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray, layer: np.ndarray,
    detector: Detector, settings: TrackingSettings | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Find and fit tracks in many events given as flat hit columns and event offsets.

    Returns ``(event, params, n_hits, hits)``: the event row of each track,
    its parameters (:data:`TRACK_COLUMNS`), its number of hits and, flat in
    track order, the event-local indices of its hits (innermost first).
    """
    settings = settings or TrackingSettings()
    table = layer_table(detector)
    if len(table) > _MAX_HITS:
        from giod.errors import ConfigError

        raise ConfigError(f"the track finder handles at most {_MAX_HITS} tracker layers, "
                          f"the detector has {len(table)}")
    layer = np.asarray(layer, dtype=np.int64)
    if len(layer) and (layer.min() < 0 or layer.max() >= len(table)):
        from giod.errors import DataError

        raise DataError(f"tracker hits name layers outside 0..{len(table) - 1} of the detector")
    field = detector.solenoid.field
    t_event, t_params, t_nhits, t_hits, n_tracks, n_track_hits = _find_all(
        np.asarray(offsets, dtype=np.int64), np.asarray(x, dtype=np.float64),
        np.asarray(y, dtype=np.float64), np.asarray(z, dtype=np.float64), layer, table,
        passive_table(detector), kernel_cuts(settings, field),
    )
    params = t_params[:n_tracks]
    columns = dict(zip(TRACK_COLUMNS, params[:, :8].T, strict=True))
    kappa = np.abs(columns["pt"])  # the kernel returns the curvature
    columns["pt"] = C_LIGHT * field / kappa
    # not part of the model (reconstruct drops names starting with "_"): for the fit's pulls
    columns["_pt_error"] = columns["pt"] * params[:, 8] / kappa
    return t_event[:n_tracks], columns, t_nhits[:n_tracks], t_hits[:n_track_hits]


@njit
def _find_all(offsets, x, y, z, layer, table, passive, cuts):
    n_total = len(x)
    capacity = n_total // 3 + 1  # hits are never shared, and a track has at least three
    out = _Output(np.empty(capacity, dtype=np.int64), np.empty((capacity, 9)),
                  np.empty(capacity, dtype=np.int64), np.empty(max(n_total, 1), dtype=np.int64),
                  np.zeros(2, dtype=np.int64))
    pixel_layers = np.flatnonzero(table[:, PIXEL] > 0)
    for ev in range(len(offsets) - 1):
        lo, hi = offsets[ev], offsets[ev + 1]
        _event(ev, x[lo:hi], y[lo:hi], z[lo:hi], layer[lo:hi], table, passive, pixel_layers, cuts, out)
    return out.event, out.params, out.nhits, out.hits, out.counters[0], out.counters[1]


@njit
def _event(ev, x, y, z, layer, table, passive, pixel_layers, cuts, out):
    n = len(x)
    n_layers = table.shape[0]
    kappa_max, z0_max = cuts.kappa_max, cuts.z0_max
    r = np.sqrt(x * x + y * y)
    phi = np.arctan2(y, x)
    order = np.argsort(layer * 8.0 + (phi + math.pi))  # by layer, then azimuth
    sphi = phi[order]
    starts = np.searchsorted(layer[order], np.arange(n_layers + 1))
    used = np.zeros(n, dtype=np.bool_)
    hits = EventHits(x, y, z, r, phi, layer, order, sphi, starts, used)
    cand = np.empty(_MAX_HITS, dtype=np.int64)
    work = np.empty((10, _MAX_HITS))
    road_s = np.empty(n_layers)
    road_l = np.empty(n_layers, dtype=np.int64)
    for l1 in pixel_layers:
        for a in range(starts[l1], starts[l1 + 1]):
            h1 = order[a]
            if used[h1]:
                continue
            r1 = r[h1]
            found = False
            for l2 in pixel_layers:
                if l2 == l1 or found:
                    continue
                reach = table[l2, POS] if table[l2, KIND] == BARREL else table[l2, HIGH]
                if reach <= r1:
                    continue
                turn = math.asin(min(0.5 * kappa_max * reach, 1.0)) - math.asin(min(0.5 * kappa_max * r1, 1.0))
                dphi = turn + 0.05  # beam spot, impact parameter and resolution
                j0, j1, j2, j3 = azimuth_window(sphi, starts[l2], starts[l2 + 1], phi[h1], dphi)
                for k in range((j1 - j0) + (j3 - j2)):
                    h2 = order[in_two_ranges(k, j0, j1, j2)]
                    if used[h2] or r[h2] < r1 + 0.5:
                        continue
                    dist = math.hypot(x[h2] - x[h1], y[h2] - y[h1])
                    kappa = -2.0 * (x[h1] * y[h2] - y[h1] * x[h2]) / (r1 * r[h2] * dist)
                    if abs(kappa) > kappa_max:
                        continue
                    s1, s2 = arc_length(kappa, r1), arc_length(kappa, r[h2])
                    t = (z[h2] - z[h1]) / (s2 - s1)
                    if abs(z[h1] - t * s1) > z0_max:
                        continue
                    cand[0], cand[1] = h1, h2
                    if _follow(ev, cand, kappa, t, work, road_s, road_l, hits, table, passive, cuts, out):
                        found = True
                        break
            # a hit that seeded nothing stays available to later seeds as their outer hit


@njit
def _variances(work, n, passive, rho, t, cuts, s, beam_weight):
    """Variances of a prediction at path ``s``: the fit's (from the hits' errors) plus the
    multiple scattering's since the last hit."""
    var_v, var_z = prediction_variances(work[_CS], work[_CRPHI], work[_CSZ], n, s, beam_weight)
    ms_v, ms_z = ms_variances(work[_CS], work[_CX0], n, passive, rho, t, cuts.field_constant, s)
    return var_v + ms_v, var_z + ms_z


# Rows of a candidate's work array: one column per hit.
_CX, _CY, _CZ, _CW, _CRPHI, _C2, _CKIND, _CS, _CSZ, _CX0 = range(10)


@njit
def _fit(work, n, beam_weight, t_guess):
    """Circle fit (with the beam line as a point when ``beam_weight`` > 0) and line fit.

    A disk measures r, whose error reaches z through the dip angle: ``t_guess``
    (from the previous fit) sets it.
    """
    rho, phi, d, ok = circle_fit(work[_CX], work[_CY], work[_CW], n, beam_weight)
    if not ok:
        return rho, phi, d, 0.0, 0.0, False
    for i in range(n):
        sig = work[_C2, i]
        work[_CSZ, i] = sig if work[_CKIND, i] == BARREL else sig * max(abs(t_guess), 0.1)
    z0, t, ok = line_fit(work[_CX], work[_CY], work[_CZ], work[_CSZ], work[_CS], n, rho, phi, d)
    return rho, phi, d, z0, t, ok


@njit
def _path_lengths(work, i, rho, phi, d, t):
    """Path to hit ``i`` and its z error from the current helix, without refitting."""
    x0, y0 = d * math.sin(phi), -d * math.cos(phi)
    work[_CS, i] = arc_length(rho, math.hypot(work[_CX, i] - x0, work[_CY, i] - y0))
    sig = work[_C2, i]
    work[_CSZ, i] = sig if work[_CKIND, i] == BARREL else sig * max(abs(t), 0.1)


@njit
def _add_hit(work, i, h, x, y, z, table, lay, kappa, t):
    """Put hit ``h`` of layer ``lay`` at column ``i``, with its error across the track and the
    layer's thickness along the track (radiation lengths).

    A track of curvature ``kappa`` crosses the radial direction at ``r`` under
    an angle ``a`` with ``sin a = kappa r / 2``: across the track, a barrel hit
    is measured to ``sigma_rphi cos a``, a disk hit to
    ``sqrt(sigma_rphi^2 + (sigma_r sin a)^2)``.
    """
    work[_CX, i], work[_CY, i], work[_CZ, i] = x[h], y[h], z[h]
    sin_a = min(abs(0.5 * kappa * math.hypot(x[h], y[h])), 0.95)
    sig = table[lay, SIG_RPHI]
    if table[lay, KIND] == BARREL:
        sig *= math.sqrt(1.0 - sin_a * sin_a)
    else:
        sig = math.sqrt(sig * sig + (table[lay, SIG_2] * sin_a) ** 2)
    work[_CRPHI, i] = sig
    work[_CW, i] = 1.0 / (sig * sig)
    work[_C2, i] = table[lay, SIG_2]
    work[_CKIND, i] = table[lay, KIND]
    if table[lay, KIND] == BARREL:
        work[_CX0, i] = table[lay, X0] * math.sqrt(1.0 + t * t) / math.sqrt(1.0 - sin_a * sin_a)
    else:
        work[_CX0, i] = table[lay, X0] * math.sqrt(1.0 + t * t) / max(abs(t), 0.05)


@njit
def _follow(ev, cand, seed_kappa, seed_t, work, road_s, road_l, hits, table, passive, cuts, out):
    """Extend a seed pair along its road; store the track if it is good. True when stored."""
    window, beam_weight, margin = cuts.window, cuts.beam_weight, cuts.edge_margin
    x, y, z, r, phi, layer = hits.x, hits.y, hits.z, hits.r, hits.phi, hits.layer
    h1, h2 = cand[0], cand[1]
    l1, l2 = layer[h1], layer[h2]
    _add_hit(work, 0, h1, x, y, z, table, l1, seed_kappa, seed_t)
    _add_hit(work, 1, h2, x, y, z, table, l2, seed_kappa, seed_t)
    # The seed helix: through the beam line and both hits.
    rho, d, t = seed_kappa, 0.0, seed_t
    fphi = phi[h1] + math.asin(min(max(0.5 * rho * r[h1], -1.0), 1.0))
    work[_CS, 0], work[_CS, 1] = arc_length(rho, r[h1]), arc_length(rho, r[h2])
    z0 = z[h1] - t * work[_CS, 0]
    for i in range(2):
        work[_CSZ, i] = work[_C2, i] if work[_CKIND, i] == BARREL else work[_C2, i] * max(abs(t), 0.1)
    n = 2

    # A third hit on one of the next two pixel layers the seed crosses well inside, or no
    # track: most pairs are chance combinations and end here, cheaply. A seed about to leave
    # the pixel volume looks for it on the next two layers of any kind.
    third = -1
    for pixel_only in (True, False):
        ns = road(table, pixel_only, l1, l2, l2, rho, z0, t, r[h2], z[h2], work[_CS, 1],
                   0.0 if pixel_only else margin, road_s, road_l)
        for k in range(min(ns, 2)):
            lay = road_l[k]
            s = crossing(table, lay, 0.0, 0.0, fphi, rho, z0, t, margin)
            if math.isnan(s):
                continue
            px, py = position(0.0, 0.0, fphi, rho, s)
            var_v, var_z = _variances(work, n, passive, rho, t, cuts, s, beam_weight)
            third = best_hit(table, lay, px, py, z0 + t * s, t, var_v, var_z, window, hits)
            if third >= 0:
                break
        if third >= 0 or ns >= 2:
            break
    if third < 0:
        return False
    l3 = layer[third]
    cand[2] = third
    _add_hit(work, 2, third, x, y, z, table, l3, rho, t)
    n = 3
    rho, fphi, d, z0, t, ok = _fit(work, n, beam_weight, t)
    if not ok:
        return False

    # The road: every layer the helix crosses beyond its third hit, in order.
    ns = road(table, False, l1, l2, l3, rho, z0, t, r[third], z[third], work[_CS, 2], margin, road_s, road_l)

    misses = 0
    for k in range(ns):
        lay = road_l[k]
        x0, y0 = d * math.sin(fphi), -d * math.cos(fphi)
        s = crossing(table, lay, x0, y0, fphi, rho, z0, t, margin)
        best = -1
        if not math.isnan(s):
            px, py = position(x0, y0, fphi, rho, s)
            var_v, var_z = _variances(work, n, passive, rho, t, cuts, s, beam_weight)
            best = best_hit(table, lay, px, py, z0 + t * s, t, var_v, var_z, window, hits)
        if best < 0:
            misses += 1
            if misses > cuts.max_misses:
                break
            continue
        misses = 0
        cand[n] = best
        _add_hit(work, n, best, x, y, z, table, lay, rho, t)
        n += 1
        if n <= 6 or n % 3 == 0:  # later hits barely move a helix that is already well measured
            rho, fphi, d, z0, t, ok = _fit(work, n, beam_weight, t)
            if not ok:
                return False
        else:
            _path_lengths(work, n - 1, rho, fphi, d, t)

    if n < cuts.min_hits:
        return False
    rho, fphi, d, z0, t, ok = _fit(work, n, 0.0, t)
    if not ok:
        return False
    # the final fit: the material's scattering as correlated errors, its energy loss corrected
    rho, fphi, d, z0, t, chi2, sigma_rho, ok = material_fit(
        work[_CX], work[_CY], work[_CZ], work[_CS], work[_CRPHI], work[_CSZ], work[_CX0], n, passive,
        cuts.field_constant, rho, fphi, d, z0, t)
    if not ok or abs(z0) > cuts.z0_max or abs(d) > cuts.d0_max:
        return False
    ndf = 2 * n - 5
    if chi2 > cuts.max_chi2_ndf * ndf:
        return False

    i_trk, i_hit = out.counters[0], out.counters[1]
    out.event[i_trk] = ev
    out.params[i_trk, 0] = rho
    out.params[i_trk, 1] = math.asinh(t)
    out.params[i_trk, 2] = fphi
    out.params[i_trk, 3] = 1.0 if rho > 0 else -1.0
    out.params[i_trk, 4] = d
    out.params[i_trk, 5] = z0
    out.params[i_trk, 6] = chi2
    out.params[i_trk, 7] = ndf
    out.params[i_trk, 8] = sigma_rho
    out.nhits[i_trk] = n
    for i in range(n):
        out.hits[i_hit + i] = cand[i]
        hits.used[cand[i]] = True
    out.counters[0] += 1
    out.counters[1] += n
    return True
