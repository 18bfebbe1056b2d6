"""The detector description: one YAML file, checked, turned into value objects.

``Detector.load()`` reads the packaged CMS-like description
(``detector.yaml`` beside this module) or any file of the same shape. Every
key is checked: an unknown key, a missing key, a value of the wrong type or
out of range raises :class:`giod.errors.ConfigError` naming the key's path
(``tracker.barrel[3].radius``). The same object drives the simulation, the
reconstruction and the event display (``Detector.to_dict()`` is JSON-ready).

Units: cm, GeV, tesla, radians.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from enum import IntEnum
from importlib import resources
from pathlib import Path
from typing import Any, Self

import numpy as np
import yaml

from giod.errors import ConfigError
from giod.physics.checking import (
    KeyProblem,
    build,
    checked,
    fraction,
    key_error,
    nonnegative,
    one_of,
    positive,
    probability,
)

__all__ = [
    "CALO_CODES",
    "C_LIGHT",
    "BarrelLayer",
    "CaloBarrel",
    "CaloEndcap",
    "CaloSubdetector",
    "Calorimeter",
    "Calorimetry",
    "Detector",
    "EMShower",
    "EndcapDisk",
    "HadronShower",
    "MIPDeposit",
    "PassiveCylinder",
    "Showers",
    "Solenoid",
    "Tracker",
    "TrackerSubdetector",
]

#: GeV per (tesla * cm) of transverse momentum per unit charge and radius:
#: pt = C_LIGHT * B * R.
C_LIGHT = 0.299792458e-2


class TrackerSubdetector(IntEnum):
    """``TrackerHit.subdetector`` codes."""

    PIXEL_BARREL = 1
    PIXEL_ENDCAP = 2
    STRIP_BARREL = 3
    STRIP_ENDCAP = 4


class CaloSubdetector(IntEnum):
    """``CaloCell.subdetector`` codes."""

    ECAL_BARREL = 1
    ECAL_ENDCAP = 2
    HCAL_BARREL = 3
    HCAL_ENDCAP = 4


#: (barrel, endcap) ``CaloSubdetector`` codes of each calorimeter.
CALO_CODES: dict[str, tuple[CaloSubdetector, CaloSubdetector]] = {
    "ecal": (CaloSubdetector.ECAL_BARREL, CaloSubdetector.ECAL_ENDCAP),
    "hcal": (CaloSubdetector.HCAL_BARREL, CaloSubdetector.HCAL_ENDCAP),
}


# -- the description --------------------------------------------------------


@dataclass(frozen=True)
class Solenoid:
    field: float = checked(positive)
    radius: float = checked(positive)
    half_length: float = checked(positive)


@dataclass(frozen=True)
class BarrelLayer:
    name: str
    subdetector: str = checked(one_of("pixel", "strip"))
    radius: float = checked(positive)
    half_length: float = checked(positive)
    sigma_rphi: float = checked(nonnegative)
    sigma_z: float = checked(nonnegative)
    efficiency: float = checked(probability)
    x0: float = checked(nonnegative)  # thickness in radiation lengths at normal incidence
    noise_hits: float = checked(nonnegative)  # mean number of noise hits per event

    @property
    def code(self) -> int:
        pixel = self.subdetector == "pixel"
        return int(TrackerSubdetector.PIXEL_BARREL if pixel else TrackerSubdetector.STRIP_BARREL)


@dataclass(frozen=True)
class EndcapDisk:
    name: str
    subdetector: str = checked(one_of("pixel", "strip"))
    z: float = checked(positive)  # the disk exists at +z and at -z
    r_min: float = checked(nonnegative)
    r_max: float = checked(positive)
    sigma_rphi: float = checked(nonnegative)
    sigma_r: float = checked(nonnegative)
    efficiency: float = checked(probability)
    x0: float = checked(nonnegative)  # thickness in radiation lengths at normal incidence
    noise_hits: float = checked(nonnegative)  # per disk and per event

    @property
    def code(self) -> int:
        pixel = self.subdetector == "pixel"
        return int(TrackerSubdetector.PIXEL_ENDCAP if pixel else TrackerSubdetector.STRIP_ENDCAP)

    def _validate(self, path: str) -> None:
        if self.r_min >= self.r_max:
            raise key_error(f"{path}.r_min", "must be smaller than r_max")


@dataclass(frozen=True)
class PassiveCylinder:
    """Material without hits (beam pipe, supports): a cylinder centred on the beam line."""

    name: str
    radius: float = checked(positive)
    half_length: float = checked(positive)
    x0: float = checked(nonnegative)  # thickness in radiation lengths at normal incidence


@dataclass(frozen=True)
class Tracker:
    eta_max: float = checked(positive)
    outer_radius: float = checked(positive)
    outer_z: float = checked(positive)
    barrel: tuple[BarrelLayer, ...] = ()
    material: tuple[PassiveCylinder, ...] = ()
    endcap: tuple[EndcapDisk, ...] = ()

    @property
    def n_layers(self) -> int:
        """Number of hit surfaces: barrel layers, then disks at +z, then at -z."""
        return len(self.barrel) + 2 * len(self.endcap)

    def layer_names(self) -> list[str]:
        """Name of each layer index (disks get a ``+``/``-`` suffix)."""
        names = [layer.name for layer in self.barrel]
        names += [d.name + "+" for d in self.endcap] + [d.name + "-" for d in self.endcap]
        return names

    def layer_codes(self) -> np.ndarray:
        """``TrackerSubdetector`` code of each layer index."""
        codes = [layer.code for layer in self.barrel] + [d.code for d in self.endcap] * 2
        return np.asarray(codes, dtype=np.int8)

    def _validate(self, path: str) -> None:
        if not self.barrel:
            raise key_error(f"{path}.barrel", "needs at least one layer")
        radii = [layer.radius for layer in self.barrel]
        if any(b <= a for a, b in zip(radii, radii[1:], strict=False)):
            raise key_error(f"{path}.barrel", "layers must be listed by increasing radius")
        zs = [d.z for d in self.endcap]
        if any(b <= a for a, b in zip(zs, zs[1:], strict=False)):
            raise key_error(f"{path}.endcap", "disks must be listed by increasing z")
        for i, layer in enumerate(self.barrel):
            if layer.radius >= self.outer_radius or layer.half_length > self.outer_z:
                raise key_error(f"{path}.barrel[{i}]", "lies outside the tracker volume")
        for i, disk in enumerate(self.endcap):
            if disk.z >= self.outer_z or disk.r_max > self.outer_radius:
                raise key_error(f"{path}.endcap[{i}]", "lies outside the tracker volume")
        for i, cyl in enumerate(self.material):
            if cyl.radius >= self.outer_radius or cyl.half_length > self.outer_z:
                raise key_error(f"{path}.material[{i}]", "lies outside the tracker volume")
            if any(math.isclose(cyl.radius, layer.radius) for layer in self.barrel):
                raise key_error(f"{path}.material[{i}].radius", "coincides with a barrel layer")
        names = [layer.name for layer in self.barrel] + [d.name for d in self.endcap]
        names += [cyl.name for cyl in self.material]
        if len(set(names)) != len(names):
            raise key_error(f"{path}", "layer names must be unique")


@dataclass(frozen=True)
class _CaloSection:
    eta_min: float = checked(nonnegative)
    eta_max: float = checked(positive)
    n_eta: int = checked(positive)  # rings per side
    n_phi: int = checked(positive)
    noise: float = checked(nonnegative)  # sigma per cell, GeV
    threshold: float = checked(nonnegative)  # zero suppression, GeV
    stochastic: float = checked(nonnegative)  # sigma/E = stochastic/sqrt(E) (+) constant
    constant: float = checked(nonnegative)

    @property
    def d_eta(self) -> float:
        return (self.eta_max - self.eta_min) / self.n_eta

    def _validate(self, path: str) -> None:
        if self.eta_min >= self.eta_max:
            raise key_error(f"{path}.eta_min", "must be smaller than eta_max")


@dataclass(frozen=True)
class CaloBarrel(_CaloSection):
    radius: float = checked(positive)


@dataclass(frozen=True)
class CaloEndcap(_CaloSection):
    z: float = checked(positive)  # the endcap exists at +z and at -z


@dataclass(frozen=True)
class Calorimeter:
    """One calorimeter (ECAL or HCAL): a barrel and two endcaps sharing phi sectors.

    Rings are counted from eta = 0: ring ``k`` (0-based) of the barrel covers
    ``[k, k+1) * barrel.d_eta``; the endcap rings follow. A continuous *ring
    coordinate* ``u`` maps |eta| to ring units so that lateral shower profiles
    can be spread across the barrel/endcap boundary.
    """

    barrel: CaloBarrel
    endcap: CaloEndcap

    @property
    def n_rings(self) -> int:
        return self.barrel.n_eta + self.endcap.n_eta

    @property
    def n_phi(self) -> int:
        return self.barrel.n_phi

    def ring_coordinate(self, abs_eta: np.ndarray) -> np.ndarray:
        """|eta| to the continuous ring coordinate (ring k covers [k, k+1))."""
        b, e = self.barrel, self.endcap
        in_barrel = abs_eta < b.eta_max
        return np.where(
            in_barrel,
            (abs_eta - b.eta_min) / b.d_eta,
            b.n_eta + (abs_eta - e.eta_min) / e.d_eta,
        )

    def ring_eta(self, u: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`ring_coordinate`."""
        b, e = self.barrel, self.endcap
        return np.where(u < b.n_eta, b.eta_min + u * b.d_eta, e.eta_min + (u - b.n_eta) * e.d_eta)

    def _validate(self, path: str) -> None:
        if self.barrel.eta_min != 0:
            raise key_error(f"{path}.barrel.eta_min", "must be 0")
        if not math.isclose(self.barrel.eta_max, self.endcap.eta_min, abs_tol=1e-9):
            raise key_error(f"{path}.endcap.eta_min", "must equal barrel.eta_max")
        if self.barrel.n_phi != self.endcap.n_phi:
            raise key_error(f"{path}.endcap.n_phi", "must equal barrel.n_phi")


