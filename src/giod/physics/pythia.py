"""Pythia 8 hard-QCD events through the optional ``pythia8mc`` package.

Pythia's batch interface (``Pythia.nextBatch``) returns a whole run as an
awkward array, so particles are copied out column by column, never by a
Python loop over particles. What is kept of Pythia's record:

* final-state particles (status > 0) -> status 1;
* hadrons that Pythia decayed (status -81 .. -99) -> status 2;
* the outgoing partons of the hard process (status -23) -> status 3.

Each particle's ``parent`` is its nearest kept ancestor along Pythia's
``mother1`` chain, found by walking all particles up one generation at a time.
Particles with a proper lifetime above 10 mm (K0S, Lambda, ...) are left
undecayed, as for a detector simulation. Vertices are converted from mm to cm.
"""

from __future__ import annotations

import importlib
from typing import Any

import awkward as ak
import numpy as np

from giod.errors import GiodError, MissingDependency
from giod.physics.particles import STATUS_DECAYED, STATUS_FINAL, STATUS_PARTON, ParticleTable

__all__ = ["PYTHIA_VERSION", "generate_pythia"]

PYTHIA_VERSION = "8.317.2"
_INSTALL = "Pythia 8 is not installed: pip install 'giod[pythia]'"
_MM = 0.1  # cm per mm


def _module() -> Any:
    try:
        return importlib.import_module("pythia8mc")
    except ImportError as exc:
        raise MissingDependency(_INSTALL) from exc


def _pythia(seed: int, pthat_min: float, sqrt_s: float) -> Any:
    module = _module()
    pythia = module.Pythia("", False)  # no banner
    settings = [
        f"Beams:eCM = {sqrt_s:.6g}",
        "HardQCD:all = on",
        f"PhaseSpace:pTHatMin = {pthat_min:.6g}",
        "Random:setSeed = on",
        # Pythia takes seeds in [1, 900000000]; 0 would mean "from the clock".
        f"Random:seed = {seed % 900_000_000 + 1}",
        "ParticleDecays:limitTau0 = on",
        "ParticleDecays:tau0Max = 10.",
        "Print:quiet = on",
    ]
    for line in settings:
        if not pythia.readString(line):
            raise GiodError(f"Pythia refused the setting {line!r}")
    if not pythia.init():
        raise GiodError("Pythia failed to initialise")
    return pythia


def generate_pythia(n_events: int, *, seed: int, pthat_min: float, sqrt_s: float) -> ParticleTable:
    """``n_events`` Pythia events as a particle table (vertices at the origin, in cm)."""
    pythia = _pythia(seed, pthat_min, sqrt_s)
    if n_events == 0:
        return ParticleTable.empty()
    batches = []
    have = 0
    while have < n_events:  # failed events are skipped; top up until the run is complete
        batch = pythia.nextBatch(n_events - have, "skip")
        batches.append(batch.prt)
        have += len(batch)
    prt = ak.concatenate(batches) if len(batches) > 1 else batches[0]
    return _table(pythia, prt)


def _flat(array: ak.Array) -> np.ndarray:
    return np.asarray(ak.to_numpy(ak.flatten(array, axis=1)))


def _table(pythia: Any, prt: ak.Array) -> ParticleTable:
    n_per_event = np.asarray(ak.num(prt, axis=1), dtype=np.int64)
    start = np.repeat(np.cumsum(n_per_event) - n_per_event, n_per_event)
    status = _flat(prt.status)
    keep = (status > 0) | ((status <= -81) & (status >= -99)) | (status == -23)

    # Nearest kept ancestor, as a global row: walk mother1 up one generation per pass.
    mother = _flat(prt.mother1).astype(np.int64)
    mother_row = np.where(mother > 0, start + mother, -1)
    ancestor = mother_row.copy()
    active = np.flatnonzero(ancestor >= 0)
    for _ in range(10_000):  # mothers precede daughters; the bound only guards a bad record
        if not len(active):
            break
        active = active[~keep[ancestor[active]]]
        ancestor[active] = mother_row[ancestor[active]]
        active = active[ancestor[active] >= 0]

    rows = np.flatnonzero(keep)
    new_row = np.full(len(keep), -1, dtype=np.int64)
    new_row[rows] = np.arange(len(rows))
    parent = np.where(ancestor[rows] >= 0, new_row[np.maximum(ancestor[rows], 0)], -1)

    pdg = _flat(prt.id)[rows]
    ids = np.unique(pdg)
    charge_of = np.array([pythia.particleData.charge(int(i)) for i in ids])  # per species
    charge = charge_of[np.searchsorted(ids, pdg)]
    vertex = ak.fill_none(prt.vProd, {"px": 0.0, "py": 0.0, "pz": 0.0, "e": 0.0}, axis=1)
    new_status = np.where(status[rows] > 0, STATUS_FINAL,
                          np.where(status[rows] == -23, STATUS_PARTON, STATUS_DECAYED))
    return ParticleTable(
        event=np.repeat(np.arange(len(n_per_event)), n_per_event)[rows],
        pdg=pdg.astype(np.int32),
        charge=charge,
        px=_flat(prt.p.px)[rows],
        py=_flat(prt.p.py)[rows],
        pz=_flat(prt.p.pz)[rows],
        e=_flat(prt.p.e)[rows],
        mass=_flat(prt.m)[rows],
        vx=_flat(vertex.px)[rows] * _MM,
        vy=_flat(vertex.py)[rows] * _MM,
        vz=_flat(vertex.pz)[rows] * _MM,
        status=new_status.astype(np.int16),
        parent=parent,
    )
