"""What one event holds that a display can draw, found by role and read as plain arrays.

A display does not know a dataset's data model in advance. It looks for
collections by *role* (tracker hits, tracks, calorimeter cells and clusters,
jets, muons, electrons, photons, taus) from their names and fields, and for
the missing transverse energy and the run/event numbers among the tags. The
same rules cover giod's simulated events (``tracker_hits``, ``tracks``,
``calo_cells``, ``clusters``, ``jets``; tags ``met``/``met_phi``) and
NanoAOD imports (``Jet``, ``Muon``, ``Electron``, ``Photon``, ``Tau``; tags
``MET_pt``/``MET_phi``). Jets, leptons and photons may also be given as
``px, py, pz`` (any case, with ``E`` or ``energy``; uproot's HZZ sample) and
the missing energy as ``MET_px``/``MET_py``: the display reads them as
``pt, eta, phi`` (and ``mass`` from the energy). Only the columns of those collections and tags are
read, and only from the database holding the event.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import awkward as ak
import numpy as np

from giod.errors import DataError, NotFound
from giod.read.locate import database_of

__all__ = ["MOMENTUM_ROLES", "ROLES", "Collection", "EventContent", "Relation", "find_roles", "load_event"]


@dataclass(frozen=True)
class Rule:
    fields: frozenset[str]  # the type must have these fields
    names: tuple[str, ...]  # collection names taken first (case-insensitive)
    hint: str | None = None  # else: a collection whose name contains this


#: Roles in the order they are claimed (a collection takes one role at most).
ROLES: dict[str, Rule] = {
    "hits": Rule(frozenset({"x", "y", "z"}), ("tracker_hits", "hits"), "hit"),
    "tracks": Rule(frozenset({"pt", "eta", "phi", "charge", "d0", "z0"}), ("tracks",), "track"),
    "cells": Rule(frozenset({"eta", "phi", "energy", "subdetector"}), ("calo_cells", "cells"), "cell"),
    "clusters": Rule(frozenset({"eta", "phi", "energy"}), ("clusters", "calo_clusters"), "cluster"),
    "jets": Rule(frozenset({"pt", "eta", "phi"}), ("jets", "jet")),
    "muons": Rule(frozenset({"pt", "eta", "phi"}), ("muons", "muon")),
    "electrons": Rule(frozenset({"pt", "eta", "phi"}), ("electrons", "electron")),
    "photons": Rule(frozenset({"pt", "eta", "phi"}), ("photons", "photon")),
    "taus": Rule(frozenset({"pt", "eta", "phi"}), ("taus", "tau")),
}

#: Roles whose objects are four-momenta, given as (pt, eta, phi[, mass]) or as (px, py, pz[, E]).
MOMENTUM_ROLES = ("jets", "muons", "electrons", "photons", "taus")
#: Field names (lower case) of the (px, py, pz[, E]) convention.
CARTESIAN = ("px", "py", "pz")
ENERGY_NAMES = ("e", "energy")
#: (magnitude, azimuth) tag pairs that give the missing transverse energy, first found wins.
MET_TAGS = (("met", "met_phi"), ("MET_pt", "MET_phi"), ("PuppiMET_pt", "PuppiMET_phi"), ("MET", "MET_phi"))
#: (x, y) tag pairs, taken when no (magnitude, azimuth) pair is there.
MET_XY_TAGS = (("MET_px", "MET_py"), ("met_px", "met_py"), ("MET_x", "MET_y"))
RUN_TAGS = ("run", "runNumber", "run_number")
EVENT_TAGS = ("event", "eventNumber", "event_number")
#: Events with more tags than this show only the ones the display uses (NanoAOD has hundreds).
MAX_TAGS = 64


@dataclass(frozen=True)
class Relation:
    """Indices into ``target`` (a collection name): ``offsets``/``indices`` lists, or one index per object."""

    target: str
    many: bool
    indices: np.ndarray  # -1 where a one-to-one relation points nowhere
    offsets: np.ndarray | None = None  # many: object k links indices[offsets[k]:offsets[k+1]]

    def of(self, k: int) -> list[int]:
        if self.offsets is None:
            i = int(self.indices[k])
            return [] if i < 0 else [i]
        return [int(i) for i in self.indices[self.offsets[k]:self.offsets[k + 1]]]

    def lists(self) -> list[list[int]]:
        if self.offsets is None:
            return [[] if i < 0 else [int(i)] for i in self.indices]
        return [a.tolist() for a in np.split(self.indices, self.offsets[1:-1])] if len(self.offsets) > 1 else []


@dataclass
class Collection:
    """The objects of one role in one event: scalar fields as numpy arrays, relations as indices."""

    role: str
    name: str
    type: str
    fields: dict[str, np.ndarray]
    relations: dict[str, Relation] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(next(iter(self.fields.values()))) if self.fields else 0


@dataclass
class EventContent:
    dataset: str
    entry: int
    version: int
    database: int
    run: int | None
    event: int | None
    collections: dict[str, Collection]  # by role
    met: dict[str, Any] | None  # {"pt", "phi", "source"}
    tags: dict[str, Any]
    notes: list[str] = field(default_factory=list)  # what the display could not use, and why

    def role_of(self, collection: str) -> str | None:
        for role, c in self.collections.items():
            if c.name == collection:
                return role
        return None


def _by_lower(names: Any) -> dict[str, str]:
    return {n.lower(): n for n in names}


def _fills(role: str, rule: Rule, fields: set[str]) -> bool:
    if rule.fields <= fields:
        return True
    return role in MOMENTUM_ROLES and all(c in _by_lower(fields) for c in CARTESIAN)


def find_roles(schema: Any) -> dict[str, str]:
    """Role -> collection name for every role a data model can fill."""
    fields = {name: set(schema.collection_type(name).fields) for name in schema.collections}
    by_lower = {name.lower(): name for name in schema.collections}
    taken: set[str] = set()
    out: dict[str, str] = {}
    for role, rule in ROLES.items():
        choice = None
        for n in rule.names:
            name = by_lower.get(n)
            if name is not None and name not in taken and _fills(role, rule, fields[name]):
                choice = name
                break
        if choice is None and rule.hint is not None:
            for name in schema.collections:
                if name not in taken and rule.hint in name.lower() and _fills(role, rule, fields[name]):
                    choice = name
                    break
        if choice is not None:
            out[role] = choice
            taken.add(choice)
    return out


def _first_tag(schema: Any, candidates: tuple[str, ...]) -> str | None:
    return next((t for t in candidates if t in schema.tags), None)


def _met_tags(schema: Any) -> tuple[str, str, bool] | None:
    """The missing-energy tag pair, and whether it is (x, y) rather than (magnitude, azimuth)."""
    for pairs, xy in ((MET_TAGS, False), (MET_XY_TAGS, True)):
        found = next(((a, b) for a, b in pairs if a in schema.tags and b in schema.tags), None)
        if found is not None:
            return (*found, xy)
    return None


def _database_of(dataset: Any, entry: int) -> Any:
    # the catalog's index finds it (two lookups), not a listing of every database of the dataset
    db = database_of(dataset.snapshot, entry)
    if db is not None:
        return db
    n = int(dataset.summary()["n_events"])
    if n == 0:
        raise NotFound(f"dataset {dataset.name} has no events yet")
    raise NotFound(f"dataset {dataset.name} has no entry {entry} (entries 0..{n - 1})")


def _scalar(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return value


def load_event(dataset: Any, entry: int) -> EventContent:
    """Read what the display draws of event ``entry`` (NotFound, DataError when there is nothing to draw)."""
    if entry < 0:
        raise NotFound(f"entry {entry} is negative: entries count from 0")
    ds = dataset.pinned()
    schema = ds.schema
    db = _database_of(ds, entry)
    stored = {c.name for c in db.containers}
    roles = find_roles(schema)
    notes: list[str] = []
    usable = {}
    for role, name in roles.items():
        container = schema.container_of(name)
        if container in stored:
            usable[role] = name
        else:
            notes.append(f"{name} ({role}) is not stored for this event yet: database {db.id} has no "
                         f"container {container!r}")
    tags_stored = "tag" in stored
    met = _met_tags(schema) if tags_stored else None
    run_tag = _first_tag(schema, RUN_TAGS) if tags_stored else None
    event_tag = _first_tag(schema, EVENT_TAGS) if tags_stored else None
    if not usable and met is None:
        wanted = ", ".join(f"{role} ({'/'.join(r.names)})" for role, r in ROLES.items())
        raise DataError(f"event {entry} of dataset {ds.name} has nothing the display draws: it needs one of "
                        f"{wanted} (objects with pt, eta, phi or px, py, pz), or missing-energy tags "
                        f"({', '.join(a for a, _ in MET_TAGS + MET_XY_TAGS)})"
                        + (f"; {'; '.join(notes)}" if notes else ""))
    tag_names: list[str] = []
    if tags_stored:
        if len(schema.tags) <= MAX_TAGS:
            tag_names = list(schema.tags)
        else:
            tag_names = [t for t in (run_tag, event_tag, *(met[:2] if met else ())) if t is not None]
            tag_names += [t for t in ("luminosityBlock", "PV_npvs", "PV_npvsGood") if t in schema.tags]
            notes.append(f"{len(schema.tags) - len(tag_names)} more tags are not shown")
    columns = list(dict.fromkeys([*usable.values(), *tag_names]))
    record = ds.event(entry, columns)
    collections = {role: _collection(role, name, schema, record[name]) for role, name in usable.items()}
    tags = {t: _scalar(record[t]) for t in tag_names}
    met_out = None
    if met is not None:
        a, b = float(tags[met[0]]), float(tags[met[1]])
        pt, phi = (math.hypot(a, b), math.atan2(b, a)) if met[2] else (a, b)
        met_out = {"pt": pt, "phi": phi, "source": f"tags {met[0]}, {met[1]}"}
    return EventContent(
        dataset=ds.name, entry=entry, version=int(ds.version), database=db.id,
        run=None if run_tag is None else int(tags[run_tag]),
        event=None if event_tag is None else int(tags[event_tag]),
        collections=collections, met=met_out, tags=tags, notes=notes)


def _collection(role: str, name: str, schema: Any, objects: ak.Array) -> Collection:
    tdef = schema.collection_type(name)
    fields: dict[str, np.ndarray] = {}
    for fname, fdef in tdef.fields.items():
        if fdef.shape:  # arrays per object are not drawn nor listed
            continue
        fields[fname] = np.asarray(ak.to_numpy(objects[fname]))
    if role in MOMENTUM_ROLES and "pt" not in fields:
        fields |= _polar(fields)
    relations: dict[str, Relation] = {}
    for rname, rdef in tdef.relations.items():
        col = objects[f"{rname}_index"]
        if rdef.many:
            counts = np.asarray(ak.to_numpy(ak.num(col, axis=1)), dtype=np.int64)
            offsets = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(counts, out=offsets[1:])
            flat = np.asarray(ak.to_numpy(ak.flatten(col, axis=1)), dtype=np.int64)
            relations[rname] = Relation(rdef.target, True, flat, offsets)
        else:
            relations[rname] = Relation(rdef.target, False, np.asarray(ak.to_numpy(col), dtype=np.int64))
    return Collection(role, name, tdef.name, fields, relations)


def _polar(fields: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``pt, eta, phi`` (and ``mass``, ``charge``) of objects given as (px, py, pz[, E]); the stored fields stay."""
    lower = _by_lower(fields)
    px, py, pz = (fields[lower[c]].astype(np.float64) for c in CARTESIAN)
    pt = np.hypot(px, py)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = {"pt": pt, "eta": np.arcsinh(pz / pt), "phi": np.arctan2(py, px)}
    energy = next((fields[lower[e]] for e in ENERGY_NAMES if e in lower), None)
    if energy is not None:
        m2 = energy.astype(np.float64) ** 2 - (pt * pt + pz * pz)
        out["mass"] = np.sqrt(np.maximum(m2, 0.0))  # rounding makes light objects slightly tachyonic
    if "charge" not in fields and "charge" in lower:
        out["charge"] = fields[lower["charge"]]
    return out
