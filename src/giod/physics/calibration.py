"""Energy calibration that the reconstruction derives for itself.

Two steps, both measured on simulated events of the packaged detector:

1. **Cluster scale.** ECAL clusters stay at the electromagnetic scale (the
   simulation's photons and electrons respond with 1). HCAL clusters are
   multiplied by ``hcal_scale``, the least-squares solution of
   ``E_ecal + hcal_scale * E_hcal = E_true`` over a charged-pion gun
   (5-300 GeV, |eta| < 2.8): it undoes most of the hadronic non-compensation.
2. **Jet energy scale.** In bins of |eta|, the median response
   ``raw_pt / truth_pt`` of reconstructed jets matched (dR < 0.2) to
   particle jets is measured in bins of the truth pT, on multi-jet events
   over a range of pT-hat; a correction ``1 / response`` is attached to the
   median raw pT of each bin (numerical inversion) and interpolated in
   ``log(raw_pt)``, constant beyond the first and last points.

The result is a small JSON file shipped in the package (``calibration.json``);
:func:`giod.physics.derivation.derive_calibration` makes a new one
(``python -m giod.physics.derivation`` rewrites the packaged file).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Self

import awkward as ak
import numpy as np

from giod.errors import ConfigError

__all__ = ["CALIBRATION_FILE", "ETA_EDGES", "Calibration", "match_jets", "truth_jets"]

CALIBRATION_FILE = "calibration.json"
#: |eta| bin edges of the jet energy scale.
ETA_EDGES = (0.0, 1.3, 2.0, 2.5, 3.0, 5.0)
_NEUTRINOS = (12, 14, 16)


@dataclass(frozen=True)
class Calibration:
    """Cluster scales and the jet energy correction (see the module docstring)."""

    hcal_scale: float = 1.0
    eta_edges: tuple[float, ...] = ETA_EDGES
    #: Per |eta| bin: raw pT points (GeV) and the correction factor at each.
    raw_pt: tuple[tuple[float, ...], ...] = field(default_factory=tuple)
    factor: tuple[tuple[float, ...], ...] = field(default_factory=tuple)
    description: str = "identity"

    def __post_init__(self) -> None:
        if not self.hcal_scale > 0:
            raise ConfigError(f"calibration: hcal_scale must be positive, got {self.hcal_scale}")
        edges = np.asarray(self.eta_edges)
        if len(edges) < 2 or np.any(np.diff(edges) <= 0):
            raise ConfigError("calibration: eta_edges must increase")
        if self.raw_pt or self.factor:
            if len(self.raw_pt) != len(edges) - 1 or len(self.factor) != len(edges) - 1:
                raise ConfigError("calibration: need one raw_pt and one factor list per eta bin")
            for pts, fac in zip(self.raw_pt, self.factor, strict=True):
                if len(pts) != len(fac) or not pts or np.any(np.diff(pts) <= 0) or min(pts) <= 0:
                    raise ConfigError("calibration: raw_pt points must be positive and increasing, "
                                      "one factor each")
                if not all(f > 0 for f in fac):
                    raise ConfigError("calibration: correction factors must be positive")

    @classmethod
    def identity(cls) -> Self:
        """No correction at all (what the calibration itself is derived with)."""
        return cls()

    @classmethod
    def load(cls, path: str | Path | None = None) -> Self:
        """Read a calibration file (default: the one shipped in the package)."""
        try:
            if path is None:
                text = resources.files("giod.physics").joinpath(CALIBRATION_FILE).read_text()
            else:
                text = Path(path).read_text(encoding="utf-8")
            data = json.loads(text)
        except OSError as exc:
            raise ConfigError(f"cannot read calibration file {path}: {exc.strerror}") from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(f"calibration file {path or CALIBRATION_FILE} is not valid JSON: {exc}") from exc
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        known = {"hcal_scale", "eta_edges", "raw_pt", "factor", "description"}
        if not isinstance(data, dict) or set(data) - known:
            extra = sorted(set(data) - known) if isinstance(data, dict) else []
            raise ConfigError(f"calibration: expected a mapping with keys {sorted(known)}"
                              + (f", unknown {extra}" if extra else ""))
        try:
            return cls(
                hcal_scale=float(data.get("hcal_scale", 1.0)),
                eta_edges=tuple(float(v) for v in data.get("eta_edges", ETA_EDGES)),
                raw_pt=tuple(tuple(float(v) for v in row) for row in data.get("raw_pt", ())),
                factor=tuple(tuple(float(v) for v in row) for row in data.get("factor", ())),
                description=str(data.get("description", "")),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"calibration: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["eta_edges"] = list(self.eta_edges)
        out["raw_pt"] = [[round(v, 4) for v in row] for row in self.raw_pt]
        out["factor"] = [[round(v, 5) for v in row] for row in self.factor]
        return out

    def save(self, path: str | Path) -> None:
        """Write the calibration as JSON, one line per key and per |eta| bin."""
        data = self.to_dict()
        lines = []
        for key, value in data.items():
            if key in ("raw_pt", "factor"):
                rows = ",\n  ".join(json.dumps(row) for row in value)
                lines.append(f' "{key}": [\n  {rows}\n ]')
            else:
                lines.append(f" {json.dumps(key)}: {json.dumps(value)}")
        Path(path).write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")

    def cluster_scale(self, calorimeter: np.ndarray) -> np.ndarray:
        """Scale of each cluster's raw energy, by ``Cluster.calorimeter`` code (1 ECAL, 2 HCAL)."""
        return np.where(np.asarray(calorimeter) == 2, self.hcal_scale, 1.0)

    def jet_factor(self, raw_pt: np.ndarray, eta: np.ndarray) -> np.ndarray:
        """Jet energy correction for jets of ``raw_pt`` (GeV) at ``eta``."""
        raw_pt = np.asarray(raw_pt, dtype=np.float64)
        out = np.ones_like(raw_pt)
        if not self.raw_pt:
            return out
        which = np.clip(np.searchsorted(self.eta_edges, np.abs(eta), side="right") - 1,
                        0, len(self.eta_edges) - 2)
        log_pt = np.log(np.maximum(raw_pt, 1e-3))
        for b, (pts, fac) in enumerate(zip(self.raw_pt, self.factor, strict=True)):
            sel = which == b
            out[sel] = np.interp(log_pt[sel], np.log(pts), fac)
        return out


