"""The track fit with material: a global least-squares fit with the scattering's correlations.

A track crossing material is deflected at every layer: the hits after a
scatterer move together, so their residuals from the ideal helix are
correlated. The fit here (compiled with numba) minimises ``r^T V^-1 r`` where
``V`` is the measurement variance plus, for each scatterer ``k`` (every hit's
own layer and the passive cylinders) before hits ``i`` and ``j``, the
Highland variance ``theta_k^2`` times the lever arms:

* transverse: ``V_ij += theta_k^2 (1 + t^2) (s_i - s_k)(s_j - s_k)``
  (a deflection across the track turns the azimuth by ``theta / sin(theta)``);
* along z: ``V_ij += theta_k^2 (1 + t^2)^2 (s_i - s_k)(s_j - s_k)``
  (it turns cot(theta) by ``theta / sin^2(theta)``),

with ``s`` the transverse path and ``t`` = cot(theta). This is the classic
"global fit with multiple-scattering covariance", equivalent for the helix
parameters to a Kalman filter with process noise at each layer followed by
its smoother, without the bookkeeping. The circle (curvature, azimuth,
impact parameter) is solved by Gauss-Newton from Karimäki's fit; the line
(z0, t) is linear. The covariance comes out of the same normal equations, so
the fit also returns the curvature's error.

Energy loss makes the curvature grow along the track; the fitted curvature
is an average over the lever arm, about the momentum at the middle hit. The
momentum at the origin is that plus the mean ionisation loss (pion mass) in
the material before the middle hit.
"""

from __future__ import annotations

import math

import numpy as np

from giod.physics.compiled import njit
from giod.physics.helix_fit import arc_length, signed_distance
from giod.physics.material import M_PION, highland, ionisation_loss

__all__ = ["cholesky", "material_fit"]


@njit
def cholesky(a, n):
    """Lower Cholesky factor of the first ``n`` x ``n`` block of ``a``, in place; False if not
    positive definite."""
    for j in range(n):
        d = a[j, j]
        for k in range(j):
            d -= a[j, k] * a[j, k]
        if d <= 0.0:
            return False
        d = math.sqrt(d)
        a[j, j] = d
        for i in range(j + 1, n):
            v = a[i, j]
            for k in range(j):
                v -= a[i, k] * a[j, k]
            a[i, j] = v / d
    return True


@njit
def _forward(lower, b, n):
    """Solve ``L y = b`` in place (``b``: first n rows, any number of columns)."""
    for c in range(b.shape[1]):
        for i in range(n):
            v = b[i, c]
            for k in range(i):
                v -= lower[i, k] * b[k, c]
            b[i, c] = v / lower[i, i]


@njit
def _scatterers(s_hit, x0_hit, n, passive, rho, t, s_last):
    """Path and thickness (radiation lengths along the path) of every scatterer before ``s_last``:
    the hits' own layers and the passive cylinders the track crosses."""
    m = n + passive.shape[0]
    sk = np.empty(m)
    xk = np.empty(m)
    k = 0
    for i in range(n):
        sk[k], xk[k] = s_hit[i], x0_hit[i]
        k += 1
    for c in range(passive.shape[0]):
        radius = passive[c, 0]
        if abs(0.5 * rho * radius) >= 1.0:
            continue
        s = arc_length(rho, radius)
        if s >= s_last or abs(t * s) > passive[c, 1]:
            continue
        cos_a = math.sqrt(max(1.0 - (0.5 * rho * radius) ** 2, 0.0025))
        sk[k], xk[k] = s, passive[c, 2] * math.sqrt(1.0 + t * t) / cos_a
        k += 1
    return sk[:k], xk[:k]


@njit
def ms_variances(s_hit, x0_hit, n, passive, rho, t, c_field, s_pred):
    """Extra variance of a prediction at path ``s_pred`` from the scattering before it:
    transverse and along z. Scatterers before the last hit count with the lever arm from the
    last hit on (the fit through the hits absorbs the rest), later ones with their own."""
    p = c_field / max(abs(rho), 1e-12) * math.sqrt(1.0 + t * t)
    s_last = 0.0
    for i in range(n):
        s_last = max(s_last, s_hit[i])
    sk, xk = _scatterers(s_hit, x0_hit, n, passive, rho, t, s_pred)
    var = 0.0
    for k in range(len(sk)):
        lever = s_pred - max(sk[k], s_last)
        if lever > 0:
            th = highland(p, M_PION, xk[k])
            var += th * th * lever * lever
    return var * (1.0 + t * t), var * (1.0 + t * t) ** 2


