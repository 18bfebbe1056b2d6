"""Reconstruction: raw tracker hits and calorimeter cells -> tracks, clusters, jets, tags.

``reconstruct(events, detector)`` takes events with ``tracker_hits`` and
``calo_cells`` (and the ``run``/``event`` tags, copied through) and returns
the ``reco`` collections and every tag of the physics model, ready to be
written as a later pass beside the raw containers. Relations are event-local
indices: ``Track.hits`` into ``tracker_hits``, ``Cluster.cells`` into
``calo_cells``, ``Jet.tracks`` into ``tracks`` and ``Jet.clusters`` into
``clusters``. All events are processed together:

* tracks: :mod:`giod.physics.tracking` (pixel seeds, road search, helix fit),
  ordered by decreasing pT;
* clusters: :mod:`giod.physics.clustering` (topological 4-2-0), calibrated
  with the cluster scale, ordered by decreasing energy;
* jets: :mod:`giod.physics.jets` (anti-kt R = 0.4 on clusters, tracks as
  ghosts), corrected with the jet energy scale of
  :mod:`giod.physics.calibration`; kept above ``jet_pt_min`` (calibrated),
  ordered by decreasing pT;
* missing transverse energy: minus the vector sum of the calibrated
  clusters, with the jet corrections propagated (type-1);
* tags: see ``model.yaml``.
"""

from __future__ import annotations

import functools
from typing import Any

import awkward as ak
import numpy as np

from giod.errors import DataError
from giod.physics.calibration import Calibration
from giod.physics.clustering import ECAL, ClusteringSettings, find_clusters
from giod.physics.detector import Detector
from giod.physics.jets import RawJets, cluster_jets
from giod.physics.layout import build_collection, make_events, tag_dtypes
from giod.physics.lists import starts, take_lists
from giod.physics.tracking import TrackingSettings, find_tracks

__all__ = ["CELL_FIELDS", "HIT_FIELDS", "TAG_JET_ETA", "TAG_JET_PT", "reconstruct", "warm_up"]

#: Raw fields the reconstruction reads.
HIT_FIELDS = ("x", "y", "z", "layer")
CELL_FIELDS = ("subdetector", "ieta", "iphi", "eta", "phi", "energy")
#: The jets counted in the njets and ht tags.
TAG_JET_PT, TAG_JET_ETA = 30.0, 2.5


def reconstruct(
    events: ak.Array,
    detector: Detector | None = None,
    *,
    calibration: Calibration | None = None,
    tracking: TrackingSettings | None = None,
    clustering: ClusteringSettings | None = None,
    jet_radius: float = 0.4,
    jet_pt_min: float = 20.0,
) -> ak.Array:
    """The ``tracks``, ``clusters`` and ``jets`` of ``events``, and all tags.

    ``calibration`` defaults to the one shipped in the package; ``run`` and
    ``event`` are copied when the events carry them (else 0 and the row number).
    """
    detector = detector or _packaged_detector()
    calibration = calibration or _packaged_calibration()
    hits = _columns(events, "tracker_hits", HIT_FIELDS)
    cells = _columns(events, "calo_cells", CELL_FIELDS)
    n_events = len(events)

    tracks = _tracks(hits, detector, tracking, n_events)
    clusters = _clusters(cells, detector, clustering, calibration)
    raw = cluster_jets(
        clusters["n"], clusters["energy"], clusters["eta"], clusters["phi"],
        tracks["n"], tracks["pt"], tracks["eta"], tracks["phi"],
        radius=jet_radius, min_pt=min(5.0, jet_pt_min),
    )
    jets = _jets(raw, clusters, tracks, calibration, jet_pt_min)

    collections = {
        "tracks": build_collection("tracks", _fields(tracks, "hits"), tracks["n"]),
        "clusters": build_collection("clusters", _fields(clusters, "cells"), clusters["n"]),
        "jets": build_collection("jets", _fields(jets, "tracks", "clusters"), jets["n"]),
    }
    return make_events(collections, _tags(events, n_events, tracks, clusters, jets))


_packaged_detector = functools.cache(Detector.load)
_packaged_calibration = functools.cache(Calibration.load)


