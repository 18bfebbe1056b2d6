"""Tracker simulation: charged particles through the silicon and its material -> ``TrackerHit`` columns.

Every charged final-state particle produced inside the tracker volume is
transported from its vertex, surface by surface in the order it meets them
(compiled with numba, :func:`_transport`): barrel layers and the passive
cylinders of ``tracker.material`` (beam pipe, supports) by radius, endcap
disks by |z|. Between surfaces it follows a helix; at each surface it crosses
within the surface's extent it loses energy and is deflected
(:mod:`giod.physics.material`): multiple scattering (Highland, two
independent angles), ionisation (Bethe mean, gamma-distributed spread) and,
for electrons, bremsstrahlung (Bethe-Heitler). The path in radiation lengths
is the surface's ``x0`` over the cosine of the angle of incidence. A particle
stops when it leaves the tracker volume, after half a turn (a looper that
curls back leaves no more hits) or when it has lost all its kinetic energy.

An active surface gives at most one hit per particle, with the layer's
efficiency; positions are smeared in r-phi and z (barrel) or r-phi and r
(disks) and stay on the surface. Noise hits, Poisson-distributed per layer
and event, are spread uniformly over each surface with ``particle = -1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from giod.physics.compiled import njit
from giod.physics.detector import C_LIGHT, Detector
from giod.physics.helix_fit import cylinder_path, position
from giod.physics.layout import stable_order
from giod.physics.material import highland, ionisation_loss

__all__ = ["SimParticles", "simulate_tracker", "surfaces", "transport"]


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
    owner, layer, x, y, z, _ = _transport(*_inputs(p, detector), rng)
    parts = [_measure(tracker, p.event[owner], p.index[owner], layer, x, y, z, rng)]
    parts.append(_noise_hits(tracker, n_events, rng))
    event, x, y, z, layer, particle = (np.concatenate(c) for c in zip(*parts, strict=True))

    codes = tracker.layer_codes()
    order = stable_order(event * tracker.n_layers + layer)
    columns = {
        "x": x[order], "y": y[order], "z": z[order],
        "layer": layer[order], "subdetector": codes[layer[order]], "particle": particle[order],
    }
    return columns, np.bincount(event, minlength=n_events)


# Columns of the surface tables.
_POS, _LOW, _HIGH, _X0, _LAYER, _LAYER_MINUS = range(6)


def surfaces(detector: Detector) -> tuple[np.ndarray, np.ndarray]:
    """The tracker's surfaces for the transport: cylinders by radius (radius, -half length,
    half length, x0, layer or -1 for passive material) and disks by z (z, r_min, r_max, x0,
    layer at +z, layer at -z)."""
    tracker = detector.tracker
    rows = [(layer.radius, -layer.half_length, layer.half_length, layer.x0, i, -1)
            for i, layer in enumerate(tracker.barrel)]
    rows += [(c.radius, -c.half_length, c.half_length, c.x0, -1, -1) for c in tracker.material]
    cylinders = np.asarray(sorted(rows), dtype=np.float64).reshape(-1, 6)
    n_barrel, n_disks = len(tracker.barrel), len(tracker.endcap)
    disks = np.asarray([(d.z, d.r_min, d.r_max, d.x0, n_barrel + j, n_barrel + n_disks + j)
                        for j, d in enumerate(tracker.endcap)], dtype=np.float64).reshape(-1, 6)
    return cylinders, disks


@njit
def _transport(state, cylinders, disks, limits, rng):
    """Follow each particle (a row of ``state``: vertex, momentum, mass, charge, is-electron)
    through the surfaces. Returns the true crossings of active surfaces (particle row, layer,
    x, y, z) and each particle's momentum when it stops."""
    n = state.shape[0]
    nc, nd = cylinders.shape[0], disks.shape[0]
    outer_r, outer_z, field = limits[0], limits[1], limits[2]
    capacity = 2 * n * (nc + nd) + 1
    owner = np.empty(capacity, dtype=np.int64)
    layer = np.empty(capacity, dtype=np.int64)
    hx, hy, hz = np.empty(capacity), np.empty(capacity), np.empty(capacity)
    p_end = np.empty(n)
    k = 0
    for i in range(n):
        x, y, z = state[i, 0], state[i, 1], state[i, 2]
        px, py, pz = state[i, 3], state[i, 4], state[i, 5]
        mass, charge, electron = state[i, 6], state[i, 7], state[i, 8] > 0
        pt = math.hypot(px, py)
        p = math.sqrt(pt * pt + pz * pz)
        phi = math.atan2(py, px)
        t = pz / pt
        kappa = charge * C_LIGHT * field / pt
        turned = 0.0
        r = math.hypot(x, y)
        ic = 0
        while ic < nc and cylinders[ic, _POS] <= r:
            ic += 1
        side = 1.0 if t >= 0 else -1.0
        jd = 0
        while jd < nd and disks[jd, _POS] <= side * z:
            jd += 1
        while True:
            s_cyl = cylinder_path(x, y, phi, kappa, cylinders[ic, _POS]) if ic < nc else math.nan
            s_disk = (side * disks[jd, _POS] - z) / t if jd < nd and t != 0.0 else math.nan
            s_end = (math.pi - turned) / abs(kappa)
            s_out = cylinder_path(x, y, phi, kappa, outer_r)
            if not math.isnan(s_out):
                s_end = min(s_end, s_out)
            if t != 0.0:
                s_end = min(s_end, (side * outer_z - z) / t)
            use_disk = not math.isnan(s_disk) and (math.isnan(s_cyl) or s_disk < s_cyl)
            s = s_disk if use_disk else s_cyl
            if math.isnan(s) or s >= s_end:
                break
            x, y = position(x, y, phi, kappa, s)
            z += t * s
            phi -= kappa * s
            turned += abs(kappa * s)
            # thickness along the path: x0 over the cosine of the angle of incidence
            x0 = 0.0
            lay = -1
            if use_disk:
                row = disks[jd]
                jd += 1
                rr = math.hypot(x, y)
                if row[_LOW] <= rr <= row[_HIGH]:
                    x0 = row[_X0] * math.sqrt(1.0 + t * t) / abs(t)
                    lay = int(row[_LAYER] if side > 0 else row[_LAYER_MINUS])
            else:
                row = cylinders[ic]
                ic += 1
                if row[_LOW] <= z <= row[_HIGH]:
                    radial = (x * math.cos(phi) + y * math.sin(phi)) / row[_POS]
                    x0 = row[_X0] * math.sqrt(1.0 + t * t) / max(radial, 0.05)
                    lay = int(row[_LAYER])
            if lay >= 0 and k < capacity:  # a particle turning back in z may meet a disk again
                owner[k], layer[k], hx[k], hy[k], hz[k] = i, lay, x, y, z
                k += 1
            if x0 > 0.0:
                energy = math.sqrt(p * p + mass * mass)
                energy -= ionisation_loss(p, mass, x0) * rng.gamma(4.0, 0.25)
                if electron:
                    energy *= math.exp(-rng.gamma(x0 / math.log(2.0), 1.0))
                if energy <= mass * 1.0001:
                    p = 0.0
                    break
                p = math.sqrt(energy * energy - mass * mass)
                theta0 = highland(p, mass, x0)
                # deflect the direction by two independent projected angles
                st = 1.0 / math.sqrt(1.0 + t * t)
                ct = t * st
                a, b = theta0 * rng.standard_normal(), theta0 * rng.standard_normal()
                ux = st * math.cos(phi) - a * math.sin(phi) + b * ct * math.cos(phi)
                uy = st * math.sin(phi) + a * math.cos(phi) + b * ct * math.sin(phi)
                uz = ct - b * st
                ut = math.hypot(ux, uy)
                phi = math.atan2(uy, ux)
                t = uz / ut
                pt = p * ut / math.sqrt(ut * ut + uz * uz)
                if pt < 1e-3:
                    break
                kappa = charge * C_LIGHT * field / pt
                new_side = 1.0 if t >= 0 else -1.0
                if new_side != side:  # turned back along z: the disks on the other side lie ahead
                    side = new_side
                    jd = 0
                    while jd < nd and disks[jd, _POS] <= side * z:
                        jd += 1
        p_end[i] = p
    return owner[:k], layer[:k], hx[:k], hy[:k], hz[:k], p_end