# -- truth jets and matching (shared with the validation) ---------------------


def truth_jets(events: ak.Array, *, radius: float = 0.4, min_pt: float = 5.0) -> dict[str, np.ndarray]:
    """Particle jets: anti-kt on the final-state particles except neutrinos.

    Returns flat columns ``n`` (jets per event), ``pt``, ``eta``, ``phi``, ``mass``.
    """
    from giod.physics.jets import particle_jets

    mc = events.mcparticles
    n_all = np.asarray(ak.num(mc, axis=1), dtype=np.int64)
    flat = {c: ak.to_numpy(ak.flatten(mc[c], axis=1)) for c in ("status", "pdg", "px", "py", "pz", "e")}
    keep = (flat["status"] == 1) & ~np.isin(np.abs(flat["pdg"]), _NEUTRINOS)
    n = np.bincount(np.repeat(np.arange(len(n_all)), n_all)[keep], minlength=len(n_all))
    cols = [flat[c][keep].astype(np.float64) for c in ("px", "py", "pz", "e")]
    n_jets, px, py, pz, e = particle_jets(n, *cols, radius=radius, min_pt=min_pt)
    pt = np.hypot(px, py)
    return {"n": n_jets, "pt": pt, "eta": np.arcsinh(pz / np.maximum(pt, 1e-12)), "phi": np.arctan2(py, px),
            "mass": np.sqrt(np.maximum(e**2 - px**2 - py**2 - pz**2, 0.0))}


def match_jets(n_a: np.ndarray, eta_a: np.ndarray, phi_a: np.ndarray,
               n_b: np.ndarray, eta_b: np.ndarray, phi_b: np.ndarray, max_dr: float = 0.2) -> np.ndarray:
    """For each jet of ``a``, the flat index of the nearest jet of ``b`` in its event within ``max_dr``; -1 if none."""
    a = ak.unflatten(ak.zip({"eta": eta_a, "phi": phi_a, "i": np.arange(len(eta_a))}), n_a)
    b = ak.unflatten(ak.zip({"eta": eta_b, "phi": phi_b, "i": np.arange(len(eta_b))}), n_b)
    pairs = ak.cartesian([a, b], axis=1, nested=True)
    left, right = ak.unzip(pairs)
    dphi = np.mod(right.phi - left.phi + np.pi, 2 * np.pi) - np.pi
    dr = np.sqrt((right.eta - left.eta) ** 2 + dphi**2)
    best = ak.argmin(dr, axis=2, keepdims=True)
    best_dr = ak.fill_none(ak.flatten(dr[best], axis=2), np.inf)
    best_i = ak.fill_none(ak.flatten(right.i[best], axis=2), -1)
    out = np.asarray(ak.flatten(best_i), dtype=np.int64)
    return np.where(np.asarray(ak.flatten(best_dr)) < max_dr, out, -1)
