"""Helices in a solenoid field along +z, and their crossings with detector surfaces.

A particle of charge q and transverse momentum pt, produced at (x0, y0, z0)
with azimuth phi0, moves on a helix of signed curvature
``kappa = q * C_LIGHT * B / pt`` (1/cm). With ``s`` the transverse path
length, the azimuth of the momentum is ``phi0 - kappa * s`` (a positive
charge turns clockwise seen from +z) and, with ``t = kappa * s / 2``::

    x(s) = x0 + (2 / kappa) sin(t) cos(phi0 - t)
    y(s) = y0 + (2 / kappa) sin(t) sin(phi0 - t)
    z(s) = z0 + s * pz / pt

Crossing a cylinder of radius R has a closed form: writing
``a = x0 cos(phi0) + y0 sin(phi0)`` and ``b = x0 sin(phi0) - y0 cos(phi0)``,
``|P(s)|^2 = R^2`` becomes ``M cos(2t + chi) = M - M * eps`` with
``m = 1 + kappa b``, ``n = kappa a``, ``M = hypot(m, n)``, ``chi = atan2(n, m)``
and ``eps = (n^2 / (M + m) + kappa^2 (R^2 - r0^2) / 2) / M``, computed
without cancellation, so that the same formula holds from loopers down to
straight lines (neutral particles use a vanishing curvature). All functions
work on numpy arrays of many particles at once.
"""

from __future__ import annotations

import numpy as np

from giod.physics.detector import C_LIGHT

__all__ = ["curvature", "cylinder_crossing", "plane_crossing", "position"]

#: Curvature given to neutral particles: straight to far better than a micron.
STRAIGHT = 1e-12


def curvature(charge: np.ndarray, pt: np.ndarray, field: float) -> np.ndarray:
    """Signed curvature (1/cm); neutral particles get a vanishing positive one."""
    kappa = charge * (C_LIGHT * field) / np.maximum(pt, 1e-9)
    return np.where(charge == 0, STRAIGHT, kappa)


def position(
    x0: np.ndarray, y0: np.ndarray, phi0: np.ndarray, kappa: np.ndarray, s: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Transverse position (x, y) after path ``s``, and the momentum azimuth there."""
    t = 0.5 * kappa * s
    chord = s * np.sinc(t / np.pi)  # (2 / kappa) sin(t), exact as kappa -> 0
    direction = phi0 - t
    return x0 + chord * np.cos(direction), y0 + chord * np.sin(direction), phi0 - 2 * t


def cylinder_crossing(
    x0: np.ndarray, y0: np.ndarray, phi0: np.ndarray, kappa: np.ndarray, radius: np.ndarray | float
) -> np.ndarray:
    """Transverse path from a vertex inside the cylinder ``r = radius`` to it; NaN if never.

    From inside, ``2t + chi`` starts between the roots ``-alpha`` and ``+alpha``
    and moves with the sign of kappa, so the first crossing is
    ``2t = sign(kappa) * alpha - chi``. A vertex on or outside the cylinder gives NaN.
    """
    cos0, sin0 = np.cos(phi0), np.sin(phi0)
    a = x0 * cos0 + y0 * sin0
    b = x0 * sin0 - y0 * cos0
    m = 1.0 + kappa * b
    n = kappa * a
    big_m = np.hypot(m, n)
    excess = np.where(m > 0, n * n / (big_m + np.abs(m)), big_m - m)
    chi_over_kappa = np.arctan2(n, m) / kappa
    inv_abs_kappa = 1.0 / np.abs(kappa)
    depth = radius**2 - (x0**2 + y0**2)
    eps = (excess + (0.5 * kappa**2) * depth) / big_m
    with np.errstate(invalid="ignore"):
        alpha = 2.0 * np.arcsin(np.sqrt(0.5 * eps))  # arccos(1 - eps) without cancellation
        s = alpha * inv_abs_kappa - chi_over_kappa
        return np.where((depth > 0) & (eps <= 2), s, np.nan)


def plane_crossing(z0: np.ndarray, pz_over_pt: np.ndarray, z_plane: np.ndarray | float) -> np.ndarray:
    """Transverse path to the plane ``z = z_plane``; NaN if moving away from it."""
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (z_plane - z0) / pz_over_pt
    return np.where(s > 0, s, np.nan)