@dataclass(frozen=True)
class Calorimetry:
    ecal: Calorimeter
    hcal: Calorimeter
    eta_max: float = checked(positive)

    def _validate(self, path: str) -> None:
        for name in ("ecal", "hcal"):
            if getattr(self, name).endcap.eta_max < self.eta_max:
                raise key_error(f"{path}.{name}.endcap.eta_max", "must reach calorimeter.eta_max")
        if self.hcal.barrel.radius <= self.ecal.barrel.radius:
            raise key_error(f"{path}.hcal.barrel.radius", "must be larger than the ECAL radius")
        if self.hcal.endcap.z <= self.ecal.endcap.z:
            raise key_error(f"{path}.hcal.endcap.z", "must be larger than the ECAL endcap z")


@dataclass(frozen=True)
class EMShower:
    core_width: float = checked(positive)  # Gaussian sigma, ECAL cells
    tail_width: float = checked(positive)
    tail_fraction: float = checked(fraction)


@dataclass(frozen=True)
class HadronShower:
    ecal_interaction_probability: float = checked(fraction)
    ecal_fraction_max: float = checked(fraction)
    ecal_width: float = checked(positive)  # ECAL cells
    hcal_width: float = checked(positive)  # HCAL towers
    h_over_e: float = checked(probability)
    exponent: float = checked(probability)

    def response(self, energy: np.ndarray) -> np.ndarray:
        """Visible over true energy of a hadron shower (non-compensation)."""
        e = np.maximum(energy, 1e-3)
        return np.asarray(1.0 - (1.0 - self.h_over_e) * e ** (self.exponent - 1.0))


