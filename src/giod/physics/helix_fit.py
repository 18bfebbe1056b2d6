"""Compiled helix geometry and fits for the track finder (scalar numba functions).

Conventions are those of :mod:`giod.physics.helix`: a positive curvature
``kappa`` turns clockwise seen from +z (a positive charge in a field along
+z), and the azimuth of the momentum after a transverse path ``s`` is
``phi0 - kappa * s``.

The circle fit is Karimäki's non-iterative weighted fit (NIM A305 (1991)
187), parametrised by the signed curvature ``rho``, the azimuth ``phi`` of
the direction at the point of closest approach to the z axis, and the signed
distance ``d`` of that point, which lies at ``d * (sin phi, -cos phi)``. The
longitudinal fit is a straight line ``z = z0 + t * s`` in the transverse path
``s`` from that point (``t = cot theta``).
"""

from __future__ import annotations

import math

import numpy as np

from giod.physics.compiled import njit

__all__ = [
    "arc_length",
    "circle_fit",
    "cylinder_path",
    "line_fit",
    "position",
    "prediction_variances",
    "signed_distance",
]


@njit
def arc_length(kappa: float, chord: float) -> float:
    """Transverse path along a circle of curvature ``kappa`` spanning ``chord``."""
    a = 0.5 * kappa * chord
    if abs(a) < 1e-9:
        return chord
    a = min(max(a, -1.0), 1.0)
    return 2.0 * math.asin(a) / kappa


@njit
def position(x0: float, y0: float, phi0: float, kappa: float, s: float) -> tuple[float, float]:
    """Transverse position after the path ``s`` from ``(x0, y0)`` with direction ``phi0``."""
    t = 0.5 * kappa * s
    chord = s * math.sin(t) / t if abs(t) > 1e-9 else s
    direction = phi0 - t
    return x0 + chord * math.cos(direction), y0 + chord * math.sin(direction)


@njit
def cylinder_path(x0: float, y0: float, phi0: float, kappa: float, radius: float) -> float:
    """Path from ``(x0, y0)`` inside the cylinder ``r = radius`` to it; NaN if never reached.

    The scalar twin of :func:`giod.physics.helix.cylinder_crossing`.
    """
    if abs(kappa) < 1e-12:
        kappa = 1e-12
    c, s = math.cos(phi0), math.sin(phi0)
    a = x0 * c + y0 * s
    b = x0 * s - y0 * c
    m = 1.0 + kappa * b
    n = kappa * a
    big_m = math.hypot(m, n)
    excess = n * n / (big_m + abs(m)) if m > 0 else big_m - m
    depth = radius * radius - (x0 * x0 + y0 * y0)
    eps = (excess + 0.5 * kappa * kappa * depth) / big_m
    if depth <= 0 or eps > 2:
        return math.nan
    alpha = 2.0 * math.asin(math.sqrt(0.5 * eps))
    return alpha / abs(kappa) - math.atan2(n, m) / kappa


@njit
def signed_distance(x: float, y: float, rho: float, phi: float, d: float) -> float:
    """Signed distance of ``(x, y)`` from the circle ``(rho, phi, d)``, stable as rho -> 0."""
    p = 0.5 * rho * (x * x + y * y + d * d) - (1.0 + rho * d) * (x * math.sin(phi) - y * math.cos(phi)) + d
    u = 1.0 + 2.0 * rho * p
    if u <= 0:
        return math.inf
    return 2.0 * p / (1.0 + math.sqrt(u))