@njit
def material_fit(xs, ys, zs, s_hit, sig_t, sig_z, x0_hit, n, passive, c_field, rho, phi, d, z0, t):
    """Refit a helix to ``n`` hits with the scattering's correlations and the energy loss.

    ``sig_t`` are the hit errors across the track, ``sig_z`` along z, ``x0_hit`` the
    thickness in radiation lengths along the path of each hit's layer, ``s_hit`` the paths
    from the current helix ``(rho, phi, d, z0, t)``. Returns ``(rho, phi, d, z0, t, chi2,
    sigma_rho, ok)``; ``rho`` is corrected for the energy lost before the middle hit.
    """
    p = c_field / max(abs(rho), 1e-12) * math.sqrt(1.0 + t * t)
    s_last = 0.0
    for i in range(n):
        s_last = max(s_last, s_hit[i])
    sk, xk = _scatterers(s_hit, x0_hit, n, passive, rho, t, s_last)
    th2 = np.empty(len(sk))
    for k in range(len(sk)):
        th = highland(p, M_PION, xk[k])
        th2[k] = th * th
    ms = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1):
            v = 0.0
            for k in range(len(sk)):
                if sk[k] < s_hit[i] and sk[k] < s_hit[j]:
                    v += th2[k] * (s_hit[i] - sk[k]) * (s_hit[j] - sk[k])
            ms[i, j] = v
            ms[j, i] = v

    # transverse: Gauss-Newton on (rho, phi, d)
    lower = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            lower[i, j] = ms[i, j] * (1.0 + t * t)
        lower[i, i] += sig_t[i] * sig_t[i]
    if not cholesky(lower, n):
        return rho, phi, d, z0, t, math.inf, math.inf, False
    b = np.empty((n, 4))
    steps = (max(abs(rho) * 1e-4, 1e-9), 1e-6, 1e-5)
    chi2_t = 0.0
    cov00 = math.inf
    for _ in range(3):
        for i in range(n):
            r0 = signed_distance(xs[i], ys[i], rho, phi, d)
            b[i, 3] = r0
            b[i, 0] = (signed_distance(xs[i], ys[i], rho + steps[0], phi, d) - r0) / steps[0]
            b[i, 1] = (signed_distance(xs[i], ys[i], rho, phi + steps[1], d) - r0) / steps[1]
            b[i, 2] = (signed_distance(xs[i], ys[i], rho, phi, d + steps[2]) - r0) / steps[2]
        _forward(lower, b, n)
        a = np.zeros((3, 3))
        g = np.zeros(3)
        chi2_t = 0.0
        for i in range(n):
            for u in range(3):
                g[u] += b[i, u] * b[i, 3]
                for v in range(3):
                    a[u, v] += b[i, u] * b[i, v]
            chi2_t += b[i, 3] * b[i, 3]
        inv = _inverse3(a)
        if inv[0, 0] <= 0 or not math.isfinite(inv[0, 0]):
            return rho, phi, d, z0, t, math.inf, math.inf, False
        cov00 = inv[0, 0]
        rho -= inv[0, 0] * g[0] + inv[0, 1] * g[1] + inv[0, 2] * g[2]
        phi -= inv[1, 0] * g[0] + inv[1, 1] * g[1] + inv[1, 2] * g[2]
        d -= inv[2, 0] * g[0] + inv[2, 1] * g[1] + inv[2, 2] * g[2]
    chi2_t = 0.0
    for i in range(n):
        b[i, 3] = signed_distance(xs[i], ys[i], rho, phi, d)
    _forward(lower, b[:, 3:4], n)
    for i in range(n):
        chi2_t += b[i, 3] * b[i, 3]

    # along z: linear in (z0, t); the paths follow the refitted circle
    x_c, y_c = d * math.sin(phi), -d * math.cos(phi)
    for i in range(n):
        s_hit[i] = arc_length(rho, math.hypot(xs[i] - x_c, ys[i] - y_c))
    for i in range(n):
        for j in range(n):
            lower[i, j] = ms[i, j] * (1.0 + t * t) ** 2
        lower[i, i] += sig_z[i] * sig_z[i]
    if not cholesky(lower, n):
        return rho, phi, d, z0, t, math.inf, math.inf, False
    for i in range(n):
        b[i, 0], b[i, 1], b[i, 2] = 1.0, s_hit[i], zs[i]
    _forward(lower, b, n)
    a00 = a01 = a11 = g0 = g1 = 0.0
    for i in range(n):
        a00 += b[i, 0] * b[i, 0]
        a01 += b[i, 0] * b[i, 1]
        a11 += b[i, 1] * b[i, 1]
        g0 += b[i, 0] * b[i, 2]
        g1 += b[i, 1] * b[i, 2]
    det = a00 * a11 - a01 * a01
    if det <= 0:
        return rho, phi, d, z0, t, math.inf, math.inf, False
    z0 = (a11 * g0 - a01 * g1) / det
    t = (a00 * g1 - a01 * g0) / det
    chi2_z = 0.0
    for i in range(n):
        e = b[i, 2] - z0 * b[i, 0] - t * b[i, 1]
        chi2_z += e * e

    # energy loss before the middle hit: the fitted momentum is about the one there
    order = np.argsort(s_hit[:n])
    s_mid = s_hit[order[n // 2]]
    p_fit = c_field / max(abs(rho), 1e-12) * math.sqrt(1.0 + t * t)
    loss = 0.0
    for k in range(len(sk)):
        if sk[k] < s_mid:
            loss += ionisation_loss(p_fit, M_PION, xk[k])
    scale = p_fit / (p_fit + loss)
    return rho * scale, phi, d, z0, t, chi2_t + chi2_z, math.sqrt(cov00) * scale, True


@njit
def _inverse3(a):
    out = np.empty((3, 3))
    c00 = a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1]
    c01 = a[1, 2] * a[2, 0] - a[1, 0] * a[2, 2]
    c02 = a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]
    det = a[0, 0] * c00 + a[0, 1] * c01 + a[0, 2] * c02
    if det == 0.0 or not math.isfinite(det):
        out[:, :] = math.nan
        return out
    out[0, 0] = c00 / det
    out[1, 0] = c01 / det
    out[2, 0] = c02 / det
    out[0, 1] = (a[0, 2] * a[2, 1] - a[0, 1] * a[2, 2]) / det
    out[1, 1] = (a[0, 0] * a[2, 2] - a[0, 2] * a[2, 0]) / det
    out[2, 1] = (a[0, 1] * a[2, 0] - a[0, 0] * a[2, 1]) / det
    out[0, 2] = (a[0, 1] * a[1, 2] - a[0, 2] * a[1, 1]) / det
    out[1, 2] = (a[0, 2] * a[1, 0] - a[0, 0] * a[1, 2]) / det
    out[2, 2] = (a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0]) / det
    return out