def transport(particles: SimParticles, detector: Detector, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The true crossings of active layers by the charged ``particles`` (no efficiency, no
    smearing: ``particle`` is the row in ``particles``), and ``p_end``, each particle's momentum
    where it stopped. For studies and tests of the material effects."""
    owner, layer, x, y, z, p_end = _transport(*_inputs(particles, detector), rng)
    return {"particle": owner, "layer": layer, "x": x, "y": y, "z": z, "p_end": p_end}


def _inputs(p: SimParticles, detector: Detector) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The transport kernel's arguments: particle states, surfaces, and (outer radius, outer z, field)."""
    cylinders, disks = surfaces(detector)
    state = np.column_stack([p.vx, p.vy, p.vz, p.px, p.py, p.pz, p.mass, p.charge,
                             (np.abs(p.pdg) == 11).astype(np.float64)])
    tracker = detector.tracker
    return state, cylinders, disks, np.array([tracker.outer_radius, tracker.outer_z, detector.solenoid.field])


def _measure(tracker, event, index, layer, x, y, z, rng):
    """Efficiency and smearing of the true crossings: the hits."""
    n_barrel = len(tracker.barrel)
    eff = np.array([lay.efficiency for lay in tracker.barrel] + [d.efficiency for d in tracker.endcap] * 2)
    keep = rng.random(len(layer)) < eff[layer]
    event, index, layer, x, y, z = event[keep], index[keep], layer[keep], x[keep], y[keep], z[keep]
    sig_rphi = np.array([lay.sigma_rphi for lay in tracker.barrel] + [d.sigma_rphi for d in tracker.endcap] * 2)
    sig_2 = np.array([lay.sigma_z for lay in tracker.barrel] + [d.sigma_r for d in tracker.endcap] * 2)
    radius = np.array([lay.radius for lay in tracker.barrel] + [0.0] * (2 * len(tracker.endcap)))
    barrel = layer < n_barrel
    r = np.where(barrel, radius[layer], np.hypot(x, y))
    u, v = rng.normal(0.0, 1.0, len(layer)), rng.normal(0.0, 1.0, len(layer))
    phi = np.arctan2(y, x) + u * sig_rphi[layer] / r
    r = np.where(barrel, r, r + v * sig_2[layer])
    z = np.where(barrel, z + v * sig_2[layer], z)
    return event, r * np.cos(phi), r * np.sin(phi), z, layer.astype(np.int64), index


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
