"""One event in the HSF Phoenix event-data format, so that it opens in Phoenix as it is.

The answer is ``{"<event key>": event}`` where the event holds ``event
number`` and ``run number`` (each only when the event has one: none is
invented for a file without them), the dataset and entry, and one entry per
Phoenix object type, each a dict of collections named as in giod:

* ``Tracks``: ``pos`` (points along the helix), ``dparams`` (d0, z0, phi,
  theta, q/p), ``pT``, ``eta``, ``phi``, ``d0``, ``z0``, ``charge``, ``chi2``,
  ``dof``, and ``hits`` (indices into the event's hit collection);
* ``Hits``: ``[x, y, z]`` points;
* ``CaloCells``: ``energy``, ``eta``, ``phi``, and ``radius``/``z`` of the
  cell's front face, so that each box sits where the detector has it;
* ``CaloClusters``: ``energy``, ``eta``, ``phi``, ``radius``/``z`` where the
  cluster's axis meets its calorimeter's face (Phoenix 3.0.5 draws a cluster
  without them at NaN), ``cells`` (indices);
* ``Jets``: ``eta``, ``phi``, ``energy``, ``coneR``, ``pT``, ``mass``, and
  their constituents as ``LinkedTracks``/``LinkedClusters``
  (``"collection:index"``, Phoenix's form of a link) besides the plain
  ``tracks``/``clusters`` indices;
* ``Muons``, ``Electrons``, ``Photons`` (and taus as ``Jets``): ``pt`` (which
  Phoenix's loader extrapolates from) and ``pT`` (what its cuts are named),
  ``eta``, ``phi``, ``energy``, ``charge``, and ``pdgId`` signed as Phoenix
  reads it (the sign of the charge), with the PDG-convention id as
  ``pdgIdPDG``; ``LinkedTracks``/``LinkedClusters`` where the collection has a
  relation to the event's tracks or clusters, else Phoenix extrapolates them
  from the origin;
* ``MissingEnergy``: ``etx``, ``ety``.

Units follow Phoenix's own defaults, which are scaled for millimetres and
MeV (a jet of energy E is drawn 0.2·E long, calorimeter boxes sit at radii
of 1700–1800): lengths in mm, energies and momenta in MeV. ``units`` in the
event says so as a string: Phoenix takes every object-valued key of an event
for a type of collections. Every other key Phoenix does not know is shown as
decoration.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from giod.display.content import EventContent, load_event
from giod.display.scene import JET_CONE, cluster_positions, column, default_detector, energy_of, helix_points
from giod.physics.detector import Detector

__all__ = ["MEV", "MM", "UNITS", "event_key", "phoenix_event", "phoenix_of"]

MM = 10.0  # per cm
MEV = 1000.0  # per GeV
UNITS = "length mm, energy MeV"
_COMPOUND = {"muons": "Muons", "electrons": "Electrons", "photons": "Photons"}
#: |PDG id| of a role's particles, for collections that store a charge but no id.
_PDG = {"muons": 13, "electrons": 11, "photons": 22}
#: Which Phoenix link key a relation to a role becomes.
_LINKS = {"tracks": "LinkedTracks", "clusters": "LinkedClusters"}


def event_key(content: EventContent) -> str:
    """The key naming the event in a Phoenix file: dataset, run and event number (or entry)."""
    if content.run is not None and content.event is not None:
        return f"{content.dataset} run {content.run} event {content.event}"
    return f"{content.dataset} entry {content.entry}"


def _records(columns: dict[str, list[Any]]) -> list[dict[str, Any]]:
    names = list(columns)
    return [dict(zip(names, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def phoenix_of(content: EventContent, detector: Detector | None = None) -> dict[str, Any]:
    """The Phoenix event-data dict of an event already read."""
    det = detector or default_detector()
    event: dict[str, Any] = {}
    # only numbers the event has: Phoenix shows "Run / Event" from these keys and leaves out what is absent
    if content.event is not None:
        event["event number"] = content.event
    if content.run is not None:
        event["run number"] = content.run
    event |= {
        "dataset": content.dataset,
        "entry": content.entry,
        "giod version": content.version,
        "units": UNITS,
    }
    colls = content.collections
    hits = colls.get("hits")
    if hits is not None:
        xyz = np.stack([hits.fields[k].astype(np.float64) * MM for k in ("x", "y", "z")], axis=1)
        event["Hits"] = {hits.name: column(xyz)}
    tracks = colls.get("tracks")
    if tracks is not None:
        event["Tracks"] = {tracks.name: _tracks(tracks, det)}
    cells = colls.get("cells")
    if cells is not None:
        event["CaloCells"] = {cells.name: _cells(cells, det)}
    clusters = colls.get("clusters")
    if clusters is not None:
        f = clusters.fields
        x, y, z = cluster_positions(clusters, det)
        cols = {"energy": column(f["energy"] * MEV), "eta": column(f["eta"]), "phi": column(f["phi"]),
                "radius": column(np.hypot(x, y) * MM), "z": column(np.abs(z) * MM)}
        if "cells" in clusters.relations:
            cols["cells"] = clusters.relations["cells"].lists()
        event["CaloClusters"] = {clusters.name: _records(cols)}
    jets: dict[str, Any] = {}
    for role in ("jets", "taus"):
        coll = colls.get(role)
        if coll is None:
            continue
        f = coll.fields
        cols = {"eta": column(f["eta"]), "phi": column(f["phi"]), "energy": column(energy_of(f) * MEV),
                "coneR": [JET_CONE if role == "jets" else 0.1] * len(coll), "pT": column(f["pt"] * MEV)}
        if "mass" in f:
            cols["mass"] = column(f["mass"] * MEV)
        for rname in ("tracks", "clusters"):
            if rname in coll.relations:
                cols[rname] = coll.relations[rname].lists()
        cols |= _links(coll, content)
        jets[coll.name] = _records(cols)
    if jets:
        event["Jets"] = jets
    for role, kind in _COMPOUND.items():
        coll = colls.get(role)
        if coll is None:
            continue
        f = coll.fields
        pt = column(f["pt"] * MEV)
        cols = {"pt": pt, "pT": pt, "eta": column(f["eta"]), "phi": column(f["phi"]),
                "energy": column(energy_of(f) * MEV)}
        cols |= _charge_and_id(coll)
        cols |= _links(coll, content)
        event[kind] = {coll.name: _records(cols)}
    if content.met is not None:
        pt, phi = content.met["pt"], content.met["phi"]
        if math.isfinite(pt) and math.isfinite(phi):
            event["MissingEnergy"] = {"met": [{"etx": round(pt * math.cos(phi) * MEV, 1),
                                               "ety": round(pt * math.sin(phi) * MEV, 1)}]}
    return {event_key(content): event}


def _charge_and_id(coll: Any) -> dict[str, list[Any]]:
    """``charge``, Phoenix's ``pdgId`` (signed as the charge) and ``pdgIdPDG`` of a lepton or photon collection."""
    f = coll.fields
    pdg = f.get("pdgId")
    if coll.role == "photons":  # neutral: Phoenix draws a cluster, the sign does not matter
        out = {"pdgId": column(pdg) if pdg is not None else [_PDG["photons"]] * len(coll)}
        return out | ({"charge": column(f["charge"])} if "charge" in f else {})
    if "charge" in f:
        charge = f["charge"].astype(np.int64)
    elif pdg is not None:
        charge = -np.sign(pdg).astype(np.int64)  # PDG: negative leptons have positive ids
    else:
        return {}
    size = np.abs(pdg).astype(np.int64) if pdg is not None else np.full(len(coll), _PDG[coll.role], np.int64)
    # Phoenix's loader takes the charge of a lepton it extrapolates as `pdgId > 0 ? 1 : -1`, the
    # opposite of the PDG convention (an e+ is -11); like Phoenix's ATLAS loader, give it the
    # charge's sign.
    out = {"charge": column(charge), "pdgId": column(np.sign(charge) * size)}
    if pdg is not None:
        out["pdgIdPDG"] = column(pdg)
    return out


