"""Tracker simulation: helices through the silicon layers -> ``TrackerHit`` columns.

Every charged final-state particle produced inside the tracker volume follows
its helix from its vertex (no multiple scattering or energy loss). It leaves
at most one hit per surface: barrel cylinders (first crossing, within the
layer's half-length) and endcap disks (within r_min..r_max). The particle
stops when it leaves the tracker volume, and after half a turn: a looper that
curls back leaves no more hits. Each crossing gives a hit with the layer's
efficiency; positions are smeared in r-phi and z (barrel) or r-phi and r
(disks) and stay on the surface. Noise hits, Poisson-distributed per layer
and event, are spread uniformly over each surface with ``particle = -1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from giod.physics.detector import Detector
from giod.physics.helix import curvature, cylinder_crossing, plane_crossing, position
from giod.physics.layout import stable_order

__all__ = ["SimParticles", "simulate_tracker"]


@dataclass
class SimParticles:
    """Flat final-state particle columns handed to the detector simulation."""

    event: np.ndarray  # event row
    index: np.ndarray  # index in the event's mcparticles
    pdg: np.ndarray
    charge: np.ndarray
    px: np.ndarray
    py: np.ndarray
    pz: np.ndarray
    e: np.ndarray
    mass: np.ndarray
    vx: np.ndarray
    vy: np.ndarray
    vz: np.ndarray

    def select(self, mask: np.ndarray | slice) -> SimParticles:
        return SimParticles(**{k: v[mask] for k, v in vars(self).items()})

    @property
    def pt(self) -> np.ndarray:
        return np.hypot(self.px, self.py)


def simulate_tracker(
    particles: SimParticles, detector: Detector, n_events: int, rng: np.random.Generator
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Hit columns (sorted by event, then layer) and hits per event."""
    tracker = detector.tracker
    r0 = np.hypot(particles.vx, particles.vy)
    inside = (r0 < tracker.outer_radius) & (np.abs(particles.vz) < tracker.outer_z)
    p = particles.select((particles.charge != 0) & (particles.pt > 0.05) & inside)
    pt = p.pt
    kappa = curvature(p.charge, pt, detector.solenoid.field)
    phi0 = np.arctan2(p.py, p.px)
    cot = p.pz / pt
    r0 = np.hypot(p.vx, p.vy)

    # Where the particle stops: half a turn, or out of the tracker volume.
    s_stop = np.pi / np.abs(kappa)
    s_out = cylinder_crossing(p.vx, p.vy, phi0, kappa, np.float64(tracker.outer_radius))
    s_stop = np.fmin(s_stop, s_out)
    s_end = plane_crossing(p.vz, cot, np.sign(cot) * tracker.outer_z)
    s_stop = np.fmin(s_stop, s_end)

    parts = [_barrel_hits(p, tracker, kappa, phi0, cot, r0, s_stop, rng)]
    if tracker.endcap:
        parts.append(_disk_hits(p, tracker, kappa, phi0, cot, s_stop, rng))
    parts.append(_noise_hits(tracker, n_events, rng))
    event, x, y, z, layer, particle = (np.concatenate(c) for c in zip(*parts, strict=True))

    codes = tracker.layer_codes()
    order = stable_order(event * tracker.n_layers + layer)
    columns = {
        "x": x[order], "y": y[order], "z": z[order],
        "layer": layer[order], "subdetector": codes[layer[order]], "particle": particle[order],
    }
    return columns, np.bincount(event, minlength=n_events)


