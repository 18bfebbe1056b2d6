"""Closed-form helix crossings, checked against their definition."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.physics.helix import STRAIGHT, curvature, cylinder_crossing, plane_crossing, position

FIELD = 3.8

tracks = st.fixed_dictionaries(
    {
        "x0": st.floats(-3, 3),
        "y0": st.floats(-3, 3),
        "phi0": st.floats(-np.pi, np.pi),
        "charge": st.sampled_from([-1.0, 0.0, 1.0]),
        "pt": st.floats(0.1, 5000),
        "radius": st.floats(5, 150),
    }
)


@settings(max_examples=300, deadline=None)
@given(tracks)
def test_crossing_is_on_the_cylinder_and_is_the_first(t: dict[str, float]) -> None:
    kappa = curvature(np.array([t["charge"]]), np.array([t["pt"]]), FIELD)
    args = (np.array([t["x0"]]), np.array([t["y0"]]), np.array([t["phi0"]]), kappa)
    s = cylinder_crossing(*args, np.float64(t["radius"]))[0]
    if np.isnan(s):
        # Never reached: the whole circle stays inside the cylinder.
        assert t["charge"] != 0
        path = np.linspace(0, 2 * np.pi / abs(kappa[0]), 2000)
        x, y, _ = position(*[np.repeat(a, len(path)) for a in args], path)
        assert np.hypot(x, y).max() <= t["radius"] * (1 + 1e-9)
        return
    x, y, _ = position(*args, np.array([s]))
    assert abs(np.hypot(x[0], y[0]) - t["radius"]) < 1e-7 * t["radius"]
    before = np.linspace(0, s, 400)[:-1]
    x, y, _ = position(*[np.repeat(a, len(before)) for a in args], before)
    assert np.all(np.hypot(x, y) < t["radius"] * (1 + 1e-9))


@settings(max_examples=200, deadline=None)
@given(st.floats(0.2, 3000), st.sampled_from([-1.0, 1.0]), st.floats(1, 130))
def test_from_the_origin_matches_the_textbook_formula(pt: float, charge: float, radius: float) -> None:
    kappa = curvature(np.array([charge]), np.array([pt]), FIELD)
    s = cylinder_crossing(np.zeros(1), np.zeros(1), np.zeros(1), kappa, np.float64(radius))[0]
    half = abs(kappa[0]) * radius / 2
    if half > 1:
        assert np.isnan(s)
    else:
        assert np.isclose(s, 2 / abs(kappa[0]) * np.arcsin(half), rtol=1e-9, atol=0)
        _, _, phi = position(np.zeros(1), np.zeros(1), np.zeros(1), kappa, np.array([s]))
        # The momentum turns by twice the chord's angle: clockwise for a positive charge.
        assert np.isclose(phi[0], -2 * np.sign(charge) * np.arcsin(half), rtol=1e-9, atol=1e-12)


def test_neutral_particles_fly_straight() -> None:
    kappa = curvature(np.zeros(3), np.ones(3), FIELD)
    assert np.all(kappa == STRAIGHT)
    x0, y0 = np.array([0.5, -1.0, 0.0]), np.array([0.2, 0.3, -2.0])
    phi0 = np.array([0.1, 2.0, -2.5])
    s = cylinder_crossing(x0, y0, phi0, kappa, np.float64(50.0))
    ux, uy = np.cos(phi0), np.sin(phi0)
    b = x0 * ux + y0 * uy
    exact = -b + np.sqrt(b**2 - (x0**2 + y0**2 - 50.0**2))
    assert np.allclose(s, exact, rtol=1e-9)


def test_a_vertex_outside_the_cylinder_never_crosses_it() -> None:
    kappa = curvature(np.array([1.0]), np.array([10.0]), FIELD)
    assert np.isnan(cylinder_crossing(np.array([20.0]), np.zeros(1), np.zeros(1), kappa, np.float64(10.0))[0])


def test_plane_crossing_only_ahead() -> None:
    s = plane_crossing(np.array([1.0, 1.0]), np.array([2.0, -2.0]), np.array([11.0, 11.0]))
    assert s[0] == 5.0 and np.isnan(s[1])
