"""Four-vector arithmetic on giod's own reads of an imported CMS NanoAOD file (vector's Momentum4D)."""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import numpy as np
import pytest
import uproot

import giod
from giod.interchange import import_root

pytest.importorskip("vector")


@pytest.fixture(scope="module")
def ttbar_dataset(ttbar: Path, tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("behaviour") / "fed"
    with giod.open(path, create=True) as fed:
        import_root(fed, ttbar, "ttbar")
    fed = giod.open(path)
    yield fed.dataset("ttbar")
    fed.close()


def _four(pt: np.ndarray, eta: np.ndarray, phi: np.ndarray, mass: np.ndarray) -> np.ndarray:
    p = [pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)]
    return np.stack([*p, np.sqrt(p[0] ** 2 + p[1] ** 2 + p[2] ** 2 + mass**2)])


def test_dimuon_mass_from_giods_read_matches_the_original_file(ttbar_dataset, ttbar: Path):
    ev = ttbar_dataset.read(["Muon", "Electron"])
    two = ev[ak.num(ev.Muon) >= 2]
    assert len(two) > 0
    mass = (two.Muon[:, 0] + two.Muon[:, 1]).mass  # raised TypeError: no numpy.add overloads for Muon, Muon
    with uproot.open(ttbar) as f:
        raw = f["Events"].arrays(["Muon_pt", "Muon_eta", "Muon_phi", "Muon_mass"])
    raw = raw[ak.num(raw.Muon_pt) >= 2]
    legs = [_four(*(ak.to_numpy(raw[f"Muon_{k}"][:, i]).astype(np.float64) for k in ("pt", "eta", "phi", "mass")))
            for i in (0, 1)]
    total = legs[0] + legs[1]
    expected = np.sqrt(np.maximum(total[3] ** 2 - total[0] ** 2 - total[1] ** 2 - total[2] ** 2, 0))
    np.testing.assert_allclose(ak.to_numpy(mass), expected, rtol=1e-4, atol=1e-3)
    # the behaviour is vector's, under the record's own name, across collections too
    assert ev.Muon.type.content.content.parameters.get("__record__") == "Muon"
    assert np.all(ak.to_numpy(ak.flatten(ev.Muon.px)) == pytest.approx(
        ak.to_numpy(ak.flatten(ev.Muon.pt * np.cos(ev.Muon.phi))), rel=1e-5))
    mixed = ev[(ak.num(ev.Muon) >= 1) & (ak.num(ev.Electron) >= 1)]
    assert len(mixed) > 0
    assert ak.all((mixed.Muon[:, 0] + mixed.Electron[:, 0]).mass >= 0)
    assert ak.all(mixed.Muon[:, 0].deltaR(mixed.Electron[:, 0]) >= 0)


def test_one_event_and_chunks_carry_the_behaviour_too(ttbar_dataset):
    chunk = next(ttbar_dataset.iterate(["Jet"], step_size=50))
    many = chunk[ak.num(chunk.Jet) >= 2]
    assert ak.all((many.Jet[:, 0] + many.Jet[:, 1]).mass > 0)
    entry = int(np.flatnonzero(ak.to_numpy(ak.num(ttbar_dataset.read(["Jet.pt"]).Jet) >= 2))[0])
    event = ttbar_dataset.event(entry, ["Jet"])
    assert (event.Jet[0] + event.Jet[1]).mass > 0
