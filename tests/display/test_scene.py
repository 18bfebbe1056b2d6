"""The scene and the Phoenix export, computed from stored events (no server, no browser)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import giod
from giod.display import event_scene, find_roles, load_event, phoenix_event
from giod.display.scene import helix_points
from giod.errors import DataError, NotFound
from giod.physics.detector import Detector
from giod.store.snapshot import Snapshot


def _related(rel: dict, k: int) -> list[int]:
    if "offsets" in rel:
        return rel["indices"][rel["offsets"][k]:rel["offsets"][k + 1]]
    i = rel["indices"][k]
    return [] if i < 0 else [i]


def test_roles_of_the_simulation_model(sim):
    roles = find_roles(sim["sim"].schema)
    assert roles == {"hits": "tracker_hits", "tracks": "tracks", "cells": "calo_cells", "clusters": "clusters",
                     "jets": "jets"}


def test_scene_holds_every_object_with_its_relations(sim):
    ds = sim["sim"]
    scene = event_scene(ds, 2)
    json.dumps(scene, allow_nan=False)  # what the server sends must be strict JSON
    event = ds.event(2)
    objects = scene["objects"]
    assert objects["hits"]["n"] == len(event.tracker_hits)
    assert objects["cells"]["n"] == len(event.calo_cells)
    assert objects["jets"]["n"] == len(event.jets) > 0
    assert scene["run"] == event.run and scene["event"] == event.event
    assert scene["met"]["pt"] == pytest.approx(float(event.met))
    np.testing.assert_allclose(objects["hits"]["fields"]["x"], np.asarray(event.tracker_hits.x), atol=1e-3)
    jets = objects["jets"]
    assert jets["relations"]["tracks"]["role"] == "tracks"
    assert jets["relations"]["clusters"]["role"] == "clusters"
    for j in range(jets["n"]):
        assert _related(jets["relations"]["tracks"], j) == event.jets[j].tracks_index.to_list()
        assert _related(jets["relations"]["clusters"], j) == event.jets[j].clusters_index.to_list()
    tracks = objects["tracks"]
    assert tracks["relations"]["hits"]["role"] == "hits"
    assert len(tracks["path"]["x"]) == tracks["n"] * tracks["path"]["points"]
    # one-to-one relations to a collection not drawn keep their indices, -1 where there is none
    particle = objects["cells"]["relations"]["particle"]
    assert particle["role"] is None and not particle["many"]
    assert particle["indices"] == np.asarray(event.calo_cells.particle_index).tolist()


def test_detector_geometry_follows_the_description(sim):
    det = Detector.load()
    geo = event_scene(sim["sim"], 0)["detector"]
    assert [layer["r"] for layer in geo["tracker"]["barrel"]] == [layer.radius for layer in det.tracker.barrel]
    assert [d["z"] for d in geo["tracker"]["endcap"]] == [d.z for d in det.tracker.endcap]
    ecal_barrel = next(c for c in geo["calorimeters"] if c["name"] == "ECAL barrel")
    assert ecal_barrel["r_min"] == det.calorimeter.ecal.barrel.radius
    assert geo["cells"]["1"]["dphi"] == pytest.approx(2 * math.pi / det.calorimeter.ecal.barrel.n_phi)
    hcal_endcap = next(c for c in geo["calorimeters"] if c["name"] == "HCAL endcap")
    # the endcap spans the rings from eta_min to eta_max of its description
    assert hcal_endcap["r_max"] == pytest.approx(det.calorimeter.hcal.endcap.z / math.sinh(1.392), abs=0.01)


def test_helices_pass_through_their_hits(sim):
    """Each track's drawn helix comes within millimetres of every hit the fit used.

    The helix is drawn from the track's parameters at the origin; the particle scattered and lost
    energy in the tracker's material, so its outer hits lie off that ideal helix: by a few
    millimetres above 2 GeV, by up to a few centimetres for the slowest tracks."""
    content = load_event(sim["sim"], 1)
    tracks, hits = content.collections["tracks"], content.collections["hits"]
    assert len(tracks) > 5
    x, y, z = helix_points(tracks, n_points=4000)
    worst = []
    for k in range(len(tracks)):
        idx = tracks.relations["hits"].of(k)
        h = np.stack([hits.fields[c][idx] for c in "xyz"], axis=1)
        p = np.stack([x[k], y[k], z[k]], axis=1)
        d = np.sqrt(((h[:, None, :] - p[None, :, :]) ** 2).sum(axis=2)).min(axis=1)
        worst.append(d.max())
    worst = np.asarray(worst)
    fast = np.asarray(tracks.fields["pt"]) > 2.0
    assert fast.sum() > 5
    assert np.median(worst[fast]) < 0.25  # cm
    assert worst[fast].max() < 1.0
    assert np.median(worst) < 0.5
    assert worst.max() < 5.0
    # a helix starts at the point of closest approach and ends at the tracker's boundary
    r_end = np.hypot(x[:, -1], y[:, -1])
    det = Detector.load()
    at_boundary = ((np.abs(r_end - det.tracker.outer_radius) < 0.5)
                   | (np.abs(np.abs(z[:, -1]) - det.tracker.outer_z) < 0.5))
    assert at_boundary.mean() > 0.8  # the rest curl up inside


def test_phoenix_event_data(sim):
    ds = sim["sim"]
    scene = event_scene(ds, 3)
    data = phoenix_event(ds, 3)
    json.dumps(data, allow_nan=False)
    (key, event), = data.items()
    assert key == f"sim run {scene['run']} event {scene['event']}"
    assert event["event number"] == scene["event"] and event["run number"] == scene["run"]
    assert event["units"] == "length mm, energy MeV"  # a string: Phoenix takes objects for collections
    tracks = event["Tracks"]["tracks"]
    assert len(tracks) == scene["objects"]["tracks"]["n"]
    points = scene["objects"]["tracks"]["path"]["points"]
    first = tracks[0]
    assert len(first["pos"]) == points and all(len(p) == 3 for p in first["pos"])
    assert first["pos"][-1][0] == pytest.approx(scene["objects"]["tracks"]["path"]["x"][points - 1] * 10, abs=0.01)
    d0, z0, phi, theta, qop = first["dparams"]
    f = scene["objects"]["tracks"]["fields"]
    assert phi == pytest.approx(f["phi"][0], abs=1e-4)
    assert theta == pytest.approx(2 * math.atan(math.exp(-f["eta"][0])), abs=1e-4)
    assert qop == pytest.approx(f["charge"][0] / (f["pt"][0] * math.cosh(f["eta"][0]) * 1000), rel=1e-3)
    assert first["hits"] == _related(scene["objects"]["tracks"]["relations"]["hits"], 0)
    hits = event["Hits"]["tracker_hits"]
    assert len(hits) == scene["objects"]["hits"]["n"]
    assert hits[5][2] == pytest.approx(scene["objects"]["hits"]["fields"]["z"][5] * 10, abs=1e-2)
    cells = event["CaloCells"]["calo_cells"]
    assert len(cells) == scene["objects"]["cells"]["n"]
    assert {"energy", "eta", "phi", "radius", "z"} <= set(cells[0])
    jets = event["Jets"]["jets"]
    assert all(j["coneR"] == 0.4 for j in jets)
    assert jets[0]["energy"] >= jets[0]["pT"]  # E >= pT
    # a jet's constituents as Phoenix links, "collection:index"
    assert jets[0]["LinkedTracks"] == [f"tracks:{i}" for i in jets[0]["tracks"]]
    assert jets[0]["LinkedClusters"] == [f"clusters:{i}" for i in jets[0]["clusters"]]
    clusters = event["CaloClusters"]["clusters"]
    pos = scene["objects"]["clusters"]["position"]
    assert clusters[0]["radius"] == pytest.approx(math.hypot(pos["x"][0], pos["y"][0]) * 10, abs=0.01)
    assert clusters[0]["z"] == pytest.approx(abs(pos["z"][0]) * 10, abs=0.01)
    met = event["MissingEnergy"]["met"][0]
    assert math.hypot(met["etx"], met["ety"]) == pytest.approx(scene["met"]["pt"] * 1000, rel=1e-3)
    assert math.atan2(met["ety"], met["etx"]) == pytest.approx(scene["met"]["phi"], abs=1e-3)


def test_raw_events_draw_what_they_have(sim):
    """Before reconstruction there are hits and cells, and the scene says what is missing."""
    scene = event_scene(sim["raw"], 0)
    assert set(scene["objects"]) == {"hits", "cells"}
    assert scene["met"] is None
    assert any("tracks" in note and "reco" in note for note in scene["notes"])


def test_an_event_is_found_without_listing_the_dataset(sim, monkeypatch):
    """The display finds an event's database by the catalog's index: a dataset of a million databases
    draws an event as fast as one of ten."""
    want = event_scene(sim["sim"], 3)

    def listed(*args, **kwargs):
        raise AssertionError("the dataset was listed")

    monkeypatch.setattr(Snapshot, "databases", listed)
    monkeypatch.setattr(type(sim.catalog), "databases", listed)
    monkeypatch.setattr(type(sim.catalog), "iter_databases", listed)
    assert event_scene(sim["sim"], 3) == want
    with pytest.raises(NotFound, match="no entry 6"):
        event_scene(sim["sim"], 6)


def test_bad_input(sim):
    with pytest.raises(NotFound, match="no entry 6"):
        event_scene(sim["sim"], 6)
    with pytest.raises(NotFound, match="negative"):
        phoenix_event(sim["sim"], -1)
    with pytest.raises(NotFound):
        sim.dataset("nope")
    with pytest.raises(DataError, match="nothing the display draws"):
        event_scene(sim["weights"], 0)


@pytest.mark.rootdata
def test_nanoaod_shows_jets_leptons_and_met(nano_root):
    fed = giod.open(nano_root, create=False)
    ds = fed["ttbar"]
    scene = event_scene(ds, 3)
    assert "hits" not in scene["objects"] and "cells" not in scene["objects"]
    assert {"jets", "muons", "electrons"} <= set(scene["objects"])
    event = ds.event(3, ["Jet", "Muon", "MET_pt", "MET_phi"])
    assert scene["objects"]["jets"]["collection"] == "Jet"
    assert scene["objects"]["jets"]["n"] == len(event.Jet)
    np.testing.assert_allclose(scene["objects"]["jets"]["fields"]["pt"], np.asarray(event.Jet.pt), rtol=1e-5)
    assert scene["objects"]["muons"]["n"] == len(event.Muon)
    assert scene["met"] == {"pt": pytest.approx(float(event.MET_pt)), "phi": pytest.approx(float(event.MET_phi)),
                            "source": "tags MET_pt, MET_phi"}
    assert any("more tags are not shown" in n for n in scene["notes"])
    data = phoenix_event(ds, 3)
    (event_data,) = data.values()
    assert len(event_data["Jets"]["Jet"]) == len(event.Jet)
    assert len(event_data["Muons"]["Muon"]) == len(event.Muon)
    assert "MissingEnergy" in event_data and "Tracks" not in event_data
    fed.close()


@pytest.mark.rootdata
def test_px_py_pz_e_objects_and_met_xy_are_drawn(hzz_root):
    """Objects given as Px, Py, Pz, E and the MET as MET_px, MET_py draw as (pt, eta, phi, mass) would."""
    fed = giod.open(hzz_root, create=False)
    ds = fed["hzz"]
    assert find_roles(ds.schema) == {"jets": "Jet", "muons": "Muon", "electrons": "Electron", "photons": "Photon"}
    entry = next(e for e in range(50) if len(ds.event(e, ["Jet"]).Jet) and len(ds.event(e, ["Muon"]).Muon))
    scene = event_scene(ds, entry)
    json.dumps(scene, allow_nan=False)
    stored = ds.event(entry, ["Jet", "Muon", "MET_px", "MET_py"])
    for role, name in (("jets", "Jet"), ("muons", "Muon")):
        objs = scene["objects"][role]
        px, py, pz, e = (np.asarray(stored[name][c], dtype=np.float64) for c in ("Px", "Py", "Pz", "E"))
        f = objs["fields"]
        np.testing.assert_allclose(f["pt"], np.hypot(px, py), rtol=1e-4)
        np.testing.assert_allclose(f["phi"], np.arctan2(py, px), atol=1e-4)
        np.testing.assert_allclose(np.sinh(f["eta"]) * f["pt"], pz, rtol=1e-3)
        np.testing.assert_allclose(objs["energy"], e, rtol=1e-3)
        np.testing.assert_allclose(f["Px"], px, rtol=1e-4)  # the stored fields stay
    assert scene["objects"]["muons"]["fields"]["charge"] == np.asarray(stored.Muon.Charge).tolist()
    met_x, met_y = float(stored.MET_px), float(stored.MET_py)
    assert scene["met"] == {"pt": pytest.approx(math.hypot(met_x, met_y)),
                            "phi": pytest.approx(math.atan2(met_y, met_x)),
                            "source": "tags MET_px, MET_py"}
    fed.close()


@settings(max_examples=200, deadline=None)
@given(pt=st.floats(0.5, 5000), eta=st.floats(-5, 5), phi=st.floats(-math.pi, math.pi), mass=st.floats(0, 200))
def test_px_py_pz_e_read_back_as_pt_eta_phi_mass(pt, eta, phi, mass):
    from giod.display.content import _polar

    pz = pt * math.sinh(eta)
    e = math.sqrt(pt * pt + pz * pz + mass * mass)
    fields = {"Px": np.array([pt * math.cos(phi)], np.float64), "Py": np.array([pt * math.sin(phi)], np.float64),
              "Pz": np.array([pz], np.float64), "E": np.array([e], np.float64)}
    out = _polar(fields)
    assert out["pt"][0] == pytest.approx(pt, rel=1e-9)
    assert out["eta"][0] == pytest.approx(eta, abs=1e-7)
    assert math.cos(out["phi"][0] - phi) == pytest.approx(1.0, abs=1e-9)
    # the mass of a light, energetic object is lost to rounding in E^2 - p^2; its energy is not
    assert math.hypot(math.hypot(pt, pz), out["mass"][0]) == pytest.approx(e, rel=1e-9)


@pytest.mark.rootdata
def test_nanoaod_leptons_carry_phoenix_charge_convention(nano_root):
    """Phoenix's loader bends a lepton as ``pdgId > 0 ? 1 : -1``: pdgId has the charge's sign."""
    fed = giod.open(nano_root, create=False)
    ds = fed["ttbar"]
    for kind, name, size in (("Muons", "Muon", 13), ("Electrons", "Electron", 11), ("Photons", "Photon", 22)):
        entry = next(e for e in range(100) if len(ds.event(e, [name])[name]))
        stored = ds.event(entry, [name])[name]
        (event,) = phoenix_event(ds, entry).values()
        objs = event[kind][name]
        charge = np.asarray(stored.charge).tolist()
        assert [o["charge"] for o in objs] == charge
        assert all(o["pT"] == o["pt"] for o in objs)
        if kind == "Photons":  # neutral: drawn as a cluster
            assert [o["pdgId"] for o in objs] == np.asarray(stored.pdgId).tolist()
            continue
        assert [o["pdgId"] for o in objs] == [q * size for q in charge]
        assert [o["pdgIdPDG"] for o in objs] == np.asarray(stored.pdgId).tolist()
    fed.close()
