"""Event generation: pp -> hard QCD 2 -> 2 multi-jet events at 13.6 TeV.

``generate`` returns events with the ``mcparticles`` truth collection and the
``run`` and ``event`` tags. Two generators:

``builtin``
    A fast parametric generator in numpy that makes many events at once
    (flat arrays and counts, no event loop). A power-law pT-hat spectrum above
    ``pthat_min`` damped by parton-density-like factors; parton rapidities
    from Gaussian boost and centre-of-mass rapidity distributions;
    initial-state radiation as extra gluons (dN/dpT ~ 1/pT) against which the
    hard pair recoils, so the outgoing partons balance exactly; each parton
    radiates a few sub-jets at angles dR ~ 0.05-1 (so that some events have
    three or four jets); every sub-jet fragments into hadrons with
    Dirichlet-distributed longitudinal fractions and Gaussian transverse
    momentum (sigma 0.4 GeV per component) about its axis; then the hadrons of
    each parton are shifted to conserve its 3-momentum exactly. Charged
    hadrons alternate in charge along each parton's chain, so each jet carries
    charge -1, 0 or +1. An underlying event (dN_ch/deta ~ 6 in |eta| < 4) and
    optional pile-up (Poisson(mu) minimum-bias-like interactions at
    z ~ N(0, 5 cm)) are added; pi0 decay to two photons.

``pythia``
    Pythia 8 through the optional ``pythia8mc`` package (``giod[pythia]``);
    see :mod:`giod.physics.pythia`. Pile-up, when asked for, is the built-in
    soft model overlaid on the Pythia events.

Status codes: 1 final state, 2 decayed (pi0, and in Pythia every decayed
hadron), 3 outgoing parton: the two of the hard 2 -> 2 process first, then
(built-in only) the initial-state-radiation gluons. The ``parent`` of a hadron is
its hard parton (built-in) or its nearest kept ancestor (Pythia); photons
from pi0 decays point to the pi0; soft particles have none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import awkward as ak
import numpy as np

from giod.errors import ConfigError
from giod.physics.layout import make_events
from giod.physics.particles import PDG, STATUS_DECAYED, STATUS_FINAL, STATUS_PARTON, ParticleTable

__all__ = ["BuiltinTune", "generate", "particle_gun"]

GENERATORS = ("builtin", "pythia")


@dataclass(frozen=True)
class BuiltinTune:
    """Parameters of the built-in generator (defaults give plausible LHC jets)."""

    sqrt_s: float = 13600.0
    pt_power: float = 4.8  # dsigma/dpT ~ pT^-power above pthat_min ...
    pdf_power: float = 3.0  # ... times ((1 - x1)(1 - x2))^pdf_power
    ystar_sigma: float = 0.9  # half the parton rapidity difference
    yboost_sigma: float = 1.3  # mean rapidity of the two partons
    isr_rate: float = 0.35  # mean ISR partons: rate * ln(pT-hat / isr_pt_min) ...
    isr_pt_min: float = 10.0  # ... with dN/dpT ~ 1/pT between isr_pt_min and 0.8 pT-hat
    isr_y_sigma: float = 1.8
    emissions_gluon: float = 0.5  # mean sub-jets radiated: coefficient * ln(pT / 2 GeV)
    emissions_quark: float = 0.25
    multiplicity_gluon: float = 6.5  # hadrons of a 10 GeV sub-jet, growing as E^0.45
    multiplicity_quark: float = 4.5
    fraction_shape: float = 0.9  # Dirichlet parameter of the longitudinal fractions
    kt_sigma: float = 0.40  # GeV, per transverse component relative to the sub-jet axis
    charged_share: float = 0.62
    ue_dnch_deta: float = 6.0  # underlying event
    minbias_dnch_deta: float = 5.5  # each pile-up interaction
    soft_eta_max: float = 4.0
    soft_pt_scale: float = 0.27  # pT ~ Gamma(2, scale): mean 0.54 GeV
    beamspot_sigma_xy: float = 0.0015  # cm
    beamspot_sigma_z: float = 5.0  # cm


def generate(
    n_events: int,
    *,
    seed: int,
    pthat_min: float = 30.0,
    pileup: float = 0.0,
    generator: str = "builtin",
    run: int = 1,
    first_event: int = 0,
    tune: BuiltinTune | None = None,
) -> ak.Array:
    """Generate ``n_events`` hard-QCD events; the same seed gives the same events.

    Returns events with ``mcparticles``, ``run`` and ``event`` (numbered from
    ``first_event``). ``pileup`` is the mean number of extra soft interactions.
    """
    if n_events < 0:
        raise ConfigError(f"n_events must be >= 0, got {n_events}")
    if not pthat_min > 0:
        raise ConfigError(f"pthat_min must be > 0 GeV, got {pthat_min}")
    if not pileup >= 0:
        raise ConfigError(f"pileup must be >= 0, got {pileup}")
    if generator not in GENERATORS:
        raise ConfigError(f"unknown generator {generator!r}: choose one of {', '.join(GENERATORS)}")
    tune = tune or BuiltinTune()
    rng = np.random.default_rng(seed)
    vertex = _beamspot(rng, n_events, tune)
    if generator == "pythia":
        from giod.physics.pythia import generate_pythia

        hard = generate_pythia(n_events, seed=seed, pthat_min=pthat_min, sqrt_s=tune.sqrt_s)
        for axis, name in enumerate(("vx", "vy", "vz")):
            getattr(hard, name)[:] += vertex[hard.event, axis]
        blocks = [hard]
    else:
        blocks = _builtin_hard(rng, n_events, pthat_min, vertex, tune)
        ue_events = np.arange(n_events)
        blocks.append(_soft(rng, ue_events, vertex, tune.ue_dnch_deta, None, tune))
    if pileup > 0:
        n_pu = rng.poisson(pileup, n_events)
        pu_events = np.repeat(np.arange(n_events), n_pu)
        pu_vertex = _beamspot(rng, len(pu_events), tune)
        blocks.append(_soft(rng, pu_events, pu_vertex, tune.minbias_dnch_deta, 1.5, tune))
    table = ParticleTable.concat(blocks)
    if generator == "builtin":
        table = ParticleTable.concat([table, _decay_pi0(rng, table)], shift_parents=False)
    events = np.arange(n_events, dtype=np.uint64) + np.uint64(first_event)
    return make_events(
        {"mcparticles": table.to_collection(n_events)},
        {"run": np.full(n_events, run), "event": events},
    )


def particle_gun(
    pdg: np.ndarray,
    px: np.ndarray,
    py: np.ndarray,
    pz: np.ndarray,
    *,
    vertex: np.ndarray | None = None,
    run: int = 1,
) -> ak.Array:
    """Events of one final-state particle each (for calibration and tests).

    ``pdg`` and the momenta are arrays of the same length (one per event);
    ``vertex`` is an (n, 3) array in cm, the origin by default. Particles
    must be among those of :class:`PDG` (their mass and charge are looked up).
    """
    pdg = np.atleast_1d(np.asarray(pdg, dtype=np.int64))
    n = len(pdg)
    momenta = [np.atleast_1d(np.asarray(c, dtype=np.float64)) for c in (px, py, pz)]
    vertex = np.zeros((n, 3)) if vertex is None else np.asarray(vertex, dtype=np.float64)
    if any(c.shape != (n,) for c in momenta) or vertex.shape != (n, 3):
        raise ConfigError("particle_gun needs pdg, px, py, pz of one length n and an (n, 3) vertex")
    p = np.column_stack(momenta)
    table = _table(np.arange(n), pdg, PDG.charges(pdg), p, PDG.masses(pdg), vertex, STATUS_FINAL,
                   np.full(n, -1))
    return make_events(
        {"mcparticles": table.to_collection(n)},
        {"run": np.full(n, run), "event": np.arange(n, dtype=np.uint64)},
    )


# -- pieces of the built-in generator ---------------------------------------


def _beamspot(rng: np.random.Generator, n: int, tune: BuiltinTune) -> np.ndarray:
    xy = rng.normal(0.0, tune.beamspot_sigma_xy, (n, 2))
    z = rng.normal(0.0, tune.beamspot_sigma_z, (n, 1))
    return np.hstack([xy, z])


def _table(event: Any, pdg: Any, charge: Any, p: np.ndarray, mass: Any, vertex: np.ndarray, status: Any,
           parent: Any) -> ParticleTable:
    n = len(event)
    e = np.sqrt((p**2).sum(axis=1) + mass**2)
    return ParticleTable(
        event=np.asarray(event, dtype=np.int64),
        pdg=np.asarray(pdg, dtype=np.int32),
        charge=np.asarray(charge, dtype=np.float64),
        px=p[:, 0], py=p[:, 1], pz=p[:, 2], e=e,
        mass=np.asarray(mass, dtype=np.float64),
        vx=vertex[:, 0].copy(), vy=vertex[:, 1].copy(), vz=vertex[:, 2].copy(),
        status=np.full(n, status, dtype=np.int16) if np.isscalar(status) else status,
        parent=np.asarray(parent, dtype=np.int64),
    )


def _hard_kinematics(rng: np.random.Generator, n: int, pthat_min: float,
                     tune: BuiltinTune) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """pT-hat, rapidities and azimuth of n 2 -> 2 scatters, by accept-reject."""
    pt = np.empty(n)
    y3 = np.empty(n)
    y4 = np.empty(n)
    filled = 0
    while filled < n:
        m = max(2 * (n - filled), 64)
        cand = pthat_min * rng.random(m) ** (-1.0 / (tune.pt_power - 1.0))
        ystar = rng.normal(0.0, tune.ystar_sigma, m)
        yboost = rng.normal(0.0, tune.yboost_sigma, m)
        a, b = yboost + ystar, yboost - ystar
        xt = 2.0 * cand / tune.sqrt_s
        x1 = 0.5 * xt * (np.exp(a) + np.exp(b))
        x2 = 0.5 * xt * (np.exp(-a) + np.exp(-b))
        ok = (x1 < 1) & (x2 < 1)
        weight = np.where(ok, np.clip((1 - x1) * (1 - x2), 0, 1) ** tune.pdf_power, 0.0)
        keep = np.flatnonzero(rng.random(m) < weight)[: n - filled]
        sl = slice(filled, filled + len(keep))
        pt[sl], y3[sl], y4[sl] = cand[keep], a[keep], b[keep]
        filled += len(keep)
    phi = rng.uniform(-np.pi, np.pi, n)
    return pt, y3, y4, phi


def _parton_flavours(rng: np.random.Generator, pt: np.ndarray, tune: BuiltinTune) -> np.ndarray:
    xt = 2.0 * pt / tune.sqrt_s
    gluon_share = np.clip(0.78 - 1.2 * xt, 0.3, 0.78)
    quarks = rng.choice([2, 1, 3, -2, -1, -3], size=len(pt), p=[0.42, 0.3, 0.1, 0.06, 0.06, 0.06])
    return np.where(rng.random(len(pt)) < gluon_share, PDG.GLUON, quarks)


def _builtin_hard(
    rng: np.random.Generator, n: int, pthat_min: float, vertex: np.ndarray, tune: BuiltinTune
) -> list[ParticleTable]:
    pt, y3, y4, phi = _hard_kinematics(rng, n, pthat_min, tune)
    # Rows 2e and 2e+1 are the partons of event e.
    pt2 = np.repeat(pt, 2)
    y = np.column_stack([y3, y4]).ravel()
    phi2 = np.column_stack([phi, phi + np.pi]).ravel()
    p = np.column_stack([pt2 * np.cos(phi2), pt2 * np.sin(phi2), pt2 * np.sinh(y)])
    # Exact balance: the second parton takes minus the first's transverse momentum.
    p[1::2, :2] = -p[0::2, :2]
    flavour = _parton_flavours(rng, pt2, tune)

    # Initial-state radiation: extra gluons; the hard pair recoils against them.
    top = np.maximum(0.8 * pt, tune.isr_pt_min)
    n_isr = rng.poisson(tune.isr_rate * np.log(top / tune.isr_pt_min))
    isr_event = np.repeat(np.arange(n), n_isr)
    isr_pt = tune.isr_pt_min * (top[isr_event] / tune.isr_pt_min) ** rng.random(len(isr_event))
    isr_phi = rng.uniform(-np.pi, np.pi, len(isr_event))
    isr_y = rng.normal(0.5 * (y3 + y4)[isr_event], tune.isr_y_sigma)
    p_isr = np.column_stack([isr_pt * np.cos(isr_phi), isr_pt * np.sin(isr_phi), isr_pt * np.sinh(isr_y)])
    for c in range(2):
        recoil = np.bincount(isr_event, weights=p_isr[:, c], minlength=n)
        p[:, c] -= np.repeat(recoil / 2, 2)

    parton_event = np.concatenate([np.repeat(np.arange(n), 2), isr_event])
    p = np.vstack([p, p_isr])
    flavour = np.concatenate([flavour, np.full(len(isr_event), PDG.GLUON)])
    partons = _table(
        parton_event, flavour, PDG.charges(flavour), p, np.zeros(len(p)),
        vertex[parton_event], STATUS_PARTON, np.full(len(p), -1),
    )
    hadrons = _fragment(rng, partons, tune)  # parents: rows of ``partons``, which come first
    return [ParticleTable.concat([partons, hadrons], shift_parents=False)]


def _unit(eta: np.ndarray, phi: np.ndarray) -> np.ndarray:
    return np.column_stack([np.cos(phi) / np.cosh(eta), np.sin(phi) / np.cosh(eta), np.tanh(eta)])


def _fragment(rng: np.random.Generator, partons: ParticleTable, tune: BuiltinTune) -> ParticleTable:
    """Sub-jets from each parton, hadrons from each sub-jet; parent = parton row."""
    n_partons = len(partons)
    p_parton = np.column_stack([partons.px, partons.py, partons.pz])
    e_parton = partons.e
    pt_parton = np.hypot(partons.px, partons.py)
    eta_parton = np.arcsinh(partons.pz / pt_parton)
    phi_parton = np.arctan2(partons.py, partons.px)
    gluon = partons.pdg == PDG.GLUON

    # Sub-jets: the parton itself plus k radiated ones with energy fractions z.
    coeff = np.where(gluon, tune.emissions_gluon, tune.emissions_quark)
    k = rng.poisson(coeff * np.log(np.maximum(pt_parton, 2.0) / 2.0))
    owner = np.repeat(np.arange(n_partons), k)
    z = np.exp(rng.uniform(np.log(0.04), np.log(0.4), len(owner)))
    z_sum = np.bincount(owner, weights=z, minlength=n_partons)
    scale = np.minimum(1.0, 0.6 / np.maximum(z_sum, 1e-12))
    z *= scale[owner]
    dr = np.exp(rng.uniform(np.log(0.05), np.log(1.0), len(owner)))
    angle = rng.uniform(0, 2 * np.pi, len(owner))
    sub_parton = np.concatenate([np.arange(n_partons), owner])
    sub_energy = np.concatenate([e_parton * (1 - np.minimum(z_sum * scale, 0.6)), e_parton[owner] * z])
    sub_eta = np.concatenate([eta_parton, eta_parton[owner] + dr * np.cos(angle)])
    sub_phi = np.concatenate([phi_parton, phi_parton[owner] + dr * np.sin(angle)])
    sub_gluon = np.concatenate([gluon, np.ones(len(owner), dtype=bool)])

    # Hadrons per sub-jet; sorted by parton so charges alternate along each chain.
    norm = np.where(sub_gluon, tune.multiplicity_gluon, tune.multiplicity_quark)
    n_had = 1 + rng.poisson(norm * (np.maximum(sub_energy, 0.1) / 10.0) ** 0.45)
    order = np.argsort(sub_parton, kind="stable")
    sub = np.repeat(order, n_had[order])
    parton = sub_parton[sub]
    g = rng.gamma(tune.fraction_shape, 1.0, len(sub))
    x = g / np.bincount(sub, weights=g, minlength=len(sub_energy))[sub]
    axis = _unit(sub_eta[sub], sub_phi[sub])
    e1 = np.column_stack([-np.sin(sub_phi[sub]), np.cos(sub_phi[sub]), np.zeros(len(sub))])
    e2 = np.cross(axis, e1)
    kt = rng.normal(0.0, tune.kt_sigma, (len(sub), 2))
    p = (x * sub_energy[sub])[:, None] * axis + kt[:, :1] * e1 + kt[:, 1:] * e2

    # Shift each parton's hadrons (in proportion to |p|) to conserve its 3-momentum.
    pabs = np.linalg.norm(p, axis=1)
    wsum = np.bincount(parton, weights=pabs, minlength=n_partons)
    for c in range(3):
        missing = p_parton[:, c] - np.bincount(parton, weights=p[:, c], minlength=n_partons)
        p[:, c] += missing[parton] * pabs / wsum[parton]

    start_sign = np.where(gluon, rng.choice([-1, 1], n_partons), np.sign(partons.charge))
    pdg, charge = _species(rng, parton, start_sign[parton], tune)
    return _table(
        partons.event[parton], pdg, charge, p, PDG.masses(pdg),
        np.column_stack([partons.vx, partons.vy, partons.vz])[parton], STATUS_FINAL, parton,
    )


def _species(
    rng: np.random.Generator, group: np.ndarray, start_sign: np.ndarray, tune: BuiltinTune
) -> tuple[np.ndarray, np.ndarray]:
    """Hadron species; charged ones alternate in sign along each (sorted) group."""
    n = len(group)
    charged = rng.random(n) < tune.charged_share
    charged_code = rng.choice([PDG.PI_PLUS, PDG.K_PLUS, PDG.PROTON], n, p=[0.82, 0.12, 0.06])
    neutral_code = rng.choice([PDG.PI0, PDG.K_LONG, PDG.NEUTRON], n, p=[0.80, 0.12, 0.08])
    # Rank among the charged hadrons of the group: cumulative count minus the group's start.
    rank = np.cumsum(charged)
    starts = np.flatnonzero(np.r_[n > 0, group[1:] != group[:-1]])
    before: np.ndarray = np.repeat(rank[starts] - charged[starts], np.diff(np.r_[starts, n]))
    sign = start_sign * np.where((rank - before) % 2 == 1, 1, -1)
    neutron_sign = np.where(rng.random(n) < 0.5, 1, -1)
    pdg = np.where(
        charged,
        charged_code * sign,
        np.where(neutral_code == PDG.NEUTRON, neutral_code * neutron_sign, neutral_code),
    )
    return pdg, PDG.charges(pdg)


def _soft(
    rng: np.random.Generator,
    event: np.ndarray,
    vertex: np.ndarray,
    dnch_deta: float,
    nbd_k: float | None,
    tune: BuiltinTune,
) -> ParticleTable:
    """Soft hadrons of an interaction (underlying event or minimum bias), one per row of ``event``."""
    mean = dnch_deta * 2 * tune.soft_eta_max / tune.charged_share
    if nbd_k is None:
        n = rng.poisson(mean, len(event))
    else:  # negative binomial: a Poisson with a Gamma-distributed mean
        n = rng.poisson(rng.gamma(nbd_k, mean / nbd_k, len(event)))
    group = np.repeat(np.arange(len(event)), n)
    total = len(group)
    eta = rng.uniform(-tune.soft_eta_max, tune.soft_eta_max, total)
    phi = rng.uniform(-np.pi, np.pi, total)
    pt = rng.gamma(2.0, tune.soft_pt_scale, total)
    p = np.column_stack([pt * np.cos(phi), pt * np.sin(phi), pt * np.sinh(eta)])
    pdg, charge = _species(rng, group, rng.choice([-1, 1], len(event))[group], tune)
    return _table(event[group], pdg, charge, p, PDG.masses(pdg), vertex[group], STATUS_FINAL,
                  np.full(total, -1))


def _decay_pi0(rng: np.random.Generator, table: ParticleTable) -> ParticleTable:
    """Decay every pi0 to two photons (isotropic in its rest frame); marks the pi0 status 2."""
    rows = np.flatnonzero(table.pdg == PDG.PI0)
    table.status[rows] = STATUS_DECAYED
    m = table.mass[rows]
    mother_p = np.column_stack([table.px[rows], table.py[rows], table.pz[rows]])
    beta = mother_p / table.e[rows, None]
    gamma = table.e[rows] / m
    cos_t = rng.uniform(-1, 1, len(rows))
    sin_t = np.sqrt(1 - cos_t**2)
    phi = rng.uniform(0, 2 * np.pi, len(rows))
    p_star = (m / 2)[:, None] * np.column_stack([sin_t * np.cos(phi), sin_t * np.sin(phi), cos_t])
    daughters = []
    for sign in (1.0, -1.0):
        q = sign * p_star
        bq = (beta * q).sum(axis=1)
        factor = gamma**2 / (gamma + 1) * bq + gamma * m / 2
        daughters.append(q + factor[:, None] * beta)
    p = np.stack(daughters, axis=1).reshape(-1, 3)
    parent = np.repeat(rows, 2)
    vertex = np.column_stack([table.vx, table.vy, table.vz])[parent]
    return _table(table.event[parent], np.full(len(parent), PDG.GAMMA), np.zeros(len(parent)),
                  p, np.zeros(len(parent)), vertex, STATUS_FINAL, parent)
