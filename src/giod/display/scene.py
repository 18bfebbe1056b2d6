"""The scene the web event display draws: detector geometry and one event's objects, as JSON.

``event_scene(dataset, entry)`` answers a dict ready for ``json.dumps``:

* ``detector``: the tracker layers and disks, the calorimeter barrels and
  endcaps and the cell sizes per calorimeter section, from the detector
  description (``giod.physics.detector``; lengths in cm);
* ``objects``: per role (``hits``, ``tracks``, ``cells``, ``clusters``,
  ``jets``, ``muons``, ``electrons``, ``photons``, ``taus``; see
  :mod:`giod.display.content`) the collection's name and type, every scalar
  field as a list, and every relation as flat index lists (``offsets`` and
  ``indices`` for one-to-many; -1 where a one-to-one link points nowhere)
  with the role of its target, so that the page can highlight a jet's tracks and clusters or a
  track's hits. Tracks carry their helix as points (``path``), clusters their
  position on the calorimeter face;
* ``met``: missing transverse energy and its azimuth; ``tags``; ``notes``.

Columns are plain lists (one per field), which keeps an event of 50,000
calorimeter cells to a few MB of JSON and lets the page build its geometry
in typed arrays without a loop per object in Python.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import numpy as np

from giod.display.content import Collection, EventContent, Relation, load_event
from giod.physics.detector import CALO_CODES, CaloSubdetector, Detector
from giod.physics.helix import curvature, cylinder_crossing, plane_crossing, position

__all__ = ["FORMAT", "cluster_positions", "column", "default_detector", "detector_geometry", "energy_of", "event_scene",
           "helix_points", "scene_of"]

FORMAT = "giod-scene/1"
#: Points drawn along each track's helix.
HELIX_POINTS = 32
#: The description gives the calorimeters' front faces only; their depths here are for drawing
#: (a CMS crystal is 23 cm long; the hadron calorimeter fills the space up to the coil).
ECAL_DEPTH = 23.0
COIL_GAP = 10.0
JET_CONE = 0.4  # anti-kt R of giod's reconstruction and of NanoAOD's Jet collection
DECIMALS = 4


@cache
def default_detector() -> Detector:
    """The packaged CMS-like detector description, read once."""
    return Detector.load()


def detector_geometry(detector: Detector | None = None) -> dict[str, Any]:
    """The detector as the page draws it (cm): tracker surfaces, calorimeter volumes, cell sizes."""
    det = detector or default_detector()
    tracker = det.tracker
    hcal_outer = det.solenoid.radius - COIL_GAP
    hcal_depth = hcal_outer - det.calorimeter.hcal.barrel.radius
    calorimeters = []
    cells: dict[str, dict[str, Any]] = {}
    for calo, (barrel_code, endcap_code) in CALO_CODES.items():
        section = getattr(det.calorimeter, calo)
        depth = ECAL_DEPTH if calo == "ecal" else hcal_depth
        b, e = section.barrel, section.endcap
        calorimeters.append({
            "name": f"{calo.upper()} barrel", "calo": calo, "part": "barrel", "code": int(barrel_code),
            "r_min": b.radius, "r_max": b.radius + depth, "z_max": round(b.radius * math.sinh(b.eta_max), 2),
        })
        calorimeters.append({
            "name": f"{calo.upper()} endcap", "calo": calo, "part": "endcap", "code": int(endcap_code),
            "z_min": e.z, "z_max": e.z + depth, "r_min": round(e.z / math.sinh(e.eta_max), 2),
            "r_max": round(e.z / math.sinh(e.eta_min), 2),
        })
        cells[str(int(barrel_code))] = {"calo": calo, "part": "barrel", "r": b.radius, "depth": depth,
                                        "deta": b.d_eta, "dphi": 2 * math.pi / b.n_phi}
        cells[str(int(endcap_code))] = {"calo": calo, "part": "endcap", "z": e.z, "depth": depth,
                                        "deta": e.d_eta, "dphi": 2 * math.pi / e.n_phi}
    return {
        "name": det.name,
        "description": det.description,
        "field": det.solenoid.field,
        "solenoid": {"radius": det.solenoid.radius, "half_length": det.solenoid.half_length},
        "tracker": {
            "outer_radius": tracker.outer_radius, "outer_z": tracker.outer_z,
            "barrel": [{"name": layer.name, "kind": layer.subdetector, "r": layer.radius,
                        "half_length": layer.half_length} for layer in tracker.barrel],
            "endcap": [{"name": d.name, "kind": d.subdetector, "z": d.z, "r_min": d.r_min, "r_max": d.r_max}
                       for d in tracker.endcap],
            "layer_names": tracker.layer_names(),
        },
        "calorimeters": calorimeters,
        "cells": cells,
    }


def helix_points(tracks: Collection, detector: Detector | None = None,
                 n_points: int = HELIX_POINTS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points (x, y, z), each of shape (tracks, n_points), along each track's helix in cm.

    A track starts at its point of closest approach to the beam line,
    ``d0 * (sin phi, -cos phi, 0) + (0, 0, z0)``, and ends where it leaves the
    tracker volume, or after half a turn for a track that curls up inside it.
    """
    det = detector or default_detector()
    f = tracks.fields
    pt = f["pt"].astype(np.float64)
    phi = f["phi"].astype(np.float64)
    d0 = f["d0"].astype(np.float64)
    z0 = f["z0"].astype(np.float64)
    cot = np.sinh(f["eta"].astype(np.float64))
    kappa = curvature(f["charge"].astype(np.float64), pt, det.solenoid.field)
    x0, y0 = d0 * np.sin(phi), -d0 * np.cos(phi)
    ends = np.stack([
        cylinder_crossing(x0, y0, phi, kappa, det.tracker.outer_radius),
        plane_crossing(z0, cot, det.tracker.outer_z),
        plane_crossing(z0, cot, -det.tracker.outer_z),
        np.pi / np.abs(kappa),
    ])
    s_max = np.nanmin(np.where(np.isfinite(ends), ends, np.inf), axis=0)
    s_max = np.where(np.isfinite(s_max), s_max, det.tracker.outer_radius)
    s = s_max[:, None] * np.linspace(0.0, 1.0, n_points)[None, :]
    x, y, _ = position(x0[:, None], y0[:, None], phi[:, None], kappa[:, None], s)
    z = z0[:, None] + cot[:, None] * s
    return x, y, z


