"""Anti-kt jets with fastjet, many events at once, and tracks associated as ghosts.

``cluster_jets`` runs anti-kt (R = 0.4 by default) on calorimeter clusters
taken as massless four-vectors from the origin. Tracks join the clustering
as *ghosts*: their momenta scaled by :data:`GHOST_SCALE`, so that they end up
in the jet they point into without changing any jet. fastjet's awkward
interface clusters all events in one call; its constituent indices, local to
each event, are split back into cluster and track indices for the
``Jet.clusters`` and ``Jet.tracks`` relations. Jet four-momenta are summed
from the cluster constituents alone.

``particle_jets`` clusters generator particles the same way (the truth jets
of the validation and of the calibration).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import awkward as ak
import numpy as np

from giod.errors import MissingDependency
from giod.physics.layout import stable_order

__all__ = ["GHOST_SCALE", "RawJets", "cluster_jets", "particle_jets"]

#: Ghost tracks carry this fraction of their momentum into the clustering.
GHOST_SCALE = 1e-9


@dataclass(frozen=True)
class RawJets:
    """Jets of many events, uncalibrated, as flat columns in event order."""

    n_per_event: np.ndarray
    px: np.ndarray
    py: np.ndarray
    pz: np.ndarray
    e: np.ndarray
    n_clusters: np.ndarray  # cluster constituents per jet
    clusters: np.ndarray  # their event-local indices, flat
    n_tracks: np.ndarray  # ghost-associated tracks per jet
    tracks: np.ndarray

    @property
    def pt(self) -> np.ndarray:
        return np.hypot(self.px, self.py)

    @property
    def eta(self) -> np.ndarray:
        return np.arcsinh(self.pz / np.maximum(self.pt, 1e-12))

    @property
    def phi(self) -> np.ndarray:
        return np.arctan2(self.py, self.px)

    @property
    def mass(self) -> np.ndarray:
        p2 = self.px**2 + self.py**2 + self.pz**2
        return np.sqrt(np.maximum(self.e**2 - p2, 0.0))


@functools.cache
def _fastjet():
    try:
        import fastjet
    except ImportError as exc:
        raise MissingDependency("jet finding needs fastjet: pip install 'giod[physics]'") from exc
    with _quiet_stdout():  # fastjet prints a banner on first use; print it to nowhere now
        fastjet._swig.ClusterSequence.print_banner()
    return fastjet


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1 at all: nothing to protect
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def _massless(pt: np.ndarray, eta: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, ...]:
    pz = pt * np.sinh(eta)
    return pt * np.cos(phi), pt * np.sin(phi), pz, np.hypot(pt, pz)


def _antikt(counts: np.ndarray, px: np.ndarray, py: np.ndarray, pz: np.ndarray, e: np.ndarray,
            radius: float, min_pt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Jets per event, constituents per jet and flat event-local constituent indices."""
    fastjet = _fastjet()
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    record = ak.contents.RecordArray(
        [ak.contents.NumpyArray(np.ascontiguousarray(c, dtype=np.float64)) for c in (px, py, pz, e)],
        ["px", "py", "pz", "E"], parameters={"__record__": "Momentum4D"},
    )
    particles = ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(offsets), record))
    sequence = fastjet.ClusterSequence(particles, fastjet.JetDefinition(fastjet.antikt_algorithm, radius))
    index = sequence.constituent_index(min_pt)
    n_jets = np.asarray(ak.num(index, axis=1), dtype=np.int64)
    per_jet = ak.flatten(index, axis=1)
    n_constituents = np.asarray(ak.num(per_jet, axis=1), dtype=np.int64)
    return n_jets, n_constituents, np.asarray(ak.flatten(per_jet, axis=1), dtype=np.int64)


def cluster_jets(
    n_clusters: np.ndarray, energy: np.ndarray, eta: np.ndarray, phi: np.ndarray,
    n_tracks: np.ndarray, track_pt: np.ndarray, track_eta: np.ndarray, track_phi: np.ndarray,
    *, radius: float = 0.4, min_pt: float = 5.0,
) -> RawJets:
    """Anti-kt jets of clusters (flat, ``n_clusters`` per event) with tracks as ghosts."""
    n_clusters = np.asarray(n_clusters, dtype=np.int64)
    n_tracks = np.asarray(n_tracks, dtype=np.int64)
    n_events = len(n_clusters)
    c4 = _massless(energy / np.cosh(eta), eta, phi)
    g4 = _massless(GHOST_SCALE * track_pt, track_eta, track_phi)
    # Per event: its clusters, then its ghosts.
    cl_event = np.repeat(np.arange(n_events), n_clusters)
    tr_event = np.repeat(np.arange(n_events), n_tracks)
    order = stable_order(np.concatenate([cl_event, tr_event]))
    merged = [np.concatenate([c, g])[order] for c, g in zip(c4, g4, strict=True)]
    n_jets, n_const, index = _antikt(n_clusters + n_tracks, merged[0], merged[1], merged[2], merged[3],
                                    radius, min_pt * (1 - 1e-9))

    jet_event = np.repeat(np.arange(n_events), n_jets)
    const_jet = np.repeat(np.arange(len(n_const)), n_const)
    const_event = jet_event[const_jet]
    is_cluster = index < n_clusters[const_event]
    cl_off = np.concatenate([[0], np.cumsum(n_clusters)[:-1]]).astype(np.int64)
    # Sum the cluster constituents (the ghosts stay out of the jet momenta).
    glob = cl_off[const_event[is_cluster]] + index[is_cluster]
    jet_of = const_jet[is_cluster]
    sums = [np.bincount(jet_of, weights=c[glob], minlength=len(n_const)) for c in c4]
    cl_idx = index[is_cluster]
    tr_idx = index[~is_cluster] - n_clusters[const_event[~is_cluster]]
    tr_jet = const_jet[~is_cluster]
    return RawJets(
        n_per_event=n_jets,
        px=sums[0], py=sums[1], pz=sums[2], e=sums[3],
        n_clusters=np.bincount(jet_of, minlength=len(n_const)),
        clusters=cl_idx[_by_jet_then_index(jet_of, cl_idx)],
        n_tracks=np.bincount(tr_jet, minlength=len(n_const)),
        tracks=tr_idx[_by_jet_then_index(tr_jet, tr_idx)],
    )


def _by_jet_then_index(jet: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Order putting constituents jet by jet, by increasing index within each jet."""
    span = int(index.max()) + 1 if len(index) else 1
    return stable_order(jet * span + index)


def particle_jets(
    n_particles: np.ndarray, px: np.ndarray, py: np.ndarray, pz: np.ndarray, e: np.ndarray,
    *, radius: float = 0.4, min_pt: float = 5.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Anti-kt jets of particles given as flat four-momenta: jets per event, then px, py, pz, E."""
    n_particles = np.asarray(n_particles, dtype=np.int64)
    n_events = len(n_particles)
    n_jets, n_const, index = _antikt(n_particles, px, py, pz, e, radius, min_pt)
    jet_event = np.repeat(np.arange(n_events), n_jets)
    off = np.concatenate([[0], np.cumsum(n_particles)[:-1]]).astype(np.int64)
    const_jet = np.repeat(np.arange(len(n_const)), n_const)
    glob = off[jet_event[const_jet]] + index
    sums = [np.bincount(const_jet, weights=np.asarray(c, dtype=np.float64)[glob], minlength=len(n_const))
            for c in (px, py, pz, e)]
    return n_jets, sums[0], sums[1], sums[2], sums[3]
