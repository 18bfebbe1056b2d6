"""giod's Phoenix export built by Phoenix's own loader (``phoenix-event-display`` from npm) in node.

Every object Phoenix makes must be finite and sit where giod says: a jet along its eta and
phi, a cluster or cell on the calorimeter face giod gives, a track through giod's helix, a
lepton Phoenix extrapolates bending the way its charge says, the missing-E_T line along
(etx, ety). No collection may appear that giod did not export.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import giod
from giod.display import event_scene, phoenix_event
from giod.display.content import Collection
from giod.display.scene import helix_points

pytestmark = [pytest.mark.node, pytest.mark.slow]  # installs Phoenix from the npm registry

TYPES = ("Tracks", "Jets", "Hits", "CaloClusters", "CaloCells", "Muons", "Electrons", "Photons", "MissingEnergy")


def unit(eta: float, phi: float) -> np.ndarray:
    theta = 2 * math.atan(math.exp(-eta))
    return np.array([math.sin(theta) * math.cos(phi), math.sin(theta) * math.sin(phi), math.cos(theta)])


def turning(points: list[list[float]]) -> float:
    """Sign of the bending seen from +z: negative is clockwise."""
    p = np.asarray(points, dtype=np.float64)[:, :2]
    d = np.diff(p, axis=0)
    return float(np.sign(np.sum(d[:-1, 0] * d[1:, 1] - d[:-1, 1] * d[1:, 0])))


def giod_turning(pt: float, eta: float, phi: float, charge: float) -> float:
    """How giod's own display bends a track of this charge from the origin."""
    one = {k: np.array([v], dtype=np.float64) for k, v in
           {"pt": pt, "eta": eta, "phi": phi, "charge": charge, "d0": 0.0, "z0": 0.0}.items()}
    x, y, z = helix_points(Collection("tracks", "t", "T", one), n_points=64)
    return turning(np.stack([x[0], y[0], z[0]], axis=1).tolist())


