"""Calorimeter simulation: showers -> ``CaloCell`` columns.

Each visible final-state particle produced inside the ECAL volume is followed
on its helix to the ECAL surface it meets first (barrel cylinder or endcap
plane) and to the HCAL surface; the impact point's eta and phi choose the
cells. Then, per particle, vectorised over all particles of all events:

* photons and electrons shower in the ECAL: energy smeared with the section's
  stochastic and constant terms, spread over a 5 x 5 window with a core + tail
  lateral profile (integrated exactly over each cell);
* hadrons: the visible energy is ``E * response(E)`` (non-compensation),
  smeared with the HCAL resolution; with the configured probability the shower
  starts in the ECAL and leaves a uniform fraction there (wide 5 x 5 profile),
  the rest in the HCAL (3 x 3 towers); otherwise a charged hadron leaves a MIP
  in the ECAL. Baryons deposit their kinetic energy, antibaryons E + m;
* muons leave Landau-like MIP deposits in one ECAL cell and one HCAL tower;
* neutrinos, and charged particles that curl up inside the tracker (that do
  not reach a calorimeter surface within half a turn), leave nothing.

Deposits are summed per cell; the cell keeps the particle that gave most of
it. Every cell with a deposit gets Gaussian noise; cells without one are
added where their noise alone passes the zero-suppression threshold (their
number drawn from a binomial, their energy from the Gaussian tail). Cells at
or below the threshold are dropped.
"""

from __future__ import annotations

import math

import numpy as np

from giod.physics.detector import CALO_CODES, Calorimeter, Detector
from giod.physics.helix import curvature, cylinder_crossing, plane_crossing, position
from giod.physics.layout import stable_order
from giod.physics.sim_tracker import SimParticles

__all__ = ["simulate_calorimeter"]

_ECAL, _HCAL = 0, 1
_NEUTRINOS = (12, 14, 16)
_EM = (11, 22)
_MUON = 13


