"""Fast simulation: tracker hits and calorimeter cells checked against the detector description."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest

from giod.errors import DataError
from giod.physics.detector import C_LIGHT, Detector
from giod.physics.generator import generate, particle_gun
from giod.physics.particles import PDG
from giod.physics.simulate import simulate


def _gun(rng: np.random.Generator, pdg: int, n: int, pt: float, eta_max: float) -> ak.Array:
    """n events of one particle from the origin, flat in eta and phi."""
    eta = rng.uniform(-eta_max, eta_max, n)
    phi = rng.uniform(-np.pi, np.pi, n)
    return particle_gun(np.full(n, pdg), pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta))


def _flat(array: ak.Array) -> np.ndarray:
    return ak.to_numpy(ak.flatten(array))


def test_barrel_hits_lie_on_their_layers(simulated: ak.Array, detector: Detector) -> None:
    hits = simulated.tracker_hits
    layer = _flat(hits.layer).astype(int)
    r = np.hypot(_flat(hits.x), _flat(hits.y))
    z = _flat(hits.z)
    n_barrel = len(detector.tracker.barrel)
    barrel = layer < n_barrel
    radius = np.array([lay.radius for lay in detector.tracker.barrel])
    half = np.array([lay.half_length for lay in detector.tracker.barrel])
    assert barrel.sum() > 1000
    assert np.all(np.abs(r[barrel] - radius[layer[barrel]]) < 1e-4)
    assert np.all(np.abs(z[barrel]) <= half[layer[barrel]] + 0.2)
    # Disks: on their plane, within their ring (allowing for the r smearing).
    disk = layer[~barrel] - n_barrel
    n_disks = len(detector.tracker.endcap)
    side = np.where(disk < n_disks, 1.0, -1.0)
    zd = np.array([d.z for d in detector.tracker.endcap])[disk % n_disks]
    assert np.allclose(z[~barrel], side * zd, atol=1e-4)
    r_min = np.array([d.r_min for d in detector.tracker.endcap])[disk % n_disks]
    r_max = np.array([d.r_max for d in detector.tracker.endcap])[disk % n_disks]
    assert np.all((r[~barrel] > r_min - 0.3) & (r[~barrel] < r_max + 0.3))
    codes = detector.tracker.layer_codes()
    assert np.array_equal(_flat(hits.subdetector), codes[layer])


def test_hit_resolution_matches_the_description(detector: Detector) -> None:
    """Pulls of hits from single tracks against the textbook helix from the origin (without
    material, which would bend the helix)."""
    rng = np.random.default_rng(1)
    n = 400
    detector = detector.with_material(0.0)
    events = simulate(_gun(rng, PDG.PI_PLUS, n, 3.0, 0.5), detector, seed=2)
    mc = events.mcparticles[:, 0]
    hits = events.tracker_hits[events.tracker_hits.particle == 0]
    per_hit = ak.broadcast_arrays(mc.px, hits.x)[0]
    px, py, pz = (_flat(ak.broadcast_arrays(mc[c], hits.x)[0]) for c in ("px", "py", "pz"))
    del per_hit
    layer = _flat(hits.layer).astype(int)
    barrel = layer < len(detector.tracker.barrel)
    radius = np.array([lay.radius for lay in detector.tracker.barrel])[layer[barrel]]
    pt = np.hypot(px, py)[barrel]
    kappa = C_LIGHT * detector.solenoid.field / pt  # positive charge
    half_angle = np.arcsin(kappa * radius / 2)
    phi_true = np.arctan2(py, px)[barrel] - half_angle
    z_true = (pz[barrel] / pt) * 2 * half_angle / kappa
    x, y, z = _flat(hits.x)[barrel], _flat(hits.y)[barrel], _flat(hits.z)[barrel]
    dphi = np.angle(np.exp(1j * (np.arctan2(y, x) - phi_true)))
    sig_rphi = np.array([lay.sigma_rphi for lay in detector.tracker.barrel])[layer[barrel]]
    sig_z = np.array([lay.sigma_z for lay in detector.tracker.barrel])[layer[barrel]]
    pull_rphi = radius * dphi / sig_rphi
    pull_z = (z - z_true) / sig_z
    assert len(pull_rphi) > 10 * n
    for pull in (pull_rphi, pull_z):
        assert abs(pull.mean()) < 0.1
        assert 0.9 < pull.std() < 1.1


def test_hits_per_track_follow_layers_and_efficiency(detector: Detector) -> None:
    rng = np.random.default_rng(3)
    n = 500
    events = simulate(_gun(rng, -PDG.PI_PLUS, n, 5.0, 0.8), detector, seed=4)
    own = ak.to_numpy(ak.sum(events.tracker_hits.particle == 0, axis=1))
    # |eta| < 0.8 from the origin crosses every barrel layer and no disk.
    efficiency = np.array([lay.efficiency for lay in detector.tracker.barrel])
    expected = efficiency.sum()
    sigma = np.sqrt((efficiency * (1 - efficiency)).sum() / n)
    assert abs(own.mean() - expected) < 5 * sigma + 1e-9
    assert own.max() <= len(efficiency)


def test_loopers_stop(detector: Detector) -> None:
    rng = np.random.default_rng(5)
    n = 200
    pt = 0.3
    events = simulate(_gun(rng, PDG.PI_PLUS, n, pt, 0.3), detector, seed=6)
    hits = events.tracker_hits[events.tracker_hits.particle == 0]
    diameter = 2 * pt / (C_LIGHT * detector.solenoid.field)
    r = np.hypot(_flat(hits.x), _flat(hits.y))
    assert len(r) > 0 and r.max() <= diameter
    reachable = sum(lay.radius < diameter for lay in detector.tracker.barrel)
    assert ak.max(ak.num(hits)) <= reachable
    assert ak.mean(ak.num(hits)) > 0.9 * reachable
    # A looper of 0.3 GeV never reaches the calorimeter.
    assert not ak.any(events.calo_cells.particle == 0)


def test_noise_hits_and_cells_without_particles(detector: Detector) -> None:
    n = 300
    rng = np.random.default_rng(7)
    events = simulate(_gun(rng, PDG.NU_MU, n, 50.0, 1.0), detector, seed=8)
    # Neutrinos leave nothing: every hit and cell is noise.
    assert ak.all(events.tracker_hits.particle == -1)
    assert ak.all(events.calo_cells.particle == -1)
    mean_noise = sum(lay.noise_hits for lay in detector.tracker.barrel)
    mean_noise += 2 * sum(d.noise_hits for d in detector.tracker.endcap)
    counts = ak.to_numpy(ak.num(events.tracker_hits))
    assert abs(counts.mean() - mean_noise) < 5 * np.sqrt(mean_noise / n)
    # Noise cells: each above its threshold, about as many as the Gaussian tail predicts.
    cells = events.calo_cells
    from math import erfc, sqrt

    expected = 0.0
    for cal in (detector.calorimeter.ecal, detector.calorimeter.hcal):
        for sec in (cal.barrel, cal.endcap):
            expected += 2 * sec.n_eta * sec.n_phi * 0.5 * erfc(sec.threshold / sec.noise / sqrt(2))
    n_cells = ak.to_numpy(ak.num(cells))
    assert abs(n_cells.mean() - expected) < 5 * np.sqrt(expected / n)


def test_photon_showers_contain_their_energy(detector: Detector) -> None:
    rng = np.random.default_rng(9)
    n, energy = 300, 50.0
    eta = rng.uniform(-1.2, 1.2, n)
    phi = rng.uniform(-np.pi, np.pi, n)
    pt = energy / np.cosh(eta)
    events = simulate(particle_gun(np.full(n, PDG.GAMMA), pt * np.cos(phi), pt * np.sin(phi),
                                   pt * np.sinh(eta)), detector, seed=10)
    cells = events.calo_cells
    own = cells[cells.particle == 0]
    assert ak.all(own.subdetector == 1)  # ECAL barrel only
    measured = ak.to_numpy(ak.sum(own.energy, axis=1)) / energy
    eb = detector.calorimeter.ecal.barrel
    noise = eb.noise * np.sqrt(ak.mean(ak.num(own))) / energy
    expected = np.sqrt(eb.stochastic**2 / energy + eb.constant**2 + noise**2)
    assert abs(measured.mean() - 1) < 0.01
    assert 0.5 * expected < measured.std() < 1.5 * expected
    # Each shower is centred on the photon: the hottest cell is within one cell of it.
    hottest = own[ak.argmax(own.energy, axis=1, keepdims=True)][:, 0]
    assert np.all(np.abs(ak.to_numpy(hottest.eta) - eta) < 0.0175 * 1.5)
    assert np.all(_flat(own.energy) > eb.threshold)


def test_hadrons_shower_mostly_in_the_hcal(detector: Detector) -> None:
    rng = np.random.default_rng(11)
    n, pt = 400, 50.0
    events = simulate(_gun(rng, PDG.PI_PLUS, n, pt, 1.0), detector, seed=12)
    cells = events.calo_cells[events.calo_cells.particle == 0]
    energy = ak.to_numpy(ak.flatten(events.mcparticles.e))
    total = ak.to_numpy(ak.sum(cells.energy, axis=1))
    hcal = ak.to_numpy(ak.sum(cells.energy[cells.subdetector >= 3], axis=1))
    response = detector.showers.hadron.response(energy)
    assert abs(np.mean(total / (energy * response)) - 1) < 0.05
    assert np.mean(hcal) > 0.6 * np.mean(total)
    # Far worse than an electromagnetic shower.
    assert np.std(total / energy) > 0.07


def test_muons_leave_mip_deposits(detector: Detector) -> None:
    rng = np.random.default_rng(13)
    events = simulate(_gun(rng, PDG.MUON, 300, 20.0, 1.0), detector, seed=14)
    cells = events.calo_cells[events.calo_cells.particle == 0]
    ecal = ak.to_numpy(ak.sum(cells.energy[cells.subdetector <= 2], axis=1))
    hcal = ak.to_numpy(ak.sum(cells.energy[cells.subdetector >= 3], axis=1))
    mip = detector.showers.mip
    assert abs(np.median(ecal[ecal > 0]) / mip.ecal - 1) < 0.35
    assert abs(np.median(hcal[hcal > 0]) / mip.hcal - 1) < 0.35
    # A muon of 20 GeV crosses every barrel layer too.
    assert ak.mean(ak.sum(events.tracker_hits.particle == 0, axis=1)) > 13


def test_relations_point_to_final_state_particles(simulated: ak.Array, detector: Detector) -> None:
    mc = simulated.mcparticles
    n_mc = ak.num(mc)
    for name in ("tracker_hits", "calo_cells"):
        target = simulated[name].particle
        assert ak.all((target >= -1) & (target < n_mc))
        valid = target[target >= 0]
        status = mc.status[valid]
        assert ak.all(status == 1)
        assert ak.count(valid) > 0.5 * ak.count(target)
    assert ak.all(mc.charge[simulated.tracker_hits.particle[simulated.tracker_hits.particle >= 0]] != 0)
    cells = simulated.calo_cells
    # One cell per (subdetector, ieta, iphi) and event.
    key = (ak.values_astype(cells.subdetector, np.int64) * 1000 + cells.ieta + 500) * 1000 + cells.iphi
    assert ak.all(ak.num(key) == ak.num(ak.run_lengths(ak.sort(key))))
    sections = ((1, "ecal", "barrel"), (2, "ecal", "endcap"), (3, "hcal", "barrel"), (4, "hcal", "endcap"))
    for code, cal, section in sections:
        calo = getattr(detector.calorimeter, cal)
        sel = cells[cells.subdetector == code]
        assert ak.all(sel.energy > getattr(calo, section).threshold)
        assert ak.all((sel.iphi >= 0) & (sel.iphi < calo.n_phi))
        assert ak.all((abs(sel.ieta) >= 1) & (abs(sel.ieta) <= calo.n_rings))
        assert ak.all(abs(sel.eta) < 3.0)


def test_calorimeter_sees_the_visible_energy(simulated: ak.Array) -> None:
    mc = simulated.mcparticles
    final = mc[mc.status == 1]
    pt = np.hypot(final.px, final.py)
    eta = np.arcsinh(final.pz / pt)
    apdg = abs(final.pdg)
    # Visible: in the calorimeter acceptance, not a neutrino, not a looper in the tracker.
    visible = (abs(eta) < 3.0) & (apdg != 12) & (apdg != 14) & (apdg != 16) & ((final.charge == 0) | (pt > 1.0))
    truth = ak.to_numpy(ak.sum(final.e[visible], axis=1))
    cells = simulated.calo_cells
    measured = ak.to_numpy(ak.sum(cells.energy[cells.particle >= 0], axis=1))
    ratio = measured / truth
    # Hadron non-compensation (response 0.7-0.9) brings the sum below one.
    assert 0.7 < ratio.mean() < 1.0
    assert ratio.std() < 0.15


def test_same_seed_same_output_other_seed_other_output(generated: ak.Array, simulated: ak.Array,
                                                       detector: Detector) -> None:
    again = simulate(generated, detector, seed=12)
    assert ak.array_equal(again, simulated, dtype_exact=True)
    other = simulate(generated, detector, seed=13)
    assert not ak.array_equal(other.calo_cells.energy, simulated.calo_cells.energy)


def test_pileup_events_simulate(detector: Detector) -> None:
    events = simulate(generate(10, seed=1, pthat_min=30.0, pileup=30.0), detector, seed=1)
    assert ak.all(ak.num(events.tracker_hits) > 500)
    assert len(simulate(generate(0, seed=1), detector, seed=1)) == 0


def test_events_without_truth_are_refused(detector: Detector) -> None:
    with pytest.raises(DataError, match="mcparticles"):
        simulate(ak.Array([{"run": 1}]), detector, seed=1)
    broken = ak.Array([{"mcparticles": [{"px": 1.0}]}])
    with pytest.raises(DataError, match="lacks the fields"):
        simulate(broken, detector, seed=1)
