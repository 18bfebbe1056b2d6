"""Write events, read them back: equality, projection, relations, snapshots."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest

import giod
from giod.testing import synthetic


def _gather(values: ak.Array, index: ak.Array) -> list:
    """Per event, per object: values[event][i] for each stored index i (plain Python)."""
    vals, idx = values.to_list(), index.to_list()
    return [[[v[i] for i in obj] for obj in ev] for v, ev in zip(vals, idx)]


def _stored(events: ak.Array) -> list:
    return events.to_list()


def _as_read(arr: ak.Array) -> list:
    """Read arrays carry linked views; compare on the stored indices."""
    out = []
    for ev in arr.to_list():
        for coll in ("tracks", "jets"):
            if coll in ev:
                for obj in ev[coll]:
                    for rel in ("hits", "tracks", "leading"):
                        if rel + "_index" in obj:
                            obj[rel] = obj.pop(rel + "_index")
        out.append(ev)
    return out


def test_write_read_equal(fed, model):
    ds = fed.create_dataset("qcd", model)
    events = synthetic.events(500, seed=1)
    with ds.writer(database_events=200, cluster_events=64) as w:
        w.append(events[:300])
        w.append(events[300:])
    assert [c.first_entry for c in w.commits] == [0, 200, 400]
    assert len(ds) == 500
    assert fed.datasets() == ["qcd"]
    back = ds.read()
    assert back.fields == sorted(model.collections) + list(model.tags)
    assert _as_read(back) == _stored(events[back.fields])


def test_projection_reads_only_what_is_asked(fed, model):
    ds = fed.create_dataset("qcd", model)
    events = synthetic.events(100, seed=2)
    with ds.writer() as w:
        w.append(events)
    arr = ds.read(["jets.pt", "ht"])
    assert arr.fields == ["jets", "ht"]
    assert ak.fields(arr.jets) == ["pt"]
    assert ak.all(arr.jets.pt == events.jets.pt)
    np.testing.assert_array_equal(ak.to_numpy(arr.ht), ak.to_numpy(events.ht))


def test_relations_navigate(fed, model):
    ds = fed.create_dataset("qcd", model)
    events = synthetic.events(200, seed=3)
    with ds.writer(database_events=70) as w:
        w.append(events)
    arr = ds.read(["jets", "tracks", "hits"])
    # jets.tracks.pt equals indexing the event's tracks by the stored indices
    assert arr.jets.tracks.pt.to_list() == _gather(events.tracks.pt, events.jets.tracks)
    # two levels: jet → tracks → hits
    track_hits_x = _gather(events.hits.x, events.tracks.hits)
    expect2 = [[[th[i] for i in jet] for jet in ev] for th, ev in zip(track_hits_x, events.jets.tracks.to_list())]
    assert arr.jets.tracks.hits.x.to_list() == expect2
    # one-to-one, with -1 meaning none
    lead = arr.jets.leading
    assert ak.all(ak.is_none(lead.pt, axis=-1) == (events.jets.leading == -1))


def test_event_and_object(fed, model):
    ds = fed.create_dataset("qcd", model)
    events = synthetic.events(300, seed=4)
    with ds.writer(database_events=100, cluster_events=30) as w:
        w.append(events)
    ev = ds.event(234)
    assert int(ev.event) == int(events.event[234])
    assert ev.jets.pt.to_list() == pytest.approx(events.jets.pt[234].to_list())
    j = next(i for i in range(len(events.jets[234])) if len(events.jets[234][i].tracks) > 0)
    want = [events.tracks.pt[234][i] for i in events.jets[234][j].tracks.to_list()]
    assert ev.jets[j].tracks.pt.to_list() == pytest.approx(want)
    db = [c for c in w.commits if c.first_entry <= 234 < c.first_entry + 100][0]
    obj = fed.object(f"db{db.database_id}/jets/234#{j}")
    assert float(obj.pt) == pytest.approx(float(events.jets.pt[234][j]))
    with pytest.raises(giod.NotFound):
        ds.event(300)
    with pytest.raises(giod.NotFound):
        fed.object(f"db{db.database_id}/jets/234#999")


def test_snapshot_does_not_change(fed, model):
    ds = fed.create_dataset("qcd", model)
    with ds.writer() as w:
        w.append(synthetic.events(50, seed=5))
    v = fed.version
    pinned = ds.at(v)
    sel = ds.select()
    with ds.writer() as w:
        w.append(synthetic.events(70, seed=6))
    assert len(pinned) == 50 and len(sel) == 50
    assert len(sel.read(["ht"])) == 50
    assert len(ds) == 120
    assert len(ds.at(v - 1)) == 0


def test_idempotent_commit_lands_once(fed, model):
    ds = fed.create_dataset("qcd", model)
    events = synthetic.events(40, seed=7)
    for _ in range(3):
        with ds.writer(idempotency_key="run42-file7") as w:
            w.append(events)
    assert len(ds) == 40
    assert [c.duplicate for c in w.commits] == [True]
    assert len(ds.databases()) == 1


def test_second_pass_adds_containers(fed, model):
    ds = fed.create_dataset("qcd", model)
    events = synthetic.events(120, seed=8)
    raw = events[["hits", "cells", "run", "event", "njets", "ntracks", "ht", "lead_pt"]]
    with ds.writer(database_events=50) as w:
        w.append(raw)
    v_raw = fed.version
    with pytest.raises(giod.NotFound):
        ds.read(["jets"])
    with ds.add_containers(program="reco", program_version="2.1", parameters={"cone": 0.4}) as p:
        for db in ds.databases():
            part = events[db.first_entry:db.stop_entry][["tracks", "jets"]]
            p.write(db, part)
    arr = ds.read(["jets", "tracks"])
    assert arr.jets.tracks.pt.to_list() == _gather(events.tracks.pt, events.jets.tracks)
    reco = ds.databases()[0].container("reco")
    assert (reco.program, reco.program_version, reco.parameters) == ("reco", "2.1", {"cone": 0.4})
    # the snapshot before the pass does not see it
    with pytest.raises(giod.NotFound):
        ds.at(v_raw).read(["jets"])
    # a second pass without replace is refused, nothing changes
    db0 = ds.databases()[0]
    with pytest.raises(giod.ConflictError):
        with ds.add_containers() as p:
            p.write(db0, events[: db0.n_events][["tracks", "jets"]])
    assert len(ds.read(["jets"])) == 120


def test_unlink_gives_the_stored_form(fed, model):
    from giod.read.objects import unlink

    ds = fed.create_dataset("qcd", model)
    events = synthetic.events(60, seed=9)
    with ds.writer() as w:
        w.append(events)
    back = unlink(ds.read(["hits", "tracks", "jets"]), model)
    assert back.to_list() == events[["hits", "tracks", "jets"]].to_list()