def simulate_calorimeter(
    particles: SimParticles, detector: Detector, n_events: int, rng: np.random.Generator
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Cell columns (sorted by event, calorimeter, ieta, iphi) and cells per event."""
    calo = detector.calorimeter
    ecal, hcal = calo.ecal, calo.hcal
    apdg = np.abs(particles.pdg)
    r0 = np.hypot(particles.vx, particles.vy)
    inside = (r0 < ecal.barrel.radius) & (np.abs(particles.vz) < ecal.endcap.z)
    p = particles.select(inside & ~np.isin(apdg, _NEUTRINOS) & (particles.e > 0))
    apdg = np.abs(p.pdg)
    pt = np.maximum(p.pt, 1e-9)
    kappa = curvature(p.charge, pt, detector.solenoid.field)
    phi0 = np.arctan2(p.py, p.px)
    cot = p.pz / pt
    ecal_eta, ecal_phi, ecal_ok = _impact(p, kappa, phi0, cot, ecal)
    hcal_eta, hcal_phi, hcal_ok = _impact(p, kappa, phi0, cot, hcal)
    # A particle that curls up between the two calorimeters showers where it entered.
    hcal_eta = np.where(hcal_ok, hcal_eta, ecal_eta)
    hcal_phi = np.where(hcal_ok, hcal_phi, ecal_phi)
    ecal_u, ecal_v = _cell_coordinates(ecal, ecal_eta, ecal_phi)
    hcal_u, hcal_v = _cell_coordinates(hcal, hcal_eta, hcal_phi)
    ecal_ok &= np.abs(ecal_u) < ecal.n_rings

    em = np.isin(apdg, _EM) & ecal_ok
    muon = (apdg == _MUON) & ecal_ok
    hadron = ~np.isin(apdg, _EM) & (apdg != _MUON) & ecal_ok
    keys = _CellKeys(detector)
    deposits = []

    # Electromagnetic showers.
    i = np.flatnonzero(em)
    stoch, const = _resolution(ecal, ecal_u[i])
    energy = _smear(rng, p.e[i], stoch, const)
    shape = detector.showers.em
    profile = [(shape.core_width, 1 - shape.tail_fraction), (shape.tail_width, shape.tail_fraction)]
    deposits.append(_spread(keys, _ECAL, ecal, p.event[i], p.index[i], ecal_u[i], ecal_v[i], energy, profile, 2))

    # Hadron showers.
    i = np.flatnonzero(hadron)
    had = detector.showers.hadron
    mip = detector.showers.mip
    baryon = apdg[i] > 1000
    true_e = p.e[i] + np.where(baryon, np.where(p.pdg[i] > 0, -1.0, 1.0) * p.mass[i], 0.0)
    true_e = np.maximum(true_e, 0.0)
    stoch, const = _resolution(hcal, hcal_u[i])
    visible = _smear(rng, true_e * had.response(true_e), stoch, const)
    interacts = rng.random(len(i)) < had.ecal_interaction_probability
    in_ecal = np.where(interacts, rng.uniform(0, had.ecal_fraction_max, len(i)), 0.0) * visible
    mip_ecal = np.where(~interacts & (p.charge[i] != 0), _landau(rng, mip.ecal, mip.spread, len(i)), 0.0)
    mip_ecal = np.minimum(mip_ecal, visible)
    in_hcal = visible - in_ecal - mip_ecal
    ev, idx = p.event[i], p.index[i]
    deposits.append(_spread(keys, _ECAL, ecal, ev, idx, ecal_u[i], ecal_v[i], in_ecal, [(had.ecal_width, 1.0)], 2))
    deposits.append(_spread(keys, _ECAL, ecal, ev, idx, ecal_u[i], ecal_v[i], mip_ecal, [], 0))
    deposits.append(_spread(keys, _HCAL, hcal, ev, idx, hcal_u[i], hcal_v[i], in_hcal, [(had.hcal_width, 1.0)], 1))

    # Muons.
    i = np.flatnonzero(muon)
    for which, cal, mpv in ((_ECAL, ecal, mip.ecal), (_HCAL, hcal, mip.hcal)):
        u, v = (ecal_u[i], ecal_v[i]) if which == _ECAL else (hcal_u[i], hcal_v[i])
        energy = _landau(rng, mpv, mip.spread, len(i))
        deposits.append(_spread(keys, which, cal, p.event[i], p.index[i], u, v, energy, [], 0))

    for which, cal in ((_ECAL, ecal), (_HCAL, hcal)):
        deposits.append(_noise_cells(rng, keys, which, cal, n_events))
    return _digitise(rng, detector, keys, deposits, n_events)


def _impact(p: SimParticles, kappa, phi0, cot, cal: Calorimeter):
    """Eta and phi (seen from the origin) of the point where the particle meets ``cal``."""
    s_barrel = cylinder_crossing(p.vx, p.vy, phi0, kappa, np.float64(cal.barrel.radius))
    z_barrel = p.vz + s_barrel * cot
    with np.errstate(invalid="ignore"):
        barrel = np.abs(z_barrel) <= cal.endcap.z
    z_face = np.sign(cot) * cal.endcap.z
    s = np.where(barrel, s_barrel, plane_crossing(p.vz, cot, z_face))
    # Loopers stop after half a turn, as in the tracker.
    ok = np.isfinite(s) & (s <= np.pi / np.abs(kappa))
    s = np.where(ok, s, 0.0)
    x, y, _ = position(p.vx, p.vy, phi0, kappa, s)
    z = np.where(barrel, z_barrel, z_face)
    eta = np.arcsinh(z / np.maximum(np.hypot(x, y), 1e-6))
    return eta, np.arctan2(y, x), ok


def _cell_coordinates(cal: Calorimeter, eta: np.ndarray, phi: np.ndarray):
    """Signed ring coordinate and phi-sector coordinate (cells are unit squares)."""
    u = np.sign(eta) * cal.ring_coordinate(np.abs(eta))
    v = np.mod(phi, 2 * np.pi) * (cal.n_phi / (2 * np.pi))
    return u, v


def _resolution(cal: Calorimeter, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    barrel = np.abs(u) < cal.barrel.n_eta
    return (np.where(barrel, cal.barrel.stochastic, cal.endcap.stochastic),
            np.where(barrel, cal.barrel.constant, cal.endcap.constant))


def _smear(rng: np.random.Generator, energy: np.ndarray, stochastic, constant) -> np.ndarray:
    e = np.maximum(energy, 1e-6)
    sigma = np.sqrt(stochastic**2 * e + (constant * e) ** 2)
    return np.maximum(energy + sigma * rng.normal(0.0, 1.0, len(energy)), 0.0)


def _landau(rng: np.random.Generator, mpv: float, spread: float, n: int) -> np.ndarray:
    # A Gumbel has the Landau's long upper tail; enough for a MIP's deposit.
    return mpv * np.maximum(1.0 + spread * rng.gumbel(0.0, 1.0, n), 0.2)


def _erf(x: np.ndarray) -> np.ndarray:
    """Error function (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7)."""
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-a * a))


def _cell_weights(offset: np.ndarray, width: float, half: int) -> np.ndarray:
    """Share of a Gaussian (centred ``offset`` from the cell's low edge) in cells -half..half."""
    edges = np.arange(-half, half + 2, dtype=np.float64)  # low edges of the cells, and the last high edge
    cdf = 0.5 * (1 + _erf((edges[None, :] - offset[:, None]) / (width * math.sqrt(2))))
    return np.diff(cdf, axis=1)


class _CellKeys:
    """Packs (event, calorimeter, signed ring, phi sector) into one int64 and back."""

    def __init__(self, detector: Detector):
        cals = (detector.calorimeter.ecal, detector.calorimeter.hcal)
        self.n_ring = max(c.n_rings for c in cals)
        self.n_phi = max(c.n_phi for c in cals)

    def pack(self, event, which, ring, sector):
        return ((event * 2 + which) * (2 * self.n_ring) + (ring + self.n_ring)) * self.n_phi + sector

    def unpack(self, key):
        rest, sector = np.divmod(key, self.n_phi)
        rest, ring = np.divmod(rest, 2 * self.n_ring)
        event, which = np.divmod(rest, 2)
        return event, which, ring - self.n_ring, sector


def _spread(keys: _CellKeys, which, cal, event, index, u, v, energy, profile, half):
    """Deposits (cell key, energy, particle) of showers centred at (u, v)."""
    ku, kv = np.floor(u), np.floor(v)
    n_side = 2 * half + 1
    if profile:
        weights = np.zeros((len(u), n_side, n_side))
        for width, share in profile:
            wu = _cell_weights(u - ku, width, half)
            wv = _cell_weights(v - kv, width, half)
            weights += share * wu[:, :, None] * wv[:, None, :]
        weights /= weights.sum(axis=(1, 2), keepdims=True)  # what leaks out of the window stays in
    else:
        weights = np.ones((len(u), 1, 1))
    offsets = np.arange(-half, half + 1)
    ring = ku.astype(np.int64)[:, None, None] + offsets[None, :, None]
    sector = np.mod(kv.astype(np.int64)[:, None, None] + offsets[None, None, :], cal.n_phi)
    e = energy[:, None, None] * weights
    keep = (e > 1e-3) & (np.abs(ring + 0.5) < cal.n_rings)
    key = keys.pack(event[:, None, None], which, ring, sector)
    rows = np.broadcast_to(np.arange(len(u))[:, None, None], weights.shape)[keep]
    return key[keep], e[keep], index[rows], np.ones(len(rows), dtype=bool)


def _noise_cells(rng: np.random.Generator, keys: _CellKeys, which: int, cal: Calorimeter, n_events: int):
    """Cells without deposit whose noise alone passes zero suppression."""
    parts = []
    offset = 0
    for section in (cal.barrel, cal.endcap):
        n_cells = 2 * section.n_eta * section.n_phi
        if section.noise > 0:
            a = section.threshold / section.noise
            prob = 0.5 * math.erfc(a / math.sqrt(2))
            counts = rng.binomial(n_cells, prob, n_events)
            total = int(counts.sum())
            ring_abs = offset + rng.integers(0, section.n_eta, total)
            ring = np.where(rng.random(total) < 0.5, ring_abs, -ring_abs - 1)
            energy = section.noise * _gauss_tail(rng, a, total)
            event = np.repeat(np.arange(n_events), counts)
            key = keys.pack(event, which, ring, rng.integers(0, section.n_phi, total))
            parts.append((key, energy, np.full(total, -1), np.zeros(total, dtype=bool)))
        offset += section.n_eta
    if not parts:
        return (np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))
    return tuple(np.concatenate(c) for c in zip(*parts, strict=True))


def _gauss_tail(rng: np.random.Generator, a: float, n: int) -> np.ndarray:
    """Standard normal values conditioned on x > a > 0 (Marsaglia's tail method)."""
    out = np.empty(0)
    while len(out) < n:
        m = max(2 * (n - len(out)), 16)
        x = np.sqrt(a * a - 2 * np.log(1 - rng.random(m)))
        out = np.concatenate([out, x[rng.random(m) * x < a]])
    return out[:n]


def _digitise(rng: np.random.Generator, detector: Detector, keys: _CellKeys, deposits, n_events: int):
    key, energy, index, real = (np.concatenate(c) for c in zip(*deposits, strict=True))
    order = stable_order(key)
    key = key[order]
    starts = np.flatnonzero(np.r_[len(key) > 0, key[1:] != key[:-1]])
    energy = energy[order]
    cell_e = np.add.reduceat(energy, starts)
    has_real = np.logical_or.reduceat(real[order], starts)
    # The entry that gave most of each cell: the first position holding the cell's maximum.
    size = np.diff(np.r_[starts, len(key)])
    biggest = np.repeat(np.maximum.reduceat(energy, starts), size) == energy
    position = np.where(biggest, np.arange(len(key)), len(key))
    particle = index[order[np.minimum.reduceat(position, starts)]]
    event, which, ring, sector = keys.unpack(key[starts])

    cals = (detector.calorimeter.ecal, detector.calorimeter.hcal)
    ring_abs = np.where(ring >= 0, ring, -ring - 1)
    subdetector = np.empty(len(starts), dtype=np.int8)
    eta = np.empty(len(starts))
    noise = np.empty(len(starts))
    threshold = np.empty(len(starts))
    phi_step = np.empty(len(starts))
    for w, cal in enumerate(cals):
        sel = which == w
        barrel = ring_abs[sel] < cal.barrel.n_eta
        codes = CALO_CODES["ecal" if w == _ECAL else "hcal"]
        subdetector[sel] = np.where(barrel, codes[0], codes[1])
        noise[sel] = np.where(barrel, cal.barrel.noise, cal.endcap.noise)
        threshold[sel] = np.where(barrel, cal.barrel.threshold, cal.endcap.threshold)
        eta[sel] = np.where(ring[sel] >= 0, 1, -1) * cal.ring_eta(ring_abs[sel] + 0.5)
        phi_step[sel] = 2 * np.pi / cal.n_phi
    cell_e = cell_e + np.where(has_real, noise * rng.normal(0.0, 1.0, len(cell_e)), 0.0)
    keep = cell_e > threshold
    phi = (sector + 0.5) * phi_step
    columns = {
        "subdetector": subdetector[keep],
        "ieta": np.where(ring >= 0, ring + 1, ring)[keep],
        "iphi": sector[keep],
        "eta": eta[keep],
        "phi": np.where(phi > np.pi, phi - 2 * np.pi, phi)[keep],
        "energy": cell_e[keep],
        "particle": particle[keep],
    }
    return columns, np.bincount(event[keep], minlength=n_events)
