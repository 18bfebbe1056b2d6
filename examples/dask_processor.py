"""A coffea-style processor on giod data, through dask-awkward.

``giod.dask.from_selection`` turns a tag selection into a lazy
``dask_awkward.Array`` (one partition per database); the processor below is
written as for coffea's ``ProcessorABC`` and runs unchanged on it. Only the
jet columns it touches are read (dask-awkward's column projection), on
whatever scheduler computes the graph: this process, a local pool, or a
Dask cluster.

    python examples/dask_processor.py FEDERATION DATASET [--where "njets >= 2"] [--scheduler tcp://host:8786]

coffea is optional: without it the processor derives from a stand-in with
the same two methods.
"""

from __future__ import annotations

import argparse
from typing import Any

import awkward as ak
import dask
import dask_awkward as dak
import numpy as np
import vector

from giod.analysis import dijet
from giod.dask import from_selection

try:
    from coffea.processor import ProcessorABC
except ImportError:  # coffea not installed: the same interface

    class ProcessorABC:  # type: ignore[no-redef]
        def process(self, events: Any) -> Any:
            raise NotImplementedError

        def postprocess(self, accumulator: Any) -> Any:
            return accumulator


class DijetProcessor(ProcessorABC):
    """The di-jet mass of the two leading jets, as ``giod.analysis.dijet`` computes it."""

    def __init__(self, cuts: dijet.DijetCuts = dijet.DijetCuts()):
        self.cuts = cuts

    def process(self, events: dak.Array) -> dict[str, Any]:
        jets = events.jets
        good = jets[(jets.pt > self.cuts.jet_pt) & (abs(jets.eta) < self.cuts.jet_abs_eta)]
        good = good[dak.argsort(good.pt, axis=1, ascending=False)]
        two = good[dak.num(good, axis=1) >= 2]
        j1, j2 = (dak.zip({f: two[f][:, k] for f in dijet.JET_FIELDS}, with_name="Momentum4D",
                          behavior=vector.backends.awkward.behavior) for k in (0, 1))
        keep = abs(j1.eta - j2.eta) < self.cuts.delta_eta
        return {"mjj": (j1 + j2)[keep].mass, "events": dak.num(events, axis=0)}

    def postprocess(self, accumulator: dict[str, Any]) -> dict[str, Any]:
        h = dijet.mass_histogram()
        h.fill(mjj=np.asarray(ak.to_numpy(accumulator["mjj"]), dtype=np.float64))
        return {"mjj": h, "events": int(accumulator["events"])}


def run(selection: Any, processor: ProcessorABC, scheduler: Any = None) -> dict[str, Any]:
    """Build the graph on the selection, compute it, post-process."""
    events = from_selection(selection, ["jets"])
    (out,) = dask.compute(processor.process(events), scheduler=scheduler)
    return processor.postprocess(out)


def main() -> None:
    import giod

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("federation")
    parser.add_argument("dataset")
    parser.add_argument("--where", default=None, help="tag expression")
    parser.add_argument("--scheduler", default=None, help="a Dask scheduler address (default: local threads)")
    args = parser.parse_args()
    client = None
    if args.scheduler and "://" in args.scheduler:
        from distributed import Client

        client = Client(args.scheduler)
        print(f"Dask dashboard: {client.dashboard_link}")
    sel = giod.open(args.federation, create=False).dataset(args.dataset).select(args.where)
    out = run(sel, DijetProcessor(), scheduler=None if client else args.scheduler)
    print(f"{out['events']:,} events selected, {int(out['mjj'].sum()):,} in the di-jet mass histogram")


if __name__ == "__main__":
    main()
