"""Fast parametric detector simulation: truth particles -> raw tracker hits and calorimeter cells.

``simulate(events, detector, seed=...)`` takes events with ``mcparticles``
(from :func:`giod.physics.generator.generate` or any source with the same
fields) and returns them with ``tracker_hits`` and ``calo_cells`` added. The
work is vectorised over all particles of all events; see
:mod:`giod.physics.sim_tracker` and :mod:`giod.physics.sim_calo` for the
physics. The same events, detector and seed give bit-identical output.
"""

from __future__ import annotations

from typing import Any

import awkward as ak
import numpy as np

from giod.errors import DataError
from giod.physics.detector import Detector
from giod.physics.layout import build_collection, counts, flat, with_fields
from giod.physics.particles import STATUS_FINAL
from giod.physics.sim_calo import simulate_calorimeter
from giod.physics.sim_tracker import SimParticles, simulate_tracker

__all__ = ["simulate"]

#: Events simulated together: bounds the memory of the (particle x layer) arrays.
CHUNK_EVENTS = 1000

_NEEDED = ("pdg", "charge", "px", "py", "pz", "e", "mass", "vx", "vy", "vz", "status")


def simulate(events: ak.Array, detector: Detector | None = None, *, seed: int) -> ak.Array:
    """Add ``tracker_hits`` and ``calo_cells`` to ``events`` (default detector: the packaged one)."""
    detector = detector or Detector.load()
    particles = final_state(events)
    n_events = len(events)
    tracker_rng, calo_rng = np.random.default_rng(seed).spawn(2)
    outputs: dict[str, list[Any]] = {"tracker_hits": [], "calo_cells": []}
    for start in range(0, max(n_events, 1), CHUNK_EVENTS):
        stop = min(start + CHUNK_EVENTS, n_events)
        lo, hi = np.searchsorted(particles.event, [start, stop])
        chunk = particles.select(slice(lo, hi))
        chunk.event = chunk.event - start
        outputs["tracker_hits"].append(simulate_tracker(chunk, detector, stop - start, tracker_rng))
        outputs["calo_cells"].append(simulate_calorimeter(chunk, detector, stop - start, calo_rng))
    collections = {}
    for name, parts in outputs.items():
        columns = {key: np.concatenate([cols[key] for cols, _ in parts]) for key in parts[0][0]}
        collections[name] = build_collection(name, columns, np.concatenate([n for _, n in parts]))
    return with_fields(events, collections)


def final_state(events: ak.Array) -> SimParticles:
    """The final-state (status 1) particles of all events as flat float64 columns."""
    if "mcparticles" not in ak.fields(events):
        raise DataError("simulation needs events with an 'mcparticles' collection")
    missing = [f for f in _NEEDED if f not in ak.fields(events.mcparticles)]
    if missing:
        raise DataError(f"mcparticles lacks the fields {', '.join(missing)}")
    n = counts(events, "mcparticles")
    event = np.repeat(np.arange(len(n)), n)
    index = np.arange(len(event)) - np.repeat(np.cumsum(n) - n, n)
    status = flat(events, "mcparticles", "status")
    keep = status == STATUS_FINAL
    columns = {
        name: flat(events, "mcparticles", name)[keep].astype(np.float64)
        for name in _NEEDED
        if name != "status"
    }
    columns["pdg"] = columns["pdg"].astype(np.int64)
    return SimParticles(event=event[keep], index=index[keep], **columns)
