"""Reconstruction: layout, relations and tags of the output, and single-particle checks."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest
import vector

from giod.errors import DataError
from giod.physics.calibration import Calibration
from giod.physics.detector import C_LIGHT, Detector
from giod.physics.generator import particle_gun
from giod.physics.layout import collection_fields, tag_dtypes
from giod.physics.particles import PDG
from giod.physics.reconstruct import TAG_JET_ETA, TAG_JET_PT, reconstruct
from giod.physics.simulate import simulate

vector.register_awkward()


@pytest.fixture(scope="module")
def reco(simulated: ak.Array, detector: Detector) -> ak.Array:
    return reconstruct(simulated, detector)


def _flat(array: ak.Array) -> np.ndarray:
    return ak.to_numpy(ak.flatten(array, axis=None))


def _take(target: ak.Array, index: ak.Array) -> ak.Array:
    """``target[event][index[event][owner][k]]``, keeping the owner level."""
    flat = target[ak.flatten(index, axis=2)]
    return ak.unflatten(flat, ak.flatten(ak.num(index, axis=2)), axis=1)


def _gun(seed: int, pdg: int, n: int, pt: np.ndarray, eta_max: float, z_sigma: float = 0.0) -> ak.Array:
    rng = np.random.default_rng(seed)
    eta = rng.uniform(-eta_max, eta_max, n)
    phi = rng.uniform(-np.pi, np.pi, n)
    vertex = np.column_stack([np.zeros(n), np.zeros(n), rng.normal(0.0, z_sigma, n)])
    return particle_gun(np.full(n, pdg), pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta), vertex=vertex)


def test_output_follows_the_model(reco: ak.Array, simulated: ak.Array) -> None:
    assert len(reco) == len(simulated)
    assert set(ak.fields(reco)) == {"tracks", "clusters", "jets", *tag_dtypes()}
    for collection in ("tracks", "clusters", "jets"):
        fields = collection_fields(collection)
        assert ak.fields(reco[collection]) == list(fields)
        for name, dtype in fields.items():
            if dtype is not None:
                assert _flat(reco[collection][name]).dtype == dtype, (collection, name)
    for name, dtype in tag_dtypes().items():
        assert ak.to_numpy(reco[name]).dtype == dtype, name
    assert np.array_equal(ak.to_numpy(reco.event), ak.to_numpy(simulated.event))
    assert np.array_equal(ak.to_numpy(reco.run), ak.to_numpy(simulated.run))


def test_relations_point_inside_their_event_and_are_not_shared(reco: ak.Array, simulated: ak.Array) -> None:
    for owner, relation, target, events in (
        ("tracks", "hits", "tracker_hits", simulated),
        ("clusters", "cells", "calo_cells", simulated),
        ("jets", "tracks", "tracks", reco),
        ("jets", "clusters", "clusters", reco),
    ):
        index = reco[owner][relation]
        n_target = ak.num(events[target], axis=1)
        per_event = ak.flatten(index, axis=2)
        assert ak.all(per_event >= 0) and ak.all(per_event < n_target), (owner, relation)
        # No object belongs to two owners: hits, cells, clusters and tracks are used once.
        counts = ak.num(per_event, axis=1)
        unique = ak.Array([len(np.unique(row)) for row in ak.to_list(per_event[:20])])
        assert ak.all(unique == counts[:20]), (owner, relation)
    assert ak.all(ak.num(reco.tracks.hits, axis=2) >= 7)


def test_collections_are_ordered_and_tags_agree(reco: ak.Array) -> None:
    for collection, field in (("tracks", "pt"), ("clusters", "energy"), ("jets", "pt")):
        values = reco[collection][field]
        assert ak.all(values[:, 1:] <= values[:, :-1]), collection
    jets = reco.jets
    good = jets[(jets.pt > TAG_JET_PT) & (abs(jets.eta) < TAG_JET_ETA)]
    assert np.array_equal(ak.to_numpy(reco.njets), ak.to_numpy(ak.num(good)))
    assert np.allclose(ak.to_numpy(reco.ht), ak.to_numpy(ak.sum(good.pt, axis=1)), rtol=1e-5)
    assert np.array_equal(ak.to_numpy(reco.ntracks), ak.to_numpy(ak.num(reco.tracks)))
    assert np.array_equal(ak.to_numpy(reco.nclusters), ak.to_numpy(ak.num(reco.clusters)))
    two = reco[ak.num(jets) >= 2]
    assert len(two) > 50
    p4 = ak.zip({f: two.jets[f] for f in ("pt", "eta", "phi", "mass")}, with_name="Momentum4D")
    mjj = ak.to_numpy((p4[:, 0] + p4[:, 1]).mass)
    assert np.allclose(ak.to_numpy(two.mjj), mjj, rtol=1e-4, atol=1e-3)
    assert np.allclose(ak.to_numpy(two.lead_jet_pt), ak.to_numpy(two.jets.pt[:, 0]))
    assert np.allclose(ak.to_numpy(two.dijet_deta), np.abs(ak.to_numpy(two.jets.eta[:, 0] - two.jets.eta[:, 1])),
                       atol=1e-6)
    none = reco[ak.num(jets) == 0]
    assert np.all(ak.to_numpy(none.lead_jet_pt) == 0) and np.all(ak.to_numpy(none.mjj) == 0)


def test_cluster_sums_match_their_cells(reco: ak.Array, simulated: ak.Array) -> None:
    cells = simulated.calo_cells
    summed = ak.sum(_take(cells.energy, reco.clusters.cells), axis=2)
    assert np.allclose(_flat(summed), _flat(reco.clusters.raw_energy), rtol=1e-5)
    ecal = reco.clusters.calorimeter == 1
    cell_ecal = ak.all(_take(cells.subdetector, reco.clusters.cells) <= 2, axis=2)
    assert ak.all(ecal == cell_ecal)


def test_jet_constituents_rebuild_the_jet(reco: ak.Array) -> None:
    """The raw jet momentum is the sum of its clusters; charged tracks point into the jet."""
    clusters = _take(reco.clusters, reco.jets.clusters)
    pt = clusters.energy / np.cosh(clusters.eta)
    px = ak.sum(pt * np.cos(clusters.phi), axis=2)
    py = ak.sum(pt * np.sin(clusters.phi), axis=2)
    assert np.allclose(_flat(np.hypot(px, py)), _flat(reco.jets.raw_pt), rtol=1e-4)
    tracks = _take(reco.tracks, reco.jets.tracks)
    dphi = (tracks.phi - reco.jets.phi + np.pi) % (2 * np.pi) - np.pi
    dr = np.sqrt((tracks.eta - reco.jets.eta) ** 2 + dphi**2)
    assert ak.mean(dr < 0.6) > 0.95  # ghosts at the vertex; the jet axis is at the calorimeter
    assert ak.mean(ak.num(reco.jets.tracks, axis=2)[:, :1]) > 3
    frac = _flat(reco.jets.charged_fraction)
    assert 0.4 < np.median(frac) < 0.9


def test_single_tracks_are_measured(detector: Detector) -> None:
    """Charged pions of known momentum from vertices spread along z: pt, charge, angles, z0.

    Without material (the fit's precision alone), up to 20 GeV the pT error
    stays below a percent or two even in the forward region, where the lever
    arm is shortest. ``tests/physics/test_material.py`` checks what material adds.
    """
    detector = detector.with_material(0.0)
    n = 200
    pt = np.exp(np.random.default_rng(3).uniform(np.log(1.0), np.log(20.0), n))
    pions = _gun(4, PDG.PI_PLUS, n // 2, pt[: n // 2], 2.3, z_sigma=5.0)
    antipions = _gun(5, -PDG.PI_PLUS, n // 2, pt[n // 2:], 2.3, z_sigma=5.0)
    events = simulate(ak.concatenate([pions, antipions]), detector, seed=6)
    out = reconstruct(events, detector)
    assert ak.mean(ak.num(out.tracks) == 1) > 0.97
    one = ak.num(out.tracks) == 1
    trk, mc = out.tracks[one][:, 0], events.mcparticles[one][:, 0]
    true_pt = np.hypot(ak.to_numpy(mc.px), ak.to_numpy(mc.py))
    assert np.all(np.sign(ak.to_numpy(trk.charge)) == np.sign(ak.to_numpy(mc.charge)))
    error = np.abs(ak.to_numpy(trk.pt) / true_pt - 1)
    assert np.median(error) < 0.002
    assert np.percentile(error, 95) < 0.02
    true_phi = np.arctan2(ak.to_numpy(mc.py), ak.to_numpy(mc.px))
    assert np.all(np.abs(np.angle(np.exp(1j * (ak.to_numpy(trk.phi) - true_phi)))) < 2e-3)
    true_eta = np.arcsinh(ak.to_numpy(mc.pz) / true_pt)
    assert np.all(np.abs(ak.to_numpy(trk.eta) - true_eta) < 2e-3)
    assert np.all(np.abs(ak.to_numpy(trk.z0) - ak.to_numpy(mc.vz)) < 0.02)
    assert np.all(np.abs(ak.to_numpy(trk.d0)) < 0.01)
    chi2_ndf = ak.to_numpy(trk.chi2 / trk.ndf)
    assert 0.3 < np.median(chi2_ndf) < 3.0


def test_the_curvature_sets_the_pt(detector: Detector) -> None:
    """A low-pT pion curls: its measured radius of curvature gives pt = 0.3 B R (no material)."""
    detector = detector.with_material(0.0)
    events = simulate(_gun(7, PDG.PI_PLUS, 50, np.full(50, 0.8), 1.0), detector, seed=8)
    out = reconstruct(events, detector)
    pts = _flat(out.tracks.pt)
    assert len(pts) >= 48
    assert np.allclose(pts, 0.8, rtol=5e-3)
    radius = pts / (C_LIGHT * detector.solenoid.field)
    assert np.allclose(radius, 0.8 / (C_LIGHT * 3.8), rtol=5e-3)


def test_photons_make_one_calibrated_cluster(detector: Detector) -> None:
    n = 100
    events = simulate(_gun(9, PDG.GAMMA, n, np.full(n, 40.0), 1.2), detector, seed=10)
    out = reconstruct(events, detector)
    lead = out.clusters[:, 0]
    energy = ak.to_numpy(events.mcparticles.e[:, 0])
    assert np.all(ak.to_numpy(lead.calorimeter) == 1)
    assert np.abs(np.median(ak.to_numpy(lead.energy) / energy) - 1) < 0.03
    mc = events.mcparticles[:, 0]
    true_eta = np.arcsinh(ak.to_numpy(mc.pz) / np.hypot(ak.to_numpy(mc.px), ak.to_numpy(mc.py)))
    assert np.percentile(np.abs(ak.to_numpy(lead.eta) - true_eta), 90) < 0.01
    assert np.all(ak.to_numpy(lead.eta_width) < 0.03)
    assert ak.all(ak.num(out.tracks) == 0)  # neutral: no track


def test_hcal_clusters_get_the_hadronic_scale(simulated: ak.Array, detector: Detector) -> None:
    calibrated = reconstruct(simulated[:20], detector, calibration=Calibration(hcal_scale=1.5))
    plain = reconstruct(simulated[:20], detector, calibration=Calibration.identity())
    e_cal, e_raw = _flat(calibrated.clusters.energy), _flat(calibrated.clusters.raw_energy)
    hcal = _flat(calibrated.clusters.calorimeter) == 2
    assert hcal.any() and (~hcal).any()
    assert np.allclose(e_cal[hcal], 1.5 * e_raw[hcal], rtol=1e-5)
    assert np.allclose(e_cal[~hcal], e_raw[~hcal])
    assert np.allclose(_flat(plain.jets.pt), _flat(plain.jets.raw_pt))


def test_noise_alone_makes_no_track(detector: Detector) -> None:
    """Neutrinos leave nothing: the tracker holds only noise hits, and no track is found."""
    events = simulate(particle_gun(np.full(100, 12), np.ones(100), np.zeros(100), np.zeros(100)), detector, seed=11)
    assert ak.sum(ak.num(events.tracker_hits)) > 3000
    out = reconstruct(events, detector)
    assert ak.sum(out.ntracks) == 0
    assert ak.sum(out.njets) == 0


def test_same_input_same_output(simulated: ak.Array, reco: ak.Array, detector: Detector) -> None:
    again = reconstruct(simulated, detector)
    assert ak.array_equal(again, reco, dtype_exact=True)
    # and events reconstructed alone get what they got in the batch
    single = reconstruct(simulated[7:8], detector)
    assert ak.array_equal(single, reco[7:8], dtype_exact=True)


def test_empty_input(detector: Detector, simulated: ak.Array) -> None:
    out = reconstruct(simulated[:0], detector)
    assert len(out) == 0 and "jets" in ak.fields(out)


@pytest.mark.parametrize(("drop", "message"), [
    ("tracker_hits", "'tracker_hits' collection"),
    ("calo_cells", "'calo_cells' collection"),
])
def test_missing_raw_collections_are_refused(simulated: ak.Array, drop: str, message: str) -> None:
    keep = [f for f in ak.fields(simulated) if f != drop]
    with pytest.raises(DataError, match=message):
        reconstruct(simulated[keep][:2])


def test_missing_raw_fields_are_refused(simulated: ak.Array) -> None:
    hits = simulated.tracker_hits[["x", "y", "z"]]
    events = ak.zip({"tracker_hits": hits, "calo_cells": simulated.calo_cells}, depth_limit=1)
    with pytest.raises(DataError, match="tracker_hits lacks the fields layer"):
        reconstruct(events[:2])
