"""Property: arbitrary events of arbitrary schemas read back equal."""

from __future__ import annotations

import tempfile
from pathlib import Path

import awkward as ak
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.schema.strategies import events_for, schemas

import giod
from giod.read.objects import INDEX_SUFFIX
from giod.read.tagindex import TAG_INDEX


def _stored_form(schema, events: list[dict]) -> list[dict]:
    """Events as stored: every collection and tag the writer had to fill."""
    return events


def _indices_only(schema, arr: ak.Array) -> list[dict]:
    """Read events with views dropped and rel_index renamed back to rel."""
    out = []
    for ev in arr.to_list():
        for coll, objs in list(ev.items()):
            if coll not in schema.collections:
                continue
            rels = schema.collection_type(coll).relations
            for obj in objs:
                for r in rels:
                    obj.pop(r, None)
                    obj[r] = obj.pop(r + INDEX_SUFFIX)
        out.append(ev)
    return out


def _normalise(schema, events: list[dict]) -> list[dict]:
    order = {c: list(schema.collection_type(c).fields) + list(schema.collection_type(c).relations)
             for c in schema.collections}
    out = []
    for ev in events:
        e = {}
        for k, v in ev.items():
            if k in order:
                e[k] = [{f: o[f] for f in order[k]} for o in v]
            else:
                e[k] = v
        out.append(e)
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(st.data())
def test_any_schema_round_trips(data):
    schema = data.draw(schemas())
    events = data.draw(events_for(schema, 6))
    if not events:
        return
    with tempfile.TemporaryDirectory() as tmp:
        fed = giod.open(Path(tmp) / "fed", create=True)
        ds = fed.create_dataset("prop", schema)
        split = data.draw(st.integers(1, len(events)))
        fmt = data.draw(st.sampled_from(["arrow", "parquet"]))
        with ds.writer(database_events=split, cluster_events=data.draw(st.integers(1, 4)),
                       container_format=fmt) as w:
            w.append(events)
        assert len(ds) == len(events)
        # the tag index is an Arrow file whatever the containers' format (giod.read.tagindex)
        assert {c.format for db in ds.databases() for c in db.containers if c.name != TAG_INDEX} == {fmt}
        assert {c.format for db in ds.databases() for c in db.containers if c.name == TAG_INDEX} <= {"arrow"}
        back = _indices_only(schema, ds.read())
        assert _normalise(schema, back) == _normalise(schema, events)
        fed.close()