def _barrel_hits(p, tracker, kappa, phi0, cot, r0, s_stop, rng):
    layers = tracker.barrel
    radius = np.array([layer.radius for layer in layers])
    half = np.array([layer.half_length for layer in layers])
    s = cylinder_crossing(p.vx[:, None], p.vy[:, None], phi0[:, None], kappa[:, None], radius)
    z = p.vz[:, None] + s * cot[:, None]
    with np.errstate(invalid="ignore"):
        ok = (s <= s_stop[:, None]) & (np.abs(z) <= half) & (r0[:, None] < radius)
    i, j = np.nonzero(ok)
    eff = np.array([layer.efficiency for layer in layers])
    keep = rng.random(len(i)) < eff[j]
    i, j = i[keep], j[keep]
    x, y, _ = position(p.vx[i], p.vy[i], phi0[i], kappa[i], s[i, j])
    sig_rphi = np.array([layer.sigma_rphi for layer in layers])[j]
    sig_z = np.array([layer.sigma_z for layer in layers])[j]
    phi = np.arctan2(y, x) + rng.normal(0.0, 1.0, len(i)) * sig_rphi / radius[j]
    zh = z[i, j] + rng.normal(0.0, 1.0, len(i)) * sig_z
    return (p.event[i], radius[j] * np.cos(phi), radius[j] * np.sin(phi), zh,
            j.astype(np.int64), p.index[i])


def _disk_hits(p, tracker, kappa, phi0, cot, s_stop, rng):
    disks = tracker.endcap
    n_barrel, n_disks = len(tracker.barrel), len(disks)
    zd = np.array([d.z for d in disks])
    # Only the disks on the side the particle moves to: layer n_barrel + j (+z) or
    # n_barrel + n_disks + j (-z).
    side = np.sign(cot)[:, None]
    s = plane_crossing(p.vz[:, None], cot[:, None], side * zd)
    with np.errstate(invalid="ignore"):
        ok = s <= s_stop[:, None]
    i, j = np.nonzero(ok)
    x, y, _ = position(p.vx[i], p.vy[i], phi0[i], kappa[i], s[i, j])
    r = np.hypot(x, y)
    r_min = np.array([d.r_min for d in disks])[j]
    r_max = np.array([d.r_max for d in disks])[j]
    eff = np.array([d.efficiency for d in disks])[j]
    keep = (r >= r_min) & (r <= r_max) & (rng.random(len(i)) < eff)
    i, j, x, y, r = i[keep], j[keep], x[keep], y[keep], r[keep]
    sig_rphi = np.array([d.sigma_rphi for d in disks])[j]
    sig_r = np.array([d.sigma_r for d in disks])[j]
    phi = np.arctan2(y, x) + rng.normal(0.0, 1.0, len(i)) * sig_rphi / r
    r = r + rng.normal(0.0, 1.0, len(i)) * sig_r
    z_side = np.sign(cot[i])
    layer = n_barrel + j + np.where(z_side < 0, n_disks, 0)
    return (p.event[i], r * np.cos(phi), r * np.sin(phi), z_side * zd[j],
            layer.astype(np.int64), p.index[i])


def _noise_hits(tracker, n_events, rng):
    n_barrel, n_disks = len(tracker.barrel), len(tracker.endcap)
    mean = np.array([layer.noise_hits for layer in tracker.barrel]
                    + [d.noise_hits for d in tracker.endcap] * 2)
    counts = rng.poisson(mean, (n_events, len(mean)))
    event = np.repeat(np.repeat(np.arange(n_events), len(mean)), counts.ravel())
    layer = np.repeat(np.tile(np.arange(len(mean)), n_events), counts.ravel())
    n = len(layer)
    phi = rng.uniform(-np.pi, np.pi, n)
    u = rng.random(n)
    is_barrel = layer < n_barrel
    radius = np.array([lay.radius for lay in tracker.barrel] + [0.0] * (2 * n_disks))
    half = np.array([lay.half_length for lay in tracker.barrel] + [0.0] * (2 * n_disks))
    r_min = np.array([0.0] * n_barrel + [d.r_min for d in tracker.endcap] * 2)
    r_max = np.array([0.0] * n_barrel + [d.r_max for d in tracker.endcap] * 2)
    zd = np.array([0.0] * n_barrel + [d.z for d in tracker.endcap] + [-d.z for d in tracker.endcap])
    # Uniform over the surface: z uniform on a cylinder, r^2 uniform on a disk.
    r = np.where(is_barrel, radius[layer], np.sqrt(r_min[layer] ** 2 + u * (r_max[layer] ** 2 - r_min[layer] ** 2)))
    z = np.where(is_barrel, (2 * u - 1) * half[layer], zd[layer])
    return event, r * np.cos(phi), r * np.sin(phi), z, layer, np.full(n, -1, dtype=np.int64)
