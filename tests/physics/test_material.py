"""Material in the tracker: what the simulation does to particles, and what the fit makes of it."""

from __future__ import annotations

import math

import awkward as ak
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.physics import helix
from giod.physics.detector import C_LIGHT, Detector
from giod.physics.generator import particle_gun
from giod.physics.material import M_PION, X0_SILICON, highland, ionisation_loss
from giod.physics.material_fit import cholesky, material_fit
from giod.physics.particles import PDG
from giod.physics.sim_tracker import transport
from giod.physics.simulate import final_state, simulate
from giod.physics.tracking import find_tracks


def _gun(seed: int, pdg: int, n: int, pt: float, eta_max: float) -> ak.Array:
    rng = np.random.default_rng(seed)
    eta = rng.uniform(-eta_max, eta_max, n)
    phi = rng.uniform(-np.pi, np.pi, n)
    return particle_gun(np.full(n, pdg), pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta))


def test_textbook_values() -> None:
    # a minimum-ionising particle loses about 116 keV in 300 um of silicon (PDG: 388 eV/um mean)
    loss = ionisation_loss(0.5, M_PION, 0.03 / X0_SILICON)  # beta gamma = 3.6
    assert 0.105e-3 < loss < 0.125e-3
    # slower particles lose more (the 1/beta^2 rise)
    assert ionisation_loss(0.15, M_PION, 0.01) > 1.3 * ionisation_loss(0.5, M_PION, 0.01)
    # Highland: 1.1 mrad for a 1 GeV/c pion through 1 % of a radiation length
    assert highland(1.0, M_PION, 0.01) == pytest.approx(1.12e-3, rel=0.03)
    assert highland(1.0, M_PION, 0.0) == 0.0


def _tracker_material(detector: Detector) -> float:
    """Radiation lengths a particle crosses at eta = 0 (every layer and passive cylinder)."""
    return sum(layer.x0 for layer in detector.tracker.barrel) + sum(c.x0 for c in detector.tracker.material)


def test_energy_loss_slows_particles_by_the_material_they_cross(detector: Detector) -> None:
    n = 200
    guns = _gun(1, PDG.PI_PLUS, n, 2.0, 0.0)  # eta = 0: every barrel layer at normal incidence
    particles = final_state(guns)
    p_start = np.hypot(particles.px, particles.py)
    out = transport(particles, detector, np.random.default_rng(2))
    lost = p_start - out["p_end"]
    assert np.all(lost > 0)
    expected = ionisation_loss(2.0, M_PION, _tracker_material(detector))
    assert np.mean(lost) == pytest.approx(expected, rel=0.1)
    # without material nothing is lost, and the helix is not disturbed
    bare = transport(particles, detector.with_material(0.0), np.random.default_rng(2))
    assert np.array_equal(bare["p_end"], p_start)


def test_electrons_radiate(detector: Detector) -> None:
    n = 300
    particles = final_state(_gun(3, PDG.ELECTRON, n, 5.0, 0.0))
    out = transport(particles, detector, np.random.default_rng(4))
    kept = out["p_end"] / 5.0
    # Bethe-Heitler: the mean energy kept is exp(-X) for X radiation lengths
    assert np.mean(kept) == pytest.approx(math.exp(-_tracker_material(detector)), abs=0.05)
    pions = transport(final_state(_gun(3, PDG.PI_PLUS, n, 5.0, 0.0)), detector, np.random.default_rng(4))
    assert np.mean(pions["p_end"] / 5.0) > 0.99


