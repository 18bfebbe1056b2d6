"""Write the golden federation of the first container format (Parquet).

The federation in ``golden_parquet/`` was written by giod before Arrow IPC
containers existed; ``tests/core/test_golden.py`` checks that every later
version still reads it. Run from the repository root to make it anew (only
if the old format itself must change, which it must not):

    python tests/data/make_golden_parquet.py

It writes 300 synthetic events over two databases (raw containers by the
writer, ``reco`` by a later pass), with relations and tags, and stores the
sums a reader must find in ``golden_parquet.json``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import awkward as ak
import numpy as np

import giod
from giod.testing import synthetic

HERE = Path(__file__).resolve().parent
TARGET = HERE / "golden_parquet"
EXPECTED = HERE / "golden_parquet.json"
RAW = ["hits", "cells", "run", "event", "njets", "ntracks", "ht", "lead_pt"]


def expected(events: ak.Array) -> dict[str, float | int]:
    """Sums over the stored values, as plain numbers (float64 sums of the float32 values)."""
    out: dict[str, float | int] = {"n_events": len(events)}
    for coll, fields in {"hits": ["x", "e", "layer"], "cells": ["eta", "e"],
                         "tracks": ["pt", "charge"], "jets": ["pt", "mass"]}.items():
        out[f"n_{coll}"] = int(ak.sum(ak.num(events[coll])))
        for f in fields:
            out[f"{coll}.{f}"] = float(ak.sum(ak.values_astype(events[coll][f], np.float64)))
    out["tracks.hits"] = int(ak.sum(events.tracks.hits))
    out["jets.tracks"] = int(ak.sum(events.jets.tracks))
    out["jets.leading"] = int(ak.sum(events.jets.leading))
    # a relation followed: the pt of every jet's tracks, summed
    pt = events.tracks.pt
    out["jets.tracks.pt"] = float(sum(float(np.sum(np.asarray(pt[i], np.float64)[np.asarray(t, np.int64)]))
                                      for i, ev in enumerate(events.jets.tracks.to_list()) for t in ev))
    for tag in ("event", "njets", "ntracks", "ht", "lead_pt"):
        out[tag] = float(np.sum(ak.to_numpy(events[tag]).astype(np.float64)))
    return out


def main() -> None:
    if TARGET.exists():
        shutil.rmtree(TARGET)
    events = synthetic.events(300, seed=13, hits=8, cells=6, tracks=3, jets=2)
    fed = giod.open(TARGET, create=True)
    ds = fed.create_dataset("golden", synthetic.schema())
    with ds.writer(database_events=180, cluster_events=50) as w:
        w.append(events[RAW])
    with ds.add_containers(program="reco", program_version="1") as p:
        for db in ds.databases():
            p.write(db, events[db.first_entry:db.stop_entry][["tracks", "jets"]])
    fed.close()
    EXPECTED.write_text(json.dumps(expected(events), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
