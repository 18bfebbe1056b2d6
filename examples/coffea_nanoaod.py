"""A coffea processor on NanoAOD stored in giod.

Imports a NanoAOD file into a federation (unless the dataset is there
already), selects events with at least one muon by their counter, and runs
a coffea ``ProcessorABC`` over the selection twice: chunk by chunk in this
process (``giod.interchange.coffea.run``, coffea's ``Runner``) and as a lazy
Dask graph (``apply_to_selections``, coffea's ``apply_to_fileset``). The
processor uses NanoAOD's cross-references: the jet each muon sits in.

    python examples/coffea_nanoaod.py NANOAOD.root FEDERATION [--dataset ttbar] [--where "nMuon >= 1"]
"""

from __future__ import annotations

import argparse
from typing import Any

import awkward as ak
import dask
import dask_awkward as dak
from coffea.processor import ProcessorABC

import giod
from giod.errors import NotFound
from giod.interchange import import_root
from giod.interchange.coffea import apply_to_selections, run


class MuonJetProcessor(ProcessorABC):
    """Events, muons, muons matched to a jet, and the summed pt of those jets."""

    def process(self, events: Any) -> dict[str, Any]:
        lib: Any = dak if isinstance(events, dak.Array) else ak  # the same code builds a Dask graph or runs now
        muons = events.Muon
        matched = lib.flatten(lib.drop_none(muons.matched_jet.pt))  # NanoAOD's Muon_jetIdx, navigated
        return {
            "events": lib.num(muons, axis=0),
            "muons": lib.sum(lib.num(muons, axis=1)),
            "matched": lib.num(matched, axis=0),
            "matched_pt": lib.sum(matched),
        }

    def postprocess(self, accumulator: Any) -> Any:
        return accumulator


def open_dataset(path: str, federation: str, dataset: str) -> giod.Dataset:
    fed = giod.open(federation, create=True)
    try:
        return fed.dataset(dataset)
    except NotFound:
        import_root(fed, path, dataset)
        return fed.dataset(dataset)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("federation")
    parser.add_argument("--dataset", default="ttbar")
    parser.add_argument("--where", default="nMuon >= 1")
    args = parser.parse_args(argv)

    sel = open_dataset(args.file, args.federation, args.dataset).select(args.where)
    eager = run(MuonJetProcessor(), {args.dataset: sel})
    (lazy,) = dask.compute(apply_to_selections(MuonJetProcessor(), {args.dataset: sel}))
    out = lazy[args.dataset]
    print(f"{int(eager['events'])} events with {int(eager['muons'])} muons, {int(eager['matched'])} of them "
          f"in a jet (summed jet pt {float(eager['matched_pt']):.1f} GeV; Dask: {float(out['matched_pt']):.1f} GeV)")
    return {"run": eager, "dask": out}


if __name__ == "__main__":
    main()