def warm_up(detector: Detector | None = None) -> None:
    """Compile the track finder and the clustering now (or load them from numba's cache).

    The first call on a machine compiles for a while; calling this in a
    parent process before starting workers lets them load the compiled code.
    """
    detector = detector or _packaged_detector()
    empty, codes = np.zeros(0), np.zeros(0, dtype=np.int64)
    offsets = np.zeros(1, dtype=np.int64)
    find_tracks(offsets, empty, empty, empty, codes, detector)
    find_clusters(offsets, codes, codes, codes, empty, empty, empty, detector)


def _columns(events: ak.Array, collection: str, fields: tuple[str, ...]) -> dict[str, np.ndarray]:
    if collection not in ak.fields(events):
        raise DataError(f"reconstruction needs events with a {collection!r} collection")
    coll = events[collection]
    missing = [f for f in fields if f not in ak.fields(coll)]
    if missing:
        raise DataError(f"{collection} lacks the fields {', '.join(missing)} that reconstruction reads")
    out = {f: ak.to_numpy(ak.flatten(coll[f], axis=1)) for f in fields}
    n = np.asarray(ak.num(coll, axis=1), dtype=np.int64)
    out["offsets"] = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
    return out


def _fields(columns: dict[str, np.ndarray], *relations: str) -> dict[str, Any]:
    """The model fields of a collection from the working columns (relations as (counts, values))."""
    out: dict[str, Any] = {k: v for k, v in columns.items() if k != "n" and not k.startswith("_")}
    for rel in relations:
        out[rel] = (columns[f"_n_{rel}"], columns[f"_{rel}"])
    return out


def _tracks(hits: dict, detector: Detector, settings: TrackingSettings | None, n_events: int) -> dict:
    event, params, n_hits, hit_index = find_tracks(
        hits["offsets"], hits["x"], hits["y"], hits["z"], hits["layer"], detector, settings)
    order = np.lexsort((-params["pt"], event))  # by event, highest pT first
    n_hits_sorted, hit_sorted = take_lists(n_hits, hit_index, order)
    out = {name: values[order] for name, values in params.items()}
    out["n"] = np.bincount(event, minlength=n_events)
    out["_n_hits"], out["_hits"] = n_hits_sorted, hit_sorted
    return out


def _clusters(cells: dict, detector: Detector, settings: ClusteringSettings | None,
              calibration: Calibration) -> dict:
    found = find_clusters(cells["offsets"], cells["subdetector"], cells["ieta"], cells["iphi"], cells["eta"],
                          cells["phi"], cells["energy"], detector, settings)
    cols = found.columns
    out = dict(cols)
    out["energy"] = cols["raw_energy"] * calibration.cluster_scale(cols["calorimeter"])
    # Calibration can reorder clusters of different calorimeters: most energetic first again.
    event = np.repeat(np.arange(len(found.n_per_event)), found.n_per_event)
    order = np.lexsort((-out["energy"], event))
    out = {k: v[order] for k, v in out.items()}
    out["n"] = found.n_per_event
    out["_n_cells"], out["_cells"] = take_lists(found.n_cells, found.cells, order)
    return out


def _jets(raw: RawJets, clusters: dict, tracks: dict, calibration: Calibration, pt_min: float) -> dict:
    n_events = len(raw.n_per_event)
    raw_pt, eta, phi, raw_mass = raw.pt, raw.eta, raw.phi, raw.mass
    factor = calibration.jet_factor(raw_pt, eta)
    pt = raw_pt * factor
    jet_event = np.repeat(np.arange(n_events), raw.n_per_event)
    keep = np.flatnonzero(pt >= pt_min)
    order = keep[np.lexsort((-pt[keep], jet_event[keep]))]
    n_cl, cl_idx = take_lists(raw.n_clusters, raw.clusters, order)
    n_tr, tr_idx = take_lists(raw.n_tracks, raw.tracks, order)

    # Energy shares: ECAL over all clusters, and track pT over the calibrated jet pT.
    cl_glob = np.repeat(starts(clusters["n"])[jet_event[order]], n_cl) + cl_idx
    cl_jet = np.repeat(np.arange(len(order)), n_cl)
    e = clusters["energy"][cl_glob]
    ecal = np.bincount(cl_jet, weights=np.where(clusters["calorimeter"][cl_glob] == ECAL, e, 0.0),
                       minlength=len(order)).astype(np.float64)
    total = np.bincount(cl_jet, weights=e, minlength=len(order)).astype(np.float64)
    tr_glob = np.repeat(starts(tracks["n"])[jet_event[order]], n_tr) + tr_idx
    tr_pt = np.bincount(np.repeat(np.arange(len(order)), n_tr), weights=tracks["pt"][tr_glob],
                        minlength=len(order))
    return {
        "pt": pt[order], "eta": eta[order], "phi": phi[order], "mass": (raw_mass * factor)[order],
        "raw_pt": raw_pt[order],
        "em_fraction": np.divide(ecal, total, out=np.zeros_like(total), where=total > 0),
        "charged_fraction": tr_pt / pt[order],
        "n": np.bincount(jet_event[order], minlength=n_events),
        "_n_tracks": n_tr, "_tracks": tr_idx, "_n_clusters": n_cl, "_clusters": cl_idx,
    }


