"""The di-jet mass analysis of the GIOD paper, on any dataset with jets.

Select events with tags, take the two leading jets passing pT and |η| cuts,
require |Δη| below a cut, compute the invariant mass with ``vector`` and fill
a ``hist`` histogram. Works on any jet collection carrying pt, eta, phi and
mass — giod's own reconstruction, or NanoAOD's ``Jet`` brought in by import.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import awkward as ak
import hist
import numpy as np
import vector

from giod.distributed import add
from giod.errors import DataError

vector.register_awkward()

JET_FIELDS = ("pt", "eta", "phi", "mass")


@dataclass(frozen=True)
class DijetCuts:
    jet_pt: float = 30.0
    jet_abs_eta: float = 2.5
    delta_eta: float = 1.3


def find_jets(schema: Any) -> str:
    """The name of the jet collection: one called jets/Jet, else any with pt, eta, phi, mass."""
    candidates = [name for name in schema.collections
                  if set(JET_FIELDS) <= set(schema.collection_type(name).fields)]
    for name in candidates:
        if name.lower() in ("jets", "jet"):
            return name
    if candidates:
        return candidates[0]
    raise DataError("the dataset has no jet collection with fields pt, eta, phi and mass")


def mass_histogram(bins: int = 60, lo: float = 0.0, hi: float = 3000.0) -> hist.Hist:
    return hist.Hist.new.Reg(bins, lo, hi, name="mjj", label=r"$m_{jj}$ [GeV]").Double()


def dijet_masses(jets: ak.Array, cuts: DijetCuts = DijetCuts()) -> np.ndarray:
    """Di-jet invariant masses of events whose two leading jets pass the cuts."""
    good = jets[(jets.pt > cuts.jet_pt) & (abs(jets.eta) < cuts.jet_abs_eta)]
    good = good[ak.argsort(good.pt, axis=1, ascending=False)]
    two = good[ak.num(good, axis=1) >= 2]
    j1 = ak.zip({f: two[f][:, 0] for f in JET_FIELDS}, with_name="Momentum4D")
    j2 = ak.zip({f: two[f][:, 1] for f in JET_FIELDS}, with_name="Momentum4D")
    keep = abs(j1.eta - j2.eta) < cuts.delta_eta
    return ak.to_numpy((j1 + j2)[keep].mass).astype(np.float64)


def fill(h: hist.Hist, chunk: ak.Array, collection: str, cuts: DijetCuts = DijetCuts()) -> hist.Hist:
    h.fill(mjj=dijet_masses(chunk[collection], cuts))
    return h


def _fill_empty(template: hist.Hist, collection: str, cuts: DijetCuts, chunk: ak.Array) -> hist.Hist:
    return fill(template.copy(), chunk, collection, cuts)


def run(dataset: Any, expression: str | None = None, *, cuts: DijetCuts = DijetCuts(),
        collection: str | None = None, step_size: int = 200_000,
        histogram: hist.Hist | None = None, scheduler: Any = "sync", progress: Any = None) -> hist.Hist:
    """Fill the di-jet mass histogram over a dataset (optionally pre-selected by tags).

    ``scheduler`` is where the partitions (at most ``step_size`` entries
    each) run, as for ``Selection.map``: ``"sync"`` here, ``None`` a local
    pool, a Dask address or client a cluster; the histogram is the same.
    """
    coll = collection or find_jets(dataset.schema)
    h = histogram or mass_histogram()
    columns: Sequence[str] = [f"{coll}.{f}" for f in JET_FIELDS]
    part = dataset.select(expression).map(functools.partial(_fill_empty, h.copy().reset(), coll, cuts),
                                          columns=columns, scheduler=scheduler, partition_events=step_size,
                                          progress=progress)
    if part is None:
        return h
    return part if histogram is None else add(histogram, part, inplace=True)


def plot(h: hist.Hist, path: str, *, title: str = "", label: str = "giod") -> str:
    """Write the histogram as a PNG with the mplhep CMS-like style."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import mplhep

    plt.style.use(mplhep.style.CMS)
    fig, ax = plt.subplots(figsize=(8, 6))
    mplhep.histplot(h, ax=ax, histtype="fill", alpha=0.6, label=label)
    ax.set_yscale("log" if h.values().max(initial=0) > 100 else "linear")
    ax.set_ylabel("events / bin")
    ax.set_title(title or "di-jet invariant mass", fontsize=16)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
