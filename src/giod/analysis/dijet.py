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
import numpy as np

from giod import distributed
from giod.distributed import add
from giod.errors import DataError, needs_extra

try:
    import hist
    import vector
except ImportError as exc:
    raise needs_extra("plots", "the di-jet analysis", exc) from exc

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
            return str(name)
    if candidates:
        return str(candidates[0])
    raise DataError("the dataset has no jet collection with fields pt, eta, phi and mass")


def mass_histogram(bins: int = 60, lo: float = 0.0, hi: float = 3000.0) -> hist.Hist[Any]:
    return hist.Hist.new.Reg(bins, lo, hi, name="mjj", label=r"$m_{jj}$ [GeV]").Double()


def fine_mass_histogram(hi: float, width: float = 5.0) -> hist.Hist[Any]:
    """A mass histogram from 0 to ``hi`` GeV in bins of about ``width``: fine enough for the plot to
    merge bins to a width and range that follow the data (see :func:`giod.analysis.plots.display_bins`)."""
    return mass_histogram(max(int(round(hi / width)), 1), 0.0, hi)


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
    return np.asarray(ak.to_numpy((j1 + j2)[keep].mass), dtype=np.float64)


def fill(h: hist.Hist[Any], chunk: ak.Array, collection: str, cuts: DijetCuts = DijetCuts()) -> hist.Hist[Any]:
    h.fill(mjj=dijet_masses(chunk[collection], cuts))
    return h


def _fill_empty(template: hist.Hist[Any], collection: str, cuts: DijetCuts,
                chunk: ak.Array) -> tuple[hist.Hist[Any], tuple[int, ...]]:
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
        histogram: hist.Hist[Any] | None = None, scheduler: Any = "sync", progress: Any = None) -> hist.Hist[Any]:
    """Fill the di-jet mass histogram over a dataset (optionally pre-selected by tags).

    ``scheduler`` is where the partitions (at most ``step_size`` entries
    each) run, as for ``giod.distributed.map_selection``: ``"sync"`` here, ``None`` a local
    pool, a Dask address or client a cluster; the histogram is the same.
    """
    return run_with_cutflow(dataset, expression, cuts=cuts, collection=collection, step_size=step_size,
                            histogram=histogram, scheduler=scheduler, progress=progress)[0]


def run_with_cutflow(dataset: Any, expression: str | None = None, *, cuts: DijetCuts = DijetCuts(),
                     collection: str | None = None, step_size: int = 200_000, histogram: hist.Hist[Any] | None = None,
                     scheduler: Any = "sync", progress: Any = None) -> tuple[hist.Hist[Any], CutFlow]:
    """As :func:`run`, with the cut flow: the events of the dataset, of the tag selection, with two
    jets passing the pT and |η| cuts, passing the |Δη| cut, and with a mass inside the histogram."""
    coll = collection or find_jets(dataset.schema)
    h = histogram or mass_histogram()
    columns: Sequence[str] = [f"{coll}.{f}" for f in JET_FIELDS]
    fill = functools.partial(_fill_empty, h.copy().reset(), coll, cuts)
    part = distributed.map_selection(dataset.select(expression), fill, columns=columns, scheduler=scheduler,
                                     partition_events=step_size, progress=progress)
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


def figure(h: hist.Hist[Any], *, title: str = "", label: str = "giod", simulation: bool = False,
           com: float | None = None) -> Any:
    """The histogram as a matplotlib figure: points with Poisson (68 %) error bars over the bins that
    hold entries, the x range and bin width following the data, the bin width in the y label, the
    legend where it covers no point, and the giod label ("Simulation", √s in TeV when given)."""
    from matplotlib.ticker import MaxNLocator

    from giod.analysis import plots

    plt = plots.pyplot()
    counts, edges = plots.display_bins(h.values(), h.axes[0].edges)
    fig, ax = plt.subplots(figsize=(8, 6))
    filled = counts > 0
    low, high = plots.poisson_interval(counts)
    values = np.where(filled, counts, np.nan)  # an empty bin is not drawn: no point, no error bar
    plots.errorbar(ax, edges, values, low, high, color="black", label=label)
    ax.stairs(counts, edges, color="tab:blue", linewidth=1.5, alpha=0.7)
    ax.set_xlim(edges[0], edges[-1])
    top = float(np.max(high[filled], initial=1.0))
    ax.set_ylim(0, 1.35 * top)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=6, integer=True, steps=[1, 2, 5, 10]))  # counts: no 2.5 events
    ax.set_xlabel(h.axes[0].label or r"$m_{jj}$ [GeV]")
    ax.set_ylabel(plots.bin_width_text(float(edges[1] - edges[0])))
    if title:
        ax.set_title(title, fontsize=14, pad=28)
    plots.label(ax, simulation=simulation, com=com)
    fig.tight_layout()
    plots.legend(ax)
    return fig


def plot(h: hist.Hist[Any], path: str, *, title: str = "", label: str = "giod", simulation: bool = False,
         com: float | None = None) -> str:
    """Write the histogram as a PNG (see :func:`figure`)."""
    from giod.analysis import plots

    return plots.save(figure(h, title=title, label=label, simulation=simulation, com=com), path)
