"""Databases written with an older schema read through the new one."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest

import giod

V1 = """
schema_version: 1
name: evo
types:
  Jet:
    fields: {pt: float32, eta: float32, nconst: int16}
collections: {jets: Jet}
tags: {njets: int32, ht: float32}
"""

V2 = """
schema_version: 1
name: evo
types:
  Jet:
    fields:
      pt: float32
      eta: float64                               # widened
      ncon: {type: int32, aliases: [nconst]}     # renamed and widened
      flavour: {type: int8, default: -1}         # new, with a default
collections: {jets: Jet}
tags:
  n_jets: {type: int32, aliases: [njets]}        # renamed
  ht: float32
  weight: {type: float32, default: 1.0}          # new
"""

V_BAD = V1.replace("nconst: int16", "nconst: int8")  # narrowing


def _events(n, seed):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 4, n)
    pt = ak.unflatten(rng.uniform(20, 200, counts.sum()).astype(np.float32), counts)
    eta = ak.unflatten(rng.uniform(-2, 2, counts.sum()).astype(np.float32), counts)
    nc = ak.unflatten(rng.integers(1, 40, counts.sum()).astype(np.int16), counts)
    return ak.zip({"jets": ak.zip({"pt": pt, "eta": eta, "nconst": nc}),
                   "njets": counts.astype(np.int32), "ht": ak.to_numpy(ak.sum(pt, axis=1)).astype(np.float32)},
                  depth_limit=1)


def test_old_databases_read_with_new_schema(local_fed):
    fed = local_fed
    ds = fed.create_dataset("evo", giod.Schema.from_yaml(V1))
    old = _events(200, 1)
    with ds.writer(database_events=100) as w:
        w.append(old)
    changes = fed.evolve_dataset("evo", giod.Schema.from_yaml(V2))
    assert changes  # described, human-readable
    ds = fed.dataset("evo")
    new = _events(50, 2)
    new = ak.zip({"jets": ak.zip({"pt": new.jets.pt, "eta": new.jets.eta, "ncon": new.jets.nconst,
                                  "flavour": ak.values_astype(new.jets.nconst % 3, np.int8)}),
                  "n_jets": new.njets, "ht": new.ht, "weight": new.ht * 0 + 0.5}, depth_limit=1)
    with ds.writer() as w:
        w.append(new)
    arr = ds.read()
    assert len(arr) == 250
    assert arr.jets.ncon[:200].to_list() == old.jets.nconst.to_list()
    assert ak.all(ak.flatten(arr.jets.flavour[:200]) == -1)
    assert arr.jets.flavour[200:].to_list() == new.jets.flavour.to_list()
    assert arr.n_jets.to_list() == old.njets.to_list() + new.n_jets.to_list()
    assert arr.weight.to_list() == [1.0] * 200 + [0.5] * 50
    assert str(ak.type(arr.jets.eta)).endswith("float64")
    # selection by a renamed tag reads old and new databases
    sel = ds.select("n_jets >= 2 and weight > 0.9")
    assert len(sel) == int(np.sum(ak.to_numpy(old.njets) >= 2))
    # projection onto a renamed member and a new member
    proj = ds.read(["jets.ncon", "jets.flavour"])
    assert ak.fields(proj.jets) == ["ncon", "flavour"]
    assert proj.jets.ncon[:200].to_list() == old.jets.nconst.to_list()
    # the snapshot before the evolution still reads with the old schema
    assert ds.at(3).schema.name == "evo"


def test_incompatible_evolution_is_refused(local_fed):
    fed = local_fed
    ds = fed.create_dataset("evo", giod.Schema.from_yaml(V1))
    with ds.writer() as w:
        w.append(_events(10, 3))
    v = fed.version
    with pytest.raises(giod.SchemaError):
        fed.evolve_dataset("evo", giod.Schema.from_yaml(V_BAD))
    assert fed.version == v
    assert len(fed.dataset("evo").read()) == 10