def cluster_positions(clusters: Collection, detector: Detector | None = None) -> tuple[np.ndarray, ...]:
    """Where each cluster's axis meets the front face of its calorimeter (cm)."""
    det = detector or default_detector()
    eta = clusters.fields["eta"].astype(np.float64)
    phi = clusters.fields["phi"].astype(np.float64)
    calo = clusters.fields.get("calorimeter")
    hcal = np.zeros(len(eta), bool) if calo is None else calo == 2
    ecal_edge = det.calorimeter.ecal.barrel.eta_max
    hcal_edge = det.calorimeter.hcal.barrel.eta_max
    barrel = np.where(hcal, np.abs(eta) < hcal_edge, np.abs(eta) < ecal_edge)
    code = np.where(hcal, np.where(barrel, CaloSubdetector.HCAL_BARREL, CaloSubdetector.HCAL_ENDCAP),
                    np.where(barrel, CaloSubdetector.ECAL_BARREL, CaloSubdetector.ECAL_ENDCAP))
    return det.cell_position(code, eta, phi)


def column(values: np.ndarray) -> list[Any]:
    """A numpy column as a JSON-ready list: floats rounded, NaN and infinities as null."""
    a = np.asarray(values)
    if a.dtype.kind == "f":
        a = np.round(a.astype(np.float64), DECIMALS)
        bad = ~np.isfinite(a)
        if bad.any():
            a = a.astype(object)
            a[bad] = None
    return a.tolist()  # type: ignore[no-any-return]


def energy_of(fields: dict[str, np.ndarray]) -> np.ndarray:
    """Energy of massive or massless objects from pt, eta and (when present) mass."""
    pt = fields["pt"].astype(np.float64)
    p = pt * np.cosh(fields["eta"].astype(np.float64))
    mass = fields.get("mass")
    return p if mass is None else np.sqrt(p * p + mass.astype(np.float64) ** 2)


def _relation(rel: Relation, content: EventContent) -> dict[str, Any]:
    """Indices as flat lists: object k links ``indices[offsets[k]:offsets[k+1]]`` (many) or ``indices[k]``."""
    out: dict[str, Any] = {"target": rel.target, "role": content.role_of(rel.target), "many": rel.many,
                           "indices": rel.indices.tolist()}
    if rel.offsets is not None:
        out["offsets"] = rel.offsets.tolist()
    return out


def _objects(content: EventContent, det: Detector) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for role, coll in content.collections.items():
        entry: dict[str, Any] = {
            "collection": coll.name, "type": coll.type, "n": len(coll),
            "fields": {name: column(values) for name, values in coll.fields.items()},
            "relations": {rname: _relation(rel, content) for rname, rel in coll.relations.items()},
        }
        if role == "tracks" and len(coll):
            x, y, z = helix_points(coll, det)
            entry["path"] = {"points": x.shape[1], "x": column(x.ravel()), "y": column(y.ravel()),
                             "z": column(z.ravel())}
        elif role == "tracks":
            entry["path"] = {"points": HELIX_POINTS, "x": [], "y": [], "z": []}
        if role == "clusters":
            x, y, z = cluster_positions(coll, det)
            entry["position"] = {"x": column(x), "y": column(y), "z": column(z)}
        if role in ("jets", "muons", "electrons", "photons", "taus"):
            entry["energy"] = column(energy_of(coll.fields))
        if role == "jets":
            entry["cone_r"] = JET_CONE
        out[role] = entry
    return out


def scene_of(content: EventContent, detector: Detector | None = None) -> dict[str, Any]:
    """The scene of an event already read (see :func:`giod.display.content.load_event`)."""
    det = detector or default_detector()
    cells = content.collections.get("cells")
    return {
        "format": FORMAT,
        "units": {"length": "cm", "energy": "GeV", "angle": "rad"},
        "dataset": content.dataset,
        "entry": content.entry,
        "version": content.version,
        "database": content.database,
        "run": content.run,
        "event": content.event,
        "detector": detector_geometry(det),
        "objects": _objects(content, det),
        "met": content.met,
        "tags": {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in content.tags.items()},
        "notes": content.notes,
        "stats": {role: len(c) for role, c in content.collections.items()}
        | ({"cell_energy_max": float(cells.fields["energy"].max())} if cells is not None and len(cells) else {}),
    }


def event_scene(dataset: Any, entry: int, *, detector: Detector | None = None) -> dict[str, Any]:
    """The scene of event ``entry`` of ``dataset`` (NotFound, DataError for bad input)."""
    return scene_of(load_event(dataset, entry), detector)