@njit
def circle_fit(
    xs: np.ndarray, ys: np.ndarray, ws: np.ndarray, n: int, origin_weight: float = 0.0,
) -> tuple[float, float, float, bool]:
    """Weighted circle fit of the first ``n`` points: ``(rho, phi, d, ok)``.

    ``origin_weight`` > 0 adds the origin (the beam line) as one more point.
    ``phi`` is the direction of motion towards the last point: Karimäki's
    angle is only known modulo pi, so the orientation is fixed afterwards.
    """
    sw = origin_weight
    xm = ym = xx = yy = xy = xr = yr = rr = r4 = 0.0
    for i in range(n):
        w, x, y = ws[i], xs[i], ys[i]
        r2 = x * x + y * y
        sw += w
        xm += w * x
        ym += w * y
        xx += w * x * x
        yy += w * y * y
        xy += w * x * y
        xr += w * x * r2
        yr += w * y * r2
        rr += w * r2
        r4 += w * r2 * r2
    if sw <= 0:
        return 0.0, 0.0, 0.0, False
    xm, ym, xx, yy, xy = xm / sw, ym / sw, xx / sw, yy / sw, xy / sw
    xr, yr, rr, r4 = xr / sw, yr / sw, rr / sw, r4 / sw
    cxx, cyy, cxy = xx - xm * xm, yy - ym * ym, xy - xm * ym
    cxr, cyr, crr = xr - xm * rr, yr - ym * rr, r4 - rr * rr
    if crr <= 0:
        return 0.0, 0.0, 0.0, False
    q1 = crr * cxy - cxr * cyr
    q2 = crr * (cxx - cyy) - cxr * cxr + cyr * cyr
    # tan(2 phi) = 2 q1 / q2 has two roots a quarter turn apart; this one is the minimum.
    phi = 0.5 * math.atan2(2.0 * q1, q2)
    sp, cp = math.sin(phi), math.cos(phi)
    kappa = (sp * cxr - cp * cyr) / crr
    delta = -kappa * rr + sp * xm - cp * ym
    u = 1.0 - 4.0 * delta * kappa
    if u <= 0:
        return 0.0, 0.0, 0.0, False
    sq = math.sqrt(u)
    best_rho, best_phi, best_d = 2.0 * kappa / sq, phi, 2.0 * delta / (1.0 + sq)
    # Orient along the motion: the last point lies ahead of the closest approach.
    px, py = best_d * math.sin(best_phi), -best_d * math.cos(best_phi)
    ahead = (xs[n - 1] - px) * math.cos(best_phi) + (ys[n - 1] - py) * math.sin(best_phi)
    if ahead < 0:
        best_phi, best_rho, best_d = best_phi + math.pi, -best_rho, -best_d
    best_phi = math.atan2(math.sin(best_phi), math.cos(best_phi))
    return best_rho, best_phi, best_d, True


@njit
def line_fit(
    xs: np.ndarray, ys: np.ndarray, zs: np.ndarray, sz: np.ndarray, s_out: np.ndarray, n: int,
    rho: float, phi: float, d: float,
) -> tuple[float, float, bool]:
    """Fit ``z = z0 + t * s`` to the first ``n`` points (``sz``: z errors); fills ``s_out``."""
    x0, y0 = d * math.sin(phi), -d * math.cos(phi)
    sw = ss = sss = szz = ssz = 0.0
    for i in range(n):
        s = arc_length(rho, math.hypot(xs[i] - x0, ys[i] - y0))
        s_out[i] = s
        w = 1.0 / (sz[i] * sz[i])
        sw += w
        ss += w * s
        sss += w * s * s
        szz += w * zs[i]
        ssz += w * s * zs[i]
    det = sw * sss - ss * ss
    if det <= 0:
        return 0.0, 0.0, False
    t = (sw * ssz - ss * szz) / det
    return (szz - t * ss) / sw, t, True


@njit
def prediction_variances(
    s: np.ndarray, s_rphi: np.ndarray, s_z: np.ndarray, n: int, s_pred: float, beam_weight: float,
) -> tuple[float, float]:
    """Variances of the fitted track at path ``s_pred``: transverse and along z.

    The transverse error follows a parabola ``v = a + b s + c s^2`` fitted to
    the hits (and a beam-spot point at s = 0 with ``beam_weight``), the
    longitudinal one the straight line in (s, z): both depend only on where
    the hits are and how well they are measured, not on their values.
    """
    scale = 100.0  # cm: keeps the normal matrices well conditioned
    a00, a01, a02, a11, a12, a22 = beam_weight, 0.0, 0.0, 0.0, 0.0, 0.0
    b00 = b01 = b11 = 0.0
    for i in range(n):
        u = s[i] / scale
        u2 = u * u
        w = 1.0 / (s_rphi[i] * s_rphi[i])
        a00 += w
        a01 += w * u
        a02 += w * u2
        a11 += w * u2
        a12 += w * u2 * u
        a22 += w * u2 * u2
        wz = 1.0 / (s_z[i] * s_z[i])
        b00 += wz
        b01 += wz * u
        b11 += wz * u2
    u = s_pred / scale
    # f^T A^-1 f for f = (1, u, u^2), by cofactors of the symmetric matrix A
    c00 = a11 * a22 - a12 * a12
    c01 = a12 * a02 - a01 * a22
    c02 = a01 * a12 - a11 * a02
    c11 = a00 * a22 - a02 * a02
    c12 = a02 * a01 - a00 * a12
    c22 = a00 * a11 - a01 * a01
    det = a00 * c00 + a01 * c01 + a02 * c02
    if det <= 0:
        var_v = math.inf
    else:
        u2 = u * u
        q = c00 + u2 * c11 + u2 * u2 * c22 + 2.0 * (u * c01 + u2 * c02 + u2 * u * c12)
        var_v = max(q / det, 0.0)
    det = b00 * b11 - b01 * b01
    var_z = math.inf if det <= 0 else max((b11 - 2.0 * b01 * u + b00 * u * u) / det, 0.0)
    return var_v, var_z