def _leading(values: np.ndarray, n: np.ndarray, rank: int) -> np.ndarray:
    """The ``rank``-th value of each event's (sorted) list, 0 where the list is shorter."""
    first = starts(n)
    has = n > rank
    out = np.zeros(len(n))
    out[has] = values[first[has] + rank]
    return out


def _tags(events: ak.Array, n_events: int, tracks: dict, clusters: dict, jets: dict) -> dict[str, np.ndarray]:
    fields = ak.fields(events)
    tags: dict[str, np.ndarray] = {
        "run": ak.to_numpy(events["run"]) if "run" in fields else np.zeros(n_events),
        "event": ak.to_numpy(events["event"]) if "event" in fields else np.arange(n_events),
    }
    jet_event = np.repeat(np.arange(n_events), jets["n"])
    good = (jets["pt"] > TAG_JET_PT) & (np.abs(jets["eta"]) < TAG_JET_ETA)
    tags["njets"] = np.bincount(jet_event[good], minlength=n_events)
    tags["ht"] = np.bincount(jet_event[good], weights=jets["pt"][good], minlength=n_events)

    cl_event = np.repeat(np.arange(n_events), clusters["n"])
    et = clusters["energy"] / np.cosh(clusters["eta"])
    mex = -np.bincount(cl_event, weights=et * np.cos(clusters["phi"]), minlength=n_events)
    mey = -np.bincount(cl_event, weights=et * np.sin(clusters["phi"]), minlength=n_events)
    # Type-1 correction: the jets' calibration moves the missing momentum too.
    shift = jets["pt"] - jets["raw_pt"]
    mex -= np.bincount(jet_event, weights=shift * np.cos(jets["phi"]), minlength=n_events)
    mey -= np.bincount(jet_event, weights=shift * np.sin(jets["phi"]), minlength=n_events)
    tags["met"] = np.hypot(mex, mey)
    tags["met_phi"] = np.arctan2(mey, mex)
    tags["sum_et"] = np.bincount(cl_event, weights=et, minlength=n_events)

    tags["lead_jet_pt"] = _leading(jets["pt"], jets["n"], 0)
    tags["lead_jet_eta"] = _leading(jets["eta"], jets["n"], 0)
    tags["sublead_jet_pt"] = _leading(jets["pt"], jets["n"], 1)
    p4 = [_leading(c, jets["n"], r) for r in (0, 1) for c in _four_momentum(jets)]
    e, px, py, pz = (p4[i] + p4[i + 4] for i in range(4))
    two = jets["n"] >= 2
    tags["mjj"] = np.where(two, np.sqrt(np.maximum(e**2 - px**2 - py**2 - pz**2, 0.0)), 0.0)
    eta1, eta2 = _leading(jets["eta"], jets["n"], 0), _leading(jets["eta"], jets["n"], 1)
    tags["dijet_deta"] = np.where(two, np.abs(eta1 - eta2), 0.0)
    tags["ntracks"] = tracks["n"]
    tags["nclusters"] = clusters["n"]
    missing = set(tag_dtypes()) - set(tags)
    if missing:  # pragma: no cover - the model and this function must agree
        raise DataError(f"reconstruction does not fill the tags {sorted(missing)}")
    return tags


def _four_momentum(jets: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    pt, eta, phi, m = jets["pt"], jets["eta"], jets["phi"], jets["mass"]
    pz = pt * np.sinh(eta)
    return np.sqrt(pt**2 + pz**2 + m**2), pt * np.cos(phi), pt * np.sin(phi), pz
