"""How the packaged calibration is derived from fresh simulation.

The two steps are those of :mod:`giod.physics.calibration`: a cluster scale from a charged-pion
gun, then a jet energy correction by numerical inversion on multi-jet events. The derivation runs
the whole chain (generator, simulation, reconstruction), so it stands above the reconstruction,
which only reads the result. ``python -m giod.physics.derivation`` rewrites the packaged file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np

from giod.physics.calibration import CALIBRATION_FILE, ETA_EDGES, Calibration, match_jets, truth_jets
from giod.physics.detector import Detector
from giod.physics.generator import generate, particle_gun
from giod.physics.reconstruct import reconstruct
from giod.physics.simulate import simulate

__all__ = ["derive_calibration"]


def derive_calibration(
    *,
    seed: int = 2024,
    n_gun: int = 4000,
    n_jets_events: int = 1500,
    pthat_bins: Sequence[float] = (15.0, 40.0, 100.0, 250.0, 600.0),
    generator: str = "builtin",
    detector: Any = None,
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """Derive the cluster scale and the jet energy correction from fresh simulation.

    ``n_jets_events`` multi-jet events of ``generator`` are simulated for
    each pT-hat threshold in ``pthat_bins``; expect a minute and a half on
    one core with the built-in generator. The jet correction depends on the
    fragmentation: derive it with the generator of the events to correct.
    """
    detector = detector or Detector.load()
    say = progress or (lambda _msg: None)
    rng = np.random.default_rng(seed)

    say("cluster scale: charged-pion gun")
    energy = np.exp(rng.uniform(np.log(5.0), np.log(300.0), n_gun))
    eta = rng.uniform(-2.8, 2.8, n_gun)
    phi = rng.uniform(-np.pi, np.pi, n_gun)
    pt = np.sqrt(np.maximum(energy**2 - 0.1396**2, 0.0)) / np.cosh(eta)
    pdg = np.where(rng.random(n_gun) < 0.5, 211, -211)
    gun = simulate(particle_gun(pdg, pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)), detector,
                   seed=seed + 1)
    reco = reconstruct(gun, detector, calibration=Calibration.identity())
    cl = reco.clusters
    e_ecal = np.asarray(ak.sum(cl.raw_energy[cl.calorimeter == 1], axis=1), dtype=np.float64)
    e_hcal = np.asarray(ak.sum(cl.raw_energy[cl.calorimeter == 2], axis=1), dtype=np.float64)
    true_e = np.asarray(ak.flatten(gun.mcparticles.e), dtype=np.float64)
    hcal_scale = float(np.sum((true_e - e_ecal) * e_hcal) / max(np.sum(e_hcal**2), 1e-12))
    scaled = Calibration(hcal_scale=hcal_scale, description="cluster scale only")

    raw_all, truth_all, eta_all = [], [], []
    for k, pthat in enumerate(pthat_bins):
        say(f"jet energy scale: multi-jet events, pT-hat > {pthat:g} GeV")
        truth = generate(n_jets_events, seed=seed + 10 + k, pthat_min=pthat, generator=generator)
        events = simulate(truth, detector, seed=seed + 100 + k)
        reco = reconstruct(events, detector, calibration=scaled, jet_pt_min=5.0)
        tj = truth_jets(truth, min_pt=10.0)
        jets = reco.jets
        n_reco = np.asarray(ak.num(jets, axis=1), dtype=np.int64)
        flat = {c: np.asarray(ak.flatten(jets[c]), dtype=np.float64) for c in ("raw_pt", "eta", "phi")}
        match = match_jets(tj["n"], tj["eta"], tj["phi"], n_reco, flat["eta"], flat["phi"])
        ok = match >= 0
        raw_all.append(flat["raw_pt"][match[ok]])
        truth_all.append(tj["pt"][ok])
        eta_all.append(tj["eta"][ok])
    raw, true_pt = np.concatenate(raw_all), np.concatenate(truth_all)
    abs_eta = np.abs(np.concatenate(eta_all))
    say("jet energy scale: numerical inversion")
    pt_edges = np.geomspace(10.0, 3000.0, 26)
    points, factors = [], []
    for lo, hi in zip(ETA_EDGES[:-1], ETA_EDGES[1:], strict=True):
        sel = (abs_eta >= lo) & (abs_eta < hi)
        pts, fac = _inversion(raw[sel], true_pt[sel], pt_edges)
        if not pts:  # too few jets (the far forward bin): no correction
            pts, fac = [20.0], [1.0]
        points.append(tuple(pts))
        factors.append(tuple(fac))
    return Calibration(
        hcal_scale=hcal_scale, eta_edges=ETA_EDGES, raw_pt=tuple(points), factor=tuple(factors),
        description=(f"derived by giod.physics.derivation.derive_calibration(seed={seed}): "
                     f"pion gun {n_gun} events, {generator} multi-jet {n_jets_events} events per pT-hat "
                     f"in {list(pthat_bins)} GeV, {len(raw)} matched jets"),
    )


def _inversion(raw: np.ndarray, true_pt: np.ndarray, edges: np.ndarray,
               min_jets: int = 30) -> tuple[list[float], list[float]]:
    """(median raw pT, 1 / median response) per truth-pT bin holding enough jets."""
    which = np.searchsorted(edges, true_pt, side="right") - 1
    pts: list[float] = []
    fac: list[float] = []
    for b in range(len(edges) - 1):
        sel = which == b
        if sel.sum() < min_jets:
            continue
        response = np.median(raw[sel] / true_pt[sel])
        point = float(np.median(raw[sel]))
        if response > 0 and (not pts or point > pts[-1]):
            pts.append(point)
            fac.append(float(1.0 / response))
    return pts, fac


def _main() -> None:  # pragma: no cover - a maintenance command
    target = Path(__file__).with_name(CALIBRATION_FILE)  # beside calibration.py, in the package
    calibration = derive_calibration(progress=print)  # the packaged one: built-in generator
    calibration.save(target)
    print(f"wrote {target}: hcal_scale {calibration.hcal_scale:.4f}")


if __name__ == "__main__":  # pragma: no cover
    _main()
