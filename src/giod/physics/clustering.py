"""Topological calorimeter clustering: seeds, growth over neighbours, boundary cells.

Each calorimeter (ECAL, HCAL) is clustered on its own grid of rings and phi
sectors, as in the ATLAS "4-2-0" topological clustering:

* a cell whose energy passes ``seed`` times its noise (sigma of its section)
  starts a cluster, the most energetic seeds first;
* the cluster grows over the 8 neighbours (rings +-1 across eta = 0 and the
  barrel/endcap boundary, sectors +-1 wrapping in phi) of every member whose
  energy passes ``grow`` sigma;
* neighbours passing ``boundary`` sigma join but do not grow further.

Clusters that touch merge (the first seed takes its neighbours' cells); cells
not reached from any seed (isolated noise) belong to no cluster. The flood
fill is compiled with numba; cluster sums are vectorised with numpy.

Cluster quantities: ``raw_energy`` (sum of the cells), ``energy``
(``raw_energy`` times the calorimeter's scale from the calibration),
energy-weighted ``eta`` and ``phi`` (phi averaged about the seed, so clusters
across phi = pi are right), and their energy-weighted RMS widths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from giod.physics.compiled import njit
from giod.physics.detector import CALO_CODES, Detector
from giod.physics.layout import stable_order
from giod.physics.lists import ramp

__all__ = ["ClusteringSettings", "ECAL", "HCAL", "Thresholds", "find_clusters"]

#: ``Cluster.calorimeter`` codes.
ECAL, HCAL = 1, 2


@dataclass(frozen=True)
class ClusteringSettings:
    """Thresholds in units of each cell's noise sigma."""

    seed: float = 4.0
    grow: float = 2.0
    boundary: float = 0.0

    def __post_init__(self) -> None:
        from giod.errors import ConfigError

        if not self.seed >= self.grow >= self.boundary:
            raise ConfigError("clustering thresholds must satisfy seed >= grow >= boundary")


class Thresholds(NamedTuple):
    """The thresholds as the compiled flood fill reads them: by name, not by position."""

    seed: float
    grow: float
    boundary: float


@dataclass(frozen=True)
class Clusters:
    """Clusters of many events as flat columns (event order, most energetic first)."""

    n_per_event: np.ndarray
    columns: dict[str, np.ndarray]  # raw_energy, eta, phi, calorimeter, eta_width, phi_width
    n_cells: np.ndarray  # cells per cluster
    cells: np.ndarray  # event-local cell indices, flat in cluster order