def _fit_pions(detector: Detector, pt: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reconstructed pT, its error and the chi2/ndf of single pions at |eta| < 1."""
    hits = simulate(_gun(seed, PDG.PI_PLUS, n, pt, 1.0), detector, seed=seed + 1).tracker_hits
    offsets = np.concatenate([[0], np.cumsum(ak.to_numpy(ak.num(hits)))])
    x, y, z, layer = (ak.to_numpy(ak.flatten(hits[c])) for c in ("x", "y", "z", "layer"))
    _, params, _, _ = find_tracks(offsets, x, y, z, layer, detector)
    assert len(params["pt"]) > 0.95 * n
    return params["pt"], params["_pt_error"], params["chi2"] / params["ndf"]


def _width(values: np.ndarray) -> float:
    lo, hi = np.percentile(values, [16, 84])
    return 0.5 * (hi - lo)


def test_material_sets_the_low_pt_resolution(detector: Detector) -> None:
    """At 1 GeV multiple scattering dominates: sigma(pT)/pT grows as the square root of the material."""
    widths = {}
    for scale in (0.0, 1.0, 4.0):
        pt, _, _ = _fit_pions(detector.with_material(scale), 1.0, 300, seed=10)
        widths[scale] = _width(pt / 1.0 - 1.0)
    assert widths[0.0] < 0.3 * widths[1.0]
    assert 1.6 < widths[4.0] / widths[1.0] < 2.4
    assert 0.004 < widths[1.0] < 0.015  # CMS: 0.7-1 % at 1 GeV in the barrel


@pytest.mark.parametrize("pt", [1.0, 20.0])
def test_fit_pulls_and_chi2_have_unit_width(detector: Detector, pt: float) -> None:
    fitted, error, chi2_ndf = _fit_pions(detector, pt, 300, seed=20)
    pulls = (fitted - pt) / error
    assert 0.8 < _width(pulls) < 1.25
    assert abs(np.median(pulls)) < 0.25  # the energy loss is corrected: no shift to low pT
    assert 0.7 < np.median(chi2_ndf) < 1.3


# -- the compiled fit, on exact helices ------------------------------------------------------------

RADII = np.array([2.9, 6.8, 10.9, 16.0, 25.5, 33.9, 41.9, 49.8, 60.8, 69.2, 78.0, 86.8, 96.5, 108.0])
FIELD = 3.8


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_cholesky_factors_positive_definite_matrices(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, n))
    a = m @ m.T + n * np.eye(n)
    lower = a.copy()
    assert cholesky(lower, n)
    lower = np.tril(lower)
    assert np.allclose(lower @ lower.T, a, rtol=1e-10, atol=1e-10)
    assert not cholesky(-a.copy(), n)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([-1.0, 1.0]), st.floats(0.7, 500.0), st.floats(-math.pi, math.pi),
       st.floats(-0.05, 0.05), st.floats(-10.0, 10.0), st.floats(-1.0, 1.0), st.sampled_from([0.0, 0.03]))
def test_material_fit_keeps_an_exact_helix_and_adds_back_the_energy_loss(
        charge: float, pt: float, phi0: float, d0: float, z0: float, cot: float, x0: float) -> None:
    kappa = charge * C_LIGHT * FIELD / pt
    xc, yc = d0 * math.sin(phi0), -d0 * math.cos(phi0)
    n = len(RADII)
    s = helix.cylinder_crossing(np.full(n, xc), np.full(n, yc), np.full(n, phi0), np.full(n, kappa), RADII)
    s = s[np.isfinite(s) & (s < math.pi / abs(kappa))]
    x, y, _ = helix.position(xc, yc, phi0, kappa, s)
    n = len(s)
    z = z0 + cot * s
    passive = np.array([[2.2, 300.0, x0 / 10]])
    # start a little off: the fit has to move to the helix
    out = material_fit(x, y, z, s.copy(), np.full(n, 1e-3), np.full(n, 2e-3), np.full(n, x0), n, passive,
                       C_LIGHT * FIELD, kappa * 1.001, phi0 + 1e-4, d0 + 1e-4, z0 + 0.01, cot * 1.001)
    rho, phi, d, z0_fit, t, chi2, sigma_rho, ok = out
    assert ok
    assert chi2 < 1e-3
    assert abs(math.remainder(phi - phi0, 2 * math.pi)) < 1e-6
    assert d == pytest.approx(d0, abs=1e-6)
    assert z0_fit == pytest.approx(z0, abs=1e-5) and t == pytest.approx(cot, abs=1e-6)
    assert sigma_rho > 0
    assert math.copysign(1.0, rho) == charge
    if x0 == 0:
        assert rho == pytest.approx(kappa, rel=1e-6)
    else:  # the momentum at the origin is higher than the one the hits measure
        assert abs(rho) < abs(kappa)
        assert abs(rho) > 0.9 * abs(kappa)
