"""A later pass: relation indices checked against containers read before, columns from any awkward layout."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pyarrow as pa
import pytest

import giod
from giod.columns import to_tables
from giod.storage.checksum import checksum_stream
from giod.storage.container import _ObjectCounts, object_counts
from giod.testing import synthetic

RAW = ["hits", "cells", "run", "event", "njets", "ntracks", "ht", "lead_pt"]


def _raw_dataset(fed: giod.Federation, model: giod.Schema, n: int, seed: int, **options: int
                 ) -> tuple[giod.Dataset, ak.Array]:
    ds = fed.create_dataset(f"qcd{seed}", model)
    events = synthetic.events(n, seed=seed)
    with ds.writer(database_events=40, **options) as w:
        w.append(events[RAW])
    return ds, events


def test_counts_of_a_read_container_serve_the_pass(local_fed, model):
    ds, events = _raw_dataset(local_fed, model, 100, seed=21)
    db = ds.databases()[0]
    hits = db.container("raw.tracker")
    assert object_counts(hits.path, hits.size, "hits") is None  # nothing read yet
    part = ds.at(ds.version).read(["hits.layer"])  # every event of every database
    assert len(part) == 100
    counts = object_counts(hits.path, hits.size, "hits")
    assert counts is not None
    assert counts.tolist() == ak.num(events.hits[: db.n_events]).to_list()
    assert object_counts(hits.path, hits.size + 1, "hits") is None  # another file
    # a pass whose track → hit indices overflow one event is refused, with the counts from that read
    reco = events[db.first_entry : db.stop_entry][["tracks", "jets"]]
    event = int(np.flatnonzero(ak.num(reco.tracks) > 0)[0])
    bad = ak.Array({"tracks": ak.to_list(reco.tracks), "jets": ak.to_list(reco.jets)})
    too_far = ak.to_list(bad.tracks)
    too_far[event][0]["hits"] = [int(counts[event])]
    with pytest.raises(giod.DataError, match=rf"tracks.hits: index {counts[event]} out of range"):
        with ds.add_containers() as p:
            p.write(db, ak.Array({"tracks": too_far, "jets": ak.to_list(reco.jets)}))
    # the right pass lands, its files carry the checksums the catalog records
    outputs = []
    with ds.add_containers() as p:
        for d in ds.databases():
            outputs.append(p.write(d, events[d.first_entry : d.stop_entry][["tracks", "jets"]]))
    site = local_fed.site()
    for spec in (s for out in outputs for s in out.containers):
        with open(site.local_path(spec.path), "rb") as fh:
            assert checksum_stream(fh) == (spec.checksum, spec.size)
    linked = ds.read(["tracks", "hits"])
    assert linked.tracks.hits.x.to_list() == [[[ev_hits[i]["x"] for i in t] for t in ev_tracks]
                                              for ev_hits, ev_tracks in zip(events.hits.to_list(),
                                                                            events.tracks.hits.to_list())]


def test_counts_are_known_once_every_event_was_read(local_fed, model):
    ds, events = _raw_dataset(local_fed, model, 40, seed=22, cluster_events=10)
    db = ds.databases()[0]
    cells = db.container("raw.calo")
    # chunks of 15, 15 and 10 events, read by clusters of 10: the first two read events 0 to 29
    chunks = iter(ds.select().iterate(["cells.e"], step_size=15))
    next(chunks)
    next(chunks)
    assert object_counts(cells.path, cells.size, "cells") is None
    next(chunks)
    counts = object_counts(cells.path, cells.size, "cells")
    assert counts is not None and counts.tolist() == ak.num(events.cells).to_list()


def test_counts_forget_the_oldest_files():
    counts = _ObjectCounts(max_events=400)
    table = pa.table({"c": pa.array([[0] * (i % 3) for i in range(100)]), "tag": pa.array(np.arange(100))})
    half = np.arange(50)
    for i in range(5):
        counts.remember((f"f{i}", 10), 100, table.slice(0, 50), half)
    assert counts.get(("f4", 10), "c") is None  # half of its events are known
    counts.remember(("f4", 10), 100, table.slice(50), half + 50)
    assert counts.get(("f4", 10), "c").tolist() == [i % 3 for i in range(100)]
    assert counts.get(("f4", 10), "tag") is None  # not a collection
    assert list(counts._files) == [("f1", 10), ("f2", 10), ("f3", 10), ("f4", 10)]  # 400 events at most


@pytest.mark.parametrize("layout", ["taken", "masked", "sliced"])
def test_any_layout_gives_the_same_columns(model, layout):
    events = synthetic.events(80, seed=23)
    # the same events in other awkward layouts (list arrays with starts/stops, indexed records, offsets > 0)
    if layout == "taken":
        other = events[np.arange(80)[::-1]][::-1]
    elif layout == "masked":
        other = events[np.ones(80, dtype=bool)]
    else:
        events = events[7:70]
        other = ak.Array(events.layout)
    assert other.to_list() == events.to_list()
    want = to_tables(ak.to_packed(events), model, ["raw.tracker", "reco", "tag"])
    got = to_tables(other, model, ["raw.tracker", "reco", "tag"])
    for name, table in want.items():
        assert got[name].equals(table), name


@pytest.mark.parametrize("relation", ["tracks.hits", "jets.leading", "jets.tracks"])
def test_out_of_range_index_is_named_in_any_layout(model, relation):
    events = synthetic.events(30, seed=24)
    collection, rel = relation.split(".")
    target = "hits" if rel == "hits" else "tracks"
    data = events.to_list()
    event = next(i for i, ev in enumerate(data) if ev[collection] and ev[target])
    n = len(data[event][target])
    obj = data[event][collection][0]
    obj[rel] = n if rel == "leading" else [*obj[rel][:-1], n]
    packed = ak.Array(data)
    for arr in (packed, packed[np.arange(30)]):
        with pytest.raises(giod.DataError, match=rf"{relation}: index {n} out of range \(the event has {n} "):
            to_tables(arr, model, ["reco"])
