"""The compiled helix geometry and fits agree with the simulation's helix model."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.physics import helix
from giod.physics.detector import C_LIGHT
from giod.physics.helix_fit import (
    arc_length,
    circle_fit,
    cylinder_path,
    line_fit,
    position,
    prediction_variances,
    signed_distance,
)

FIELD = 3.8
RADII = np.array([2.9, 6.8, 10.9, 16.0, 25.5, 33.9, 41.9, 49.8, 60.8, 69.2, 78.0, 86.8, 96.5, 108.0])

helices = st.tuples(
    st.sampled_from([-1.0, 1.0]),  # charge
    st.floats(0.6, 2000.0),  # pt, GeV
    st.floats(-math.pi, math.pi),  # phi0
    st.floats(-0.05, 0.05),  # d0, cm
    st.floats(-15.0, 15.0),  # z0, cm
    st.floats(-3.0, 3.0),  # cot(theta)
)


def _points(charge: float, pt: float, phi0: float, d0: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Exact crossings of the barrel radii by a helix given at its point of closest approach."""
    kappa = charge * C_LIGHT * FIELD / pt
    x0, y0 = d0 * math.sin(phi0), -d0 * math.cos(phi0)
    n = len(RADII)
    s = helix.cylinder_crossing(np.full(n, x0), np.full(n, y0), np.full(n, phi0), np.full(n, kappa), RADII)
    s = s[np.isfinite(s) & (s < math.pi / abs(kappa))]
    x, y, _ = helix.position(x0, y0, phi0, kappa, s)
    return x, y, s, kappa


@settings(max_examples=200, deadline=None)
@given(helices)
def test_circle_and_line_fit_recover_exact_helices(h: tuple[float, ...]) -> None:
    charge, pt, phi0, d0, z0, cot = h
    x, y, s, kappa = _points(charge, pt, phi0, d0)
    n = len(x)
    assert n >= 3  # pt >= 0.6 GeV reaches at least the pixels
    rho, phi, d, ok = circle_fit(x, y, np.ones(n), n)
    assert ok
    assert math.isclose(rho, kappa, rel_tol=1e-6, abs_tol=1e-9)
    assert abs(math.remainder(phi - phi0, 2 * math.pi)) < 1e-6
    assert math.isclose(d, d0, abs_tol=1e-7)
    z = z0 + cot * s
    s_out = np.zeros(n)
    fz0, t, ok = line_fit(x, y, z, np.full(n, 0.01), s_out, n, rho, phi, d)
    assert ok
    assert math.isclose(fz0, z0, abs_tol=1e-5) and math.isclose(t, cot, abs_tol=1e-6)
    assert np.allclose(s_out, s, rtol=1e-6, atol=1e-6)
    for xi, yi in zip(x, y, strict=True):
        assert abs(signed_distance(xi, yi, rho, phi, d)) < 1e-7


@settings(max_examples=200, deadline=None)
@given(helices, st.floats(3.0, 100.0))
def test_scalar_geometry_matches_the_simulation(h: tuple[float, ...], radius: float) -> None:
    charge, pt, phi0, d0, _, _ = h
    kappa = charge * C_LIGHT * FIELD / pt
    x0, y0 = d0 * math.sin(phi0), -d0 * math.cos(phi0)
    expected = helix.cylinder_crossing(np.array([x0]), np.array([y0]), np.array([phi0]), np.array([kappa]),
                                       radius)[0]
    got = cylinder_path(x0, y0, phi0, kappa, radius)
    assert (math.isnan(got) and math.isnan(expected)) or math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-9)
    if not math.isnan(got):
        px, py = position(x0, y0, phi0, kappa, got)
        assert math.isclose(math.hypot(px, py), radius, rel_tol=1e-9)
        ex, ey, _ = helix.position(x0, y0, phi0, kappa, got)
        assert math.isclose(px, ex, abs_tol=1e-9) and math.isclose(py, ey, abs_tol=1e-9)
        assert math.isclose(arc_length(kappa, math.hypot(px - x0, py - y0)), got, rel_tol=1e-7, abs_tol=1e-7)


@given(st.floats(1e-4, 0.5), st.floats(0.1, 200.0))
def test_arc_length_is_at_least_the_chord(kappa: float, chord: float) -> None:
    if kappa * chord < 2:
        assert arc_length(kappa, chord) >= chord * (1 - 1e-12)
        assert math.isclose(arc_length(-kappa, chord), arc_length(kappa, chord))


def test_fits_on_noisy_hits_have_the_expected_pulls() -> None:
    """With Gaussian hit errors, the fitted curvature scatters as the hits allow, without bias."""
    rng = np.random.default_rng(1)
    sigma = 0.002
    pulls = []
    for _ in range(300):
        x, y, s, kappa = _points(1.0, 20.0, rng.uniform(-math.pi, math.pi), 0.0)
        n = len(x)
        r = np.hypot(x, y)
        phi = np.arctan2(y, x) + rng.normal(0, sigma, n) / r
        rho, _, _, ok = circle_fit(r * np.cos(phi), r * np.sin(phi), np.full(n, 1 / sigma**2), n)
        assert ok
        pulls.append(rho - kappa)
    pulls = np.asarray(pulls)
    assert abs(np.mean(pulls)) < 3 * np.std(pulls) / math.sqrt(len(pulls))
    # extrapolation errors: fixed by where the hits are, growing away from them
    s = np.array([2.9, 6.8, 10.9, 16.0])
    near, _ = prediction_variances(s, np.full(4, sigma), np.full(4, 0.002), 4, 16.0, 0.0)
    far, _ = prediction_variances(s, np.full(4, sigma), np.full(4, 0.002), 4, 100.0, 0.0)
    assert near < sigma**2 < far