def _links(coll: Any, content: EventContent) -> dict[str, list[list[str]]]:
    """Relations to the event's tracks and clusters as Phoenix links, ``"collection:index"``."""
    out: dict[str, list[list[str]]] = {}
    for rel in coll.relations.values():
        role = content.role_of(rel.target)
        if role in _LINKS and _LINKS[role] not in out:
            out[_LINKS[role]] = [[f"{rel.target}:{i}" for i in idx] for idx in rel.lists()]
    return out


def _tracks(tracks: Any, det: Detector) -> list[dict[str, Any]]:
    f = tracks.fields
    if not len(tracks):
        return []
    x, y, z = helix_points(tracks, det)
    pos = np.round(np.stack([x, y, z], axis=2) * MM, 2).tolist()
    theta = 2 * np.arctan(np.exp(-f["eta"].astype(np.float64)))
    p = f["pt"].astype(np.float64) * np.cosh(f["eta"].astype(np.float64)) * MEV
    q_over_p = np.where(p > 0, f["charge"].astype(np.float64) / np.where(p > 0, p, 1), 0.0)
    dparams = np.stack([f["d0"] * MM, f["z0"] * MM, f["phi"], theta, q_over_p], axis=1)
    cols: dict[str, list[Any]] = {
        "pos": pos,
        "dparams": [[float(f"{v:.6g}") for v in row] for row in dparams.tolist()],
        "pT": column(f["pt"] * MEV), "eta": column(f["eta"]), "phi": column(f["phi"]),
        "d0": column(f["d0"] * MM), "z0": column(f["z0"] * MM), "charge": column(f["charge"]),
    }
    if "chi2" in f:
        cols["chi2"] = column(f["chi2"])
    if "ndf" in f:
        cols["dof"] = column(f["ndf"])
    if "hits" in tracks.relations:
        cols["hits"] = tracks.relations["hits"].lists()
    return _records(cols)


def _cells(cells: Any, det: Detector) -> list[dict[str, Any]]:
    f = cells.fields
    x, y, z = det.cell_position(f["subdetector"], f["eta"], f["phi"])
    cols = {"energy": column(f["energy"] * MEV), "eta": column(f["eta"]), "phi": column(f["phi"]),
            "radius": column(np.hypot(x, y) * MM), "z": column(np.abs(z) * MM),
            "subdetector": column(f["subdetector"])}
    return _records(cols)


def phoenix_event(dataset: Any, entry: int, *, detector: Detector | None = None) -> dict[str, Any]:
    """Event ``entry`` of ``dataset`` as Phoenix event data (NotFound, DataError for bad input)."""
    return phoenix_of(load_event(dataset, entry), detector)
