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


@dataclass(frozen=True)
class CutFlow:
    """Events kept after each cut of the analysis, in order: ``rows`` are ``(cut, events)``.

    Each count is at most the one before it; the last is what the histogram holds.
    """

    rows: tuple[tuple[str, int], ...]

    def table(self) -> list[tuple[str, str, str, str]]:
        """The rows as text: cut, events kept, share of the row before, share of the first row."""
        out = []
        first = self.rows[0][1] if self.rows else 0
        previous = first
        for cut, n in self.rows:
            out.append((cut, f"{n:,}", _percent(n, previous), _percent(n, first)))
            previous = n
        return out


def _percent(n: int, of: int) -> str:
    """``n / of`` in percent with its binomial uncertainty, e.g. ``61.2 ± 0.7 %``."""
    if of <= 0:
        return "—"
    p = n / of
    err = 100 * float(np.sqrt(p * (1 - p) / of))
    return f"{100 * p:.1f} ± {err:.1f} %" if 0 < n < of else f"{100 * p:.0f} %"


def _two_leading(jets: ak.Array, cuts: DijetCuts) -> tuple[ak.Array, ak.Array]:
    """The two leading jets passing the pT and |η| cuts, in the events that have two."""
    good = jets[(jets.pt > cuts.jet_pt) & (abs(jets.eta) < cuts.jet_abs_eta)]
    good = good[ak.argsort(good.pt, axis=1, ascending=False)]
    two = good[ak.num(good, axis=1) >= 2]
    j1 = ak.zip({f: two[f][:, 0] for f in JET_FIELDS}, with_name="Momentum4D")
    j2 = ak.zip({f: two[f][:, 1] for f in JET_FIELDS}, with_name="Momentum4D")
    return j1, j2


def dijet_masses(jets: ak.Array, cuts: DijetCuts = DijetCuts()) -> np.ndarray:
    """Di-jet invariant masses of events whose two leading jets pass the cuts."""
    j1, j2 = _two_leading(jets, cuts)
    keep = abs(j1.eta - j2.eta) < cuts.delta_eta
    return ak.to_numpy((j1 + j2)[keep].mass).astype(np.float64)


def fill(h: hist.Hist, chunk: ak.Array, collection: str, cuts: DijetCuts = DijetCuts()) -> hist.Hist:
    h.fill(mjj=dijet_masses(chunk[collection], cuts))
    return h


def _fill_empty(template: hist.Hist, collection: str, cuts: DijetCuts,
                chunk: ak.Array) -> tuple[hist.Hist, tuple[int, ...]]:
    """One partition: its histogram and the events left after each cut (they add up over partitions)."""
    h = template.copy()
    j1, j2 = _two_leading(chunk[collection], cuts)
    keep = abs(j1.eta - j2.eta) < cuts.delta_eta
    masses = ak.to_numpy((j1 + j2)[keep].mass).astype(np.float64)
    h.fill(mjj=masses)
    # counted apart from the histogram, over the edges of its axis: the cut flow checks the fill
    edges = h.axes[0].edges
    in_range = int(np.count_nonzero((masses >= edges[0]) & (masses < edges[-1])))
    return h, (len(chunk), len(j1), int(ak.sum(keep)), in_range)


def run(dataset: Any, expression: str | None = None, *, cuts: DijetCuts = DijetCuts(),
        collection: str | None = None, step_size: int = 200_000,
        histogram: hist.Hist | None = None, scheduler: Any = "sync", progress: Any = None) -> hist.Hist:
    """Fill the di-jet mass histogram over a dataset (optionally pre-selected by tags).

    ``scheduler`` is where the partitions (at most ``step_size`` entries
    each) run, as for ``Selection.map``: ``"sync"`` here, ``None`` a local
    pool, a Dask address or client a cluster; the histogram is the same.
    """
    return run_with_cutflow(dataset, expression, cuts=cuts, collection=collection, step_size=step_size,
                            histogram=histogram, scheduler=scheduler, progress=progress)[0]


def run_with_cutflow(dataset: Any, expression: str | None = None, *, cuts: DijetCuts = DijetCuts(),
                     collection: str | None = None, step_size: int = 200_000, histogram: hist.Hist | None = None,
                     scheduler: Any = "sync", progress: Any = None) -> tuple[hist.Hist, CutFlow]:
    """As :func:`run`, with the cut flow: the events of the dataset, of the tag selection, with two
    jets passing the pT and |η| cuts, passing the |Δη| cut, and with a mass inside the histogram."""
    coll = collection or find_jets(dataset.schema)
    h = histogram or mass_histogram()
    columns: Sequence[str] = [f"{coll}.{f}" for f in JET_FIELDS]
    part = dataset.select(expression).map(functools.partial(_fill_empty, h.copy().reset(), coll, cuts),
                                          columns=columns, scheduler=scheduler, partition_events=step_size,
                                          progress=progress)
    counts: tuple[int, ...] = (0, 0, 0, 0)
    if part is not None:
        filled, counts = part
        h = filled if histogram is None else add(histogram, filled, inplace=True)
    selected, two, deta, in_range = (int(c) for c in counts)
    lo, hi = h.axes[0].edges[0], h.axes[0].edges[-1]
    rows = [("events in the dataset", len(dataset))]
    if expression is not None and expression.strip():
        rows.append((f"tag selection: {expression}", selected))
    rows += [
        (f"≥ 2 jets with pT > {cuts.jet_pt:g} GeV, |η| < {cuts.jet_abs_eta:g}", two),
        (f"|Δη| of the two leading jets < {cuts.delta_eta:g}", deta),
        (f"m_jj within the histogram, {lo:g}–{hi:g} GeV", in_range),
    ]
    return h, CutFlow(tuple(rows))


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