def built_event(phoenix_build: Any, data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    (key, event), = data.items()
    built = phoenix_build(data)[key]
    exported = {name for kind in TYPES for name in event.get(kind, {})}
    # every collection Phoenix lists is one giod exported (no "length"/"energy" from metadata)
    assert set(built["collections"]) == exported
    for kind, collections in built["types"].items():
        for name, objects in collections.items():
            assert len(objects) == (1 if kind == "Hits" else len(event[kind][name])), (kind, name)
            bad = [k for k, o in enumerate(objects) if not o["finite"]]
            assert not bad, f"{kind}/{name}: objects {bad[:10]} of {len(objects)} are not finite"
    return event, built["types"] | {"cuts": built["cuts"]}


def check_jets(event: dict[str, Any], built: dict[str, Any]) -> None:
    for name, jets in event["Jets"].items():
        for jet, obj in zip(jets, built["Jets"][name], strict=True):
            np.testing.assert_allclose(obj["direction"], unit(jet["eta"], jet["phi"]), atol=1e-6)


def check_met(event: dict[str, Any], built: dict[str, Any]) -> None:
    (name, (met,)), = event["MissingEnergy"].items()
    (line,) = built["MissingEnergy"][name]
    np.testing.assert_allclose(line["points"][-1][:2], [met["etx"], met["ety"]], rtol=1e-6)


def check_leptons(event: dict[str, Any], built: dict[str, Any], charges: dict[str, np.ndarray]) -> int:
    """Each extrapolated lepton leaves the origin along phi and bends as giod bends its charge."""
    seen = 0
    for kind in ("Muons", "Electrons"):
        for name, leptons in event.get(kind, {}).items():
            if not leptons:  # Phoenix skips an empty collection
                continue
            assert "pT" in built["cuts"][f"{kind}/{name}"]
            for k, (lepton, obj) in enumerate(zip(leptons, built[kind][name], strict=True)):
                pts = np.asarray(obj["points"])
                assert np.linalg.norm(pts[0]) < 1.0  # from the origin, mm
                step = pts[1] - pts[0]
                assert math.atan2(step[1], step[0]) == pytest.approx(lepton["phi"], abs=0.02)
                q = float(charges[name][k])
                expected = giod_turning(lepton["pT"] / 1000, lepton["eta"], lepton["phi"], q)
                assert turning(obj["points"]) == expected, (kind, name, k, q)
                seen += 1
    return seen


def test_simulated_event_in_phoenix(sim, phoenix_build):
    ds = sim["sim"]
    scene = event_scene(ds, 3)
    data = phoenix_event(ds, 3)
    event, built = built_event(phoenix_build, data)
    assert set(built) - {"cuts"} == {"Tracks", "Jets", "Hits", "CaloClusters", "CaloCells", "MissingEnergy"}
    assert "pT" in built["cuts"]["Tracks/tracks"]
    # tracks run through giod's helix points
    for track, obj in zip(event["Tracks"]["tracks"], built["Tracks"]["tracks"], strict=True):
        pts = np.asarray(obj["points"])
        np.testing.assert_allclose(pts[0], track["pos"][0], atol=0.05)
        np.testing.assert_allclose(pts[-1], track["pos"][-1], atol=0.05)
    check_jets(event, built)
    # clusters sit where giod's display puts them (cm there, mm here)
    pos = scene["objects"]["clusters"]["position"]
    for k, obj in enumerate(built["CaloClusters"]["clusters"]):
        np.testing.assert_allclose(obj["box"], [pos["x"][k] * 10, pos["y"][k] * 10, pos["z"][k] * 10], atol=0.5)
    # cells on their calorimeter's face, along their eta and phi
    for cell, obj in zip(event["CaloCells"]["calo_cells"], built["CaloCells"]["calo_cells"], strict=True):
        box = np.asarray(obj["box"])
        np.testing.assert_allclose(box / np.linalg.norm(box), unit(cell["eta"], cell["phi"]), atol=1e-5)
        if cell["z"]:
            assert abs(box[2]) == pytest.approx(cell["z"], abs=0.01)
        else:
            assert math.hypot(box[0], box[1]) == pytest.approx(cell["radius"], abs=0.01)
    assert built["Hits"]["tracker_hits"][0]["count"] == len(event["Hits"]["tracker_hits"])
    check_met(event, built)


@pytest.mark.rootdata
def test_nanoaod_event_in_phoenix(nano_root, phoenix_build):
    fed = giod.open(nano_root, create=False)
    ds = fed["ttbar"]
    with_electrons = next(e for e in range(100) if len(ds.event(e, ["Electron"]).Electron))
    leptons = 0
    for entry in (3, with_electrons):
        stored = ds.event(entry, ["Muon", "Electron"])
        charges = {"Muon": np.asarray(stored.Muon.charge), "Electron": np.asarray(stored.Electron.charge)}
        event, built = built_event(phoenix_build, phoenix_event(ds, entry))
        assert {"Jets", "MissingEnergy"} <= set(built)
        check_jets(event, built)
        check_met(event, built)
        leptons += check_leptons(event, built, charges)
    assert leptons >= 2
    fed.close()


@pytest.mark.rootdata
def test_px_py_pz_e_event_in_phoenix(hzz_root, phoenix_build):
    """uproot's HZZ sample gives objects as Px, Py, Pz, E and the MET as MET_px, MET_py."""
    fed = giod.open(hzz_root, create=False)
    ds = fed["hzz"]
    entry = next(e for e in range(50) if len(ds.event(e, ["Jet"]).Jet) and len(ds.event(e, ["Muon"]).Muon))
    stored = ds.event(entry, ["Jet", "Muon", "MET_px", "MET_py"])
    event, built = built_event(phoenix_build, phoenix_event(ds, entry))
    assert {"Jets", "Muons", "MissingEnergy"} <= set(built)
    jets = built["Jets"]["Jet"]
    p = np.stack([np.asarray(stored.Jet[c], dtype=np.float64) for c in ("Px", "Py", "Pz")], axis=1)
    # the export keeps 4 decimals of eta and phi
    np.testing.assert_allclose([j["direction"] for j in jets], p / np.linalg.norm(p, axis=1)[:, None], atol=2e-4)
    (met,) = built["MissingEnergy"].values()
    np.testing.assert_allclose(met[0]["points"][-1][:2], [float(stored.MET_px) * 1000, float(stored.MET_py) * 1000],
                               rtol=1e-4)
    assert check_leptons(event, built, {"Muon": np.asarray(stored.Muon.Charge)}) == len(stored.Muon)
    fed.close()
