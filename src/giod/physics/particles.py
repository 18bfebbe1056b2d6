"""Generator particles as flat columns, and their conversion to ``mcparticles``.

Generators fill :class:`ParticleTable` blocks (hard partons, hadrons, decay
products, underlying event, pile-up), each with an event number per particle
and a parent given as a row of the same block. :meth:`ParticleTable.concat`
joins blocks; :meth:`ParticleTable.to_collection` sorts the rows by event
(keeping block order inside an event), turns parents into event-local indices
and builds the ``mcparticles`` collection.

Status codes: 1 final state, 2 decayed by the generator (pi0 -> gamma gamma,
and in Pythia every decayed hadron), 3 outgoing parton of the hard process.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import awkward as ak
import numpy as np

from giod.physics.layout import build_collection, stable_order

__all__ = ["PDG", "ParticleTable", "STATUS_DECAYED", "STATUS_FINAL", "STATUS_PARTON"]

STATUS_FINAL = 1
STATUS_DECAYED = 2
STATUS_PARTON = 3


class PDG:
    """PDG codes, masses (GeV) and charges of the particles the built-in generator makes."""

    GAMMA = 22
    ELECTRON = 11
    MUON = 13
    NU_MU = 14
    PI0 = 111
    PI_PLUS = 211
    K_PLUS = 321
    K_LONG = 130
    PROTON = 2212
    NEUTRON = 2112
    GLUON = 21

    MASS = {
        22: 0.0,
        11: 0.000510999,
        13: 0.1056584,
        12: 0.0,
        14: 0.0,
        16: 0.0,
        111: 0.1349768,
        211: 0.13957039,
        321: 0.493677,
        130: 0.497611,
        2212: 0.93827209,
        2112: 0.93956542,
        21: 0.0,
        1: 0.0047,
        2: 0.0022,
        3: 0.093,
    }
    # Leptons: the negative lepton has the positive code.
    CHARGE = {
        22: 0.0, 11: -1.0, 13: -1.0, 12: 0.0, 14: 0.0, 16: 0.0, 111: 0.0, 211: 1.0, 321: 1.0,
        130: 0.0, 2212: 1.0, 2112: 0.0, 21: 0.0, 1: -1 / 3, 2: 2 / 3, 3: -1 / 3,
    }

    @classmethod
    def masses(cls, pdg: np.ndarray) -> np.ndarray:
        """Mass of each code (antiparticles included); unknown codes get 0."""
        return _lookup(cls.MASS, np.abs(pdg))

    @classmethod
    def charges(cls, pdg: np.ndarray) -> np.ndarray:
        """Charge of each code in units of e; an antiparticle has the opposite charge."""
        return np.asarray(_lookup(cls.CHARGE, np.abs(pdg)) * np.sign(pdg))


def _lookup(table: dict[int, float], codes: np.ndarray) -> np.ndarray:
    keys = np.fromiter(table, dtype=np.int64)
    values = np.fromiter(table.values(), dtype=np.float64)
    order = np.argsort(keys)
    keys, values = keys[order], values[order]
    pos = np.clip(np.searchsorted(keys, codes), 0, len(keys) - 1)
    return np.where(keys[pos] == codes, values[pos], 0.0)


@dataclass
class ParticleTable:
    """Flat particle columns of many events; ``parent`` is a row of this table or -1.

    Rows need not be ordered by event; :meth:`to_collection` sorts them.
    """

    event: np.ndarray
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
    status: np.ndarray
    parent: np.ndarray

    def __len__(self) -> int:
        return len(self.event)

    @classmethod
    def empty(cls) -> ParticleTable:
        """A table without particles."""
        ints = {"event", "pdg", "status", "parent"}
        return cls(**{f.name: np.zeros(0, dtype=np.int64 if f.name in ints else np.float64) for f in fields(cls)})

    @classmethod
    def concat(cls, tables: list[ParticleTable], *, shift_parents: bool = True) -> ParticleTable:
        """Join blocks, shifting each block's parent rows (unless they already index the join)."""
        shift = np.cumsum([0] + [len(t) for t in tables[:-1]]) if shift_parents else [0] * len(tables)
        columns = {}
        for f in fields(cls):
            parts = [getattr(t, f.name) for t in tables]
            if f.name == "parent":
                parts = [np.where(p >= 0, p + s, -1) for p, s in zip(parts, shift, strict=True)]
            columns[f.name] = np.concatenate(parts)
        return cls(**columns)

    def to_collection(self, n_events: int) -> ak.Array:
        """The ``mcparticles`` collection of ``n_events`` events."""
        order = stable_order(self.event)
        n_per_event = np.bincount(self.event, minlength=n_events)
        first = np.zeros(n_events, dtype=np.int64)
        np.cumsum(n_per_event[:-1], out=first[1:])
        row_of = np.empty(len(order), dtype=np.int64)
        row_of[order] = np.arange(len(order))
        parent = self.parent[order]
        has_parent = parent >= 0
        local = np.full(len(order), -1, dtype=np.int64)
        local[has_parent] = row_of[parent[has_parent]] - first[self.event[order][has_parent]]
        columns = {f.name: getattr(self, f.name)[order] for f in fields(self) if f.name != "event"}
        columns["parent"] = local
        return build_collection("mcparticles", columns, n_per_event)