def _sections(detector: Detector) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per ``CaloCell.subdetector`` code: calorimeter (0 ECAL, 1 HCAL), noise; and grid shapes."""
    calo = detector.calorimeter
    which = np.zeros(8, dtype=np.int64)
    noise = np.ones(8, dtype=np.float64)
    for w, name in enumerate(("ecal", "hcal")):
        cal = getattr(calo, name)
        for code, section in zip(CALO_CODES[name], (cal.barrel, cal.endcap), strict=True):
            which[int(code)] = w
            noise[int(code)] = max(section.noise, 1e-6)
    shapes = np.array([[calo.ecal.n_rings, calo.ecal.n_phi], [calo.hcal.n_rings, calo.hcal.n_phi]],
                      dtype=np.int64)
    return which, noise, shapes


def find_clusters(
    offsets: np.ndarray, subdetector: np.ndarray, ieta: np.ndarray, iphi: np.ndarray,
    eta: np.ndarray, phi: np.ndarray, energy: np.ndarray,
    detector: Detector, settings: ClusteringSettings | None = None,
) -> Clusters:
    """Cluster the cells of many events given as flat columns and event offsets."""
    settings = settings or ClusteringSettings()
    which, noise, shapes = _sections(detector)
    sub = np.asarray(subdetector, dtype=np.int64)
    if len(sub) and (sub.min() < 1 or sub.max() > 4):
        from giod.errors import DataError

        raise DataError("calorimeter cells carry subdetector codes outside 1..4")
    energy = np.asarray(energy, dtype=np.float64)
    sigma = noise[sub]
    offsets = np.asarray(offsets, dtype=np.int64)
    label = _label(offsets, which[sub], np.asarray(ieta, dtype=np.int64), np.asarray(iphi, dtype=np.int64),
                   energy / sigma, shapes, Thresholds(seed=float(settings.seed), grow=float(settings.grow),
                                                      boundary=float(settings.boundary)))
    n_events = len(offsets) - 1
    event = np.repeat(np.arange(n_events), np.diff(offsets))
    local = np.arange(len(sub)) - offsets[event]
    member = label >= 0
    # Global cluster id: clusters numbered per event in seed order (most energetic seed first).
    n_clusters = np.zeros(n_events, dtype=np.int64)
    if member.any():
        np.maximum.at(n_clusters, event[member], label[member] + 1)
    first = np.zeros(n_events + 1, dtype=np.int64)
    np.cumsum(n_clusters, out=first[1:])
    gid = first[event[member]] + label[member]
    order = stable_order(gid)
    gid, cells = gid[order], local[member][order]
    e = energy[member][order]
    cell_eta = np.asarray(eta, dtype=np.float64)[member][order]
    cell_phi = np.asarray(phi, dtype=np.float64)[member][order]
    total = int(first[-1])
    n_cells = np.bincount(gid, minlength=total)
    starts = np.zeros(total, dtype=np.int64)
    np.cumsum(n_cells[:-1], out=starts[1:])
    raw = np.bincount(gid, weights=e, minlength=total)
    # phi is averaged about the most energetic cell, so that clusters across phi = pi come out right
    seed_phi = _seed_phi(gid, e, cell_phi, total)
    dphi = np.mod(cell_phi - seed_phi[gid] + np.pi, 2 * np.pi) - np.pi
    w = e / raw[gid]
    c_eta = np.bincount(gid, weights=w * cell_eta, minlength=total)
    c_dphi = np.bincount(gid, weights=w * dphi, minlength=total)
    eta_width = np.sqrt(np.maximum(np.bincount(gid, weights=w * (cell_eta - c_eta[gid]) ** 2, minlength=total), 0))
    phi_width = np.sqrt(np.maximum(np.bincount(gid, weights=w * (dphi - c_dphi[gid]) ** 2, minlength=total), 0))
    c_phi = np.mod(seed_phi + c_dphi + np.pi, 2 * np.pi) - np.pi
    calorimeter = np.where(which[sub[member][order]][starts] == 0, ECAL, HCAL) if total else np.zeros(0)
    # Most energetic cluster first within each event.
    cl_event = np.repeat(np.arange(n_events), n_clusters)
    rank = np.lexsort((-raw, cl_event))
    columns = {
        "raw_energy": raw[rank], "eta": c_eta[rank], "phi": c_phi[rank],
        "calorimeter": np.asarray(calorimeter, dtype=np.int8)[rank],
        "eta_width": eta_width[rank], "phi_width": phi_width[rank],
    }
    cell_rank = np.repeat(starts[rank], n_cells[rank]) + ramp(n_cells[rank])
    return Clusters(n_clusters, columns, n_cells[rank], cells[cell_rank])


def _seed_phi(gid: np.ndarray, energy: np.ndarray, phi: np.ndarray, total: int) -> np.ndarray:
    """Azimuth of the most energetic cell of each cluster."""
    out = np.zeros(total)
    if total == 0:
        return out
    order = np.lexsort((-energy, gid))
    first = np.r_[True, gid[order][1:] != gid[order][:-1]]
    out[gid[order][first]] = phi[order][first]
    return out


@njit
def _label(offsets, which, ieta, iphi, significance, shapes, thresholds):
    """Cluster label of each cell (event-local, -1 for none) by flood fill from the seeds."""
    seed_cut, grow_cut, boundary_cut = thresholds.seed, thresholds.grow, thresholds.boundary
    label = np.full(len(which), -1, dtype=np.int64)
    grids = [np.full(2 * shapes[w, 0] * shapes[w, 1], -1, dtype=np.int64) for w in range(2)]
    for ev in range(len(offsets) - 1):
        lo, hi = offsets[ev], offsets[ev + 1]
        n = hi - lo
        cell_pos = np.empty(n, dtype=np.int64)
        for i in range(n):
            c = lo + i
            w = which[c]
            n_rings, n_phi = shapes[w, 0], shapes[w, 1]
            ring = ieta[c] - 1 + n_rings if ieta[c] > 0 else ieta[c] + n_rings
            cell_pos[i] = ring * n_phi + iphi[c]
            grids[w][cell_pos[i]] = i
        seeds = np.argsort(-significance[lo:hi], kind="mergesort")
        queue = np.empty(n, dtype=np.int64)
        n_labels = 0
        for k in range(n):
            s = seeds[k]
            if significance[lo + s] <= seed_cut:
                break
            if label[lo + s] >= 0:
                continue
            label[lo + s] = n_labels
            head, tail = 0, 1
            queue[0] = s
            while head < tail:
                i = queue[head]
                head += 1
                if significance[lo + i] <= grow_cut:
                    continue  # boundary cells join but do not grow
                w = which[lo + i]
                n_rings, n_phi = shapes[w, 0], shapes[w, 1]
                ring, sector = cell_pos[i] // n_phi, cell_pos[i] % n_phi
                for dr in range(-1, 2):
                    rr = ring + dr
                    if rr < 0 or rr >= 2 * n_rings:
                        continue
                    for dp in range(-1, 2):
                        if dr == 0 and dp == 0:
                            continue
                        j = grids[w][rr * n_phi + (sector + dp) % n_phi]
                        if j >= 0 and label[lo + j] < 0 and significance[lo + j] > boundary_cut:
                            label[lo + j] = n_labels
                            queue[tail] = j
                            tail += 1
            n_labels += 1
        for i in range(n):
            grids[which[lo + i]][cell_pos[i]] = -1
    return label
