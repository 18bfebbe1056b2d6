"""What a thin layer of material does to a charged particle: scattering, ionisation, bremsstrahlung.

Scalar numba functions shared by the simulation (which draws the effects) and
the track fit (which expects them). The material is described by its
thickness in radiation lengths ``x`` along the particle's path; for the
ionisation it is taken as silicon-equivalent (sensors, and supports of
similar Z/A), i.e. ``x * X0_SILICON`` cm of silicon. Units: GeV, cm.

* **Multiple scattering**: the Highland formula (PDG, "Passage of particles
  through matter", eq. 34.15), the r.m.s. of the deflection angle projected on
  a plane, for a particle of unit charge.
* **Ionisation**: the mean loss of the Bethe formula with the maximum energy
  transfer to an electron and Sternheimer's density correction for silicon
  (PDG tables). The simulation spreads it with a gamma distribution (mean 1,
  r.m.s. 0.5: a skewed, Landau-like spread; the true Landau tail is longer).
* **Bremsstrahlung** (electrons): the Bethe-Heitler distribution of the
  fraction ``z`` of the energy kept, ``f(z) = (-ln z)^(c-1) / Gamma(c)`` with
  ``c = x / ln 2``, i.e. ``-ln z`` is gamma-distributed (the radiated photon is
  not followed).
"""

from __future__ import annotations

import math

from giod.physics.compiled import njit

__all__ = [
    "M_ELECTRON",
    "M_PION",
    "X0_SILICON",
    "bremsstrahlung_mean_loss",
    "highland",
    "ionisation_loss",
]

M_ELECTRON = 0.51099895e-3  # GeV
M_PION = 0.13957039  # GeV: the mass the fit assumes for every track
X0_SILICON = 9.370  # cm
#: K Z/A rho of silicon, GeV/cm: 0.307075 MeV cm2/mol * (14 / 28.0855) * 2.329 g/cm3.
_K_RHO = 0.307075e-3 * (14.0 / 28.0855) * 2.329
_I_SILICON = 173.0e-9  # GeV, mean excitation energy
# Sternheimer's density-effect parameters for silicon.
_X0D, _X1D, _CD, _AD, _KD = 0.2014, 2.8715, 4.4355, 0.1492, 3.2546


@njit
def highland(p: float, mass: float, x: float) -> float:
    """Projected r.m.s. scattering angle (rad) after ``x`` radiation lengths."""
    if x <= 0.0 or p <= 0.0:
        return 0.0
    beta = p / math.sqrt(p * p + mass * mass)
    return 0.0136 / (beta * p) * math.sqrt(x) * (1.0 + 0.038 * math.log(x / (beta * beta)))


@njit
def ionisation_loss(p: float, mass: float, x: float) -> float:
    """Mean ionisation energy loss (GeV) crossing ``x`` radiation lengths of silicon."""
    if x <= 0.0 or p <= 0.0:
        return 0.0
    bg = p / mass
    bg2 = bg * bg
    gamma = math.sqrt(1.0 + bg2)
    beta2 = bg2 / (1.0 + bg2)
    ratio = M_ELECTRON / mass
    t_max = 2.0 * M_ELECTRON * bg2 / (1.0 + 2.0 * gamma * ratio + ratio * ratio)
    xd = math.log10(bg)
    if xd >= _X1D:
        delta = 2.0 * math.log(10.0) * xd - _CD
    elif xd >= _X0D:
        delta = 2.0 * math.log(10.0) * xd - _CD + _AD * (_X1D - xd) ** _KD
    else:
        delta = 0.0
    log_term = 0.5 * math.log(2.0 * M_ELECTRON * bg2 * t_max / (_I_SILICON * _I_SILICON))
    dedx = _K_RHO / beta2 * (log_term - beta2 - 0.5 * delta)
    return max(dedx, 0.0) * x * X0_SILICON


@njit
def bremsstrahlung_mean_loss(energy: float, x: float) -> float:
    """Mean energy (GeV) an electron radiates in ``x`` radiation lengths (Bethe-Heitler)."""
    # E[z] = E[exp(-G)] for G ~ Gamma(c, 1) is 2^-c = exp(-x): the textbook exponential.
    return energy * (1.0 - math.exp(-x))