@dataclass(frozen=True)
class MIPDeposit:
    ecal: float = checked(nonnegative)
    hcal: float = checked(nonnegative)
    spread: float = checked(nonnegative)


@dataclass(frozen=True)
class Showers:
    em: EMShower
    hadron: HadronShower
    mip: MIPDeposit


@dataclass(frozen=True)
class Detector:
    """A whole detector description; build it with :meth:`load`."""

    name: str
    description: str
    solenoid: Solenoid
    tracker: Tracker
    calorimeter: Calorimetry
    showers: Showers

    @classmethod
    def load(cls, path: str | Path | None = None) -> Self:
        """Read and check a detector file (default: the packaged CMS-like one)."""
        if path is None:
            text = resources.files("giod.physics").joinpath("detector.yaml").read_text()
            source = "detector.yaml"
        else:
            source = str(path)
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read detector file {source}: {exc.strerror}") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"detector file {source} is not valid YAML: {exc}") from exc
        return cls.from_dict(data, source=source)

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "detector") -> Self:
        """Check a parsed description and build the detector."""
        try:
            built: Self = build(cls, data)
            return built
        except KeyProblem as exc:
            raise ConfigError(f"{source}: {exc.path}: {exc.problem}") from None

    def with_material(self, scale: float) -> Self:
        """The same detector with every thickness in radiation lengths multiplied by ``scale``
        (0: no material at all; for studies of what the material does)."""
        t = self.tracker
        tracker = dataclasses.replace(
            t,
            barrel=tuple(dataclasses.replace(layer, x0=layer.x0 * scale) for layer in t.barrel),
            endcap=tuple(dataclasses.replace(disk, x0=disk.x0 * scale) for disk in t.endcap),
            material=tuple(dataclasses.replace(cyl, x0=cyl.x0 * scale) for cyl in t.material),
        )
        return dataclasses.replace(self, tracker=tracker)

    def material_at_normal_incidence(self) -> float:
        """Radiation lengths of tracker material a particle at eta = 0 crosses (every barrel layer
        and passive cylinder long enough to reach z = 0)."""
        t = self.tracker
        return sum(layer.x0 for layer in t.barrel) + sum(c.x0 for c in t.material)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the description (plus layer names and codes)."""
        out = dataclasses.asdict(self)
        for calo, codes in CALO_CODES.items():
            out["calorimeter"][calo]["codes"] = [int(c) for c in codes]
        out["tracker"]["layer_names"] = self.tracker.layer_names()
        out["tracker"]["layer_codes"] = self.tracker.layer_codes().tolist()
        return out

    def cell_position(
        self, subdetector: np.ndarray, eta: np.ndarray, phi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Front-face centre (x, y, z) of calorimeter cells given by code, eta, phi."""
        sub = np.asarray(subdetector)
        eta = np.asarray(eta, dtype=np.float64)
        phi = np.asarray(phi, dtype=np.float64)
        ecal, hcal = self.calorimeter.ecal, self.calorimeter.hcal
        radius = np.where(sub == CaloSubdetector.ECAL_BARREL, ecal.barrel.radius, hcal.barrel.radius)
        zface = np.where(sub == CaloSubdetector.ECAL_ENDCAP, ecal.endcap.z, hcal.endcap.z)
        barrel = (sub == CaloSubdetector.ECAL_BARREL) | (sub == CaloSubdetector.HCAL_BARREL)
        sinh = np.sinh(eta)
        with np.errstate(divide="ignore"):
            r = np.where(barrel, radius, zface / np.abs(np.where(sinh == 0, 1e-9, sinh)))
        z = np.where(barrel, radius * sinh, np.sign(eta) * zface)
        return r * np.cos(phi), r * np.sin(phi), z
