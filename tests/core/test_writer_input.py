"""One check for every form of events a writer takes: nothing is cast with loss, dropped or half-written.

The forms: a list of dicts, an awkward Array, a dict of arrays, a dict of lists,
a pyarrow Table and RecordBatch; through ``ds.writer()`` and through a later
pass (``ds.add_containers()``).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import awkward as ak
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import giod
from giod.schema import DTYPES
from giod.store.consistency import fsck

TINY = """
schema_version: 1
name: tiny
types:
  Hit: {fields: {x: float32, layer: uint8, id: uint64}}
  Cluster: {fields: {e: float32}, relations: {hits: {to: hits, many: true}}}
collections: {hits: Hit, clusters: Cluster}
containers: {raw: [hits], reco: [clusters]}
tags: {njets: int32, met: float32}
"""


def _forms(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The same events in every form a writer takes (awkward's own forms only where awkward can hold them)."""
    columns = {k: [e.get(k) for e in events] for k in events[0]}
    out: dict[str, Any] = {"list of dicts": events, "dict of lists": columns}
    try:
        arr = ak.Array(events)
    except Exception:
        return out
    out["awkward"] = arr
    out["dict of arrays"] = {k: arr[k] for k in arr.fields}
    table = ak.to_arrow_table(arr, extensionarray=False)
    out["arrow table"] = table
    out["arrow batch"] = table.to_batches()[0]
    return out


def _refusals(append, events: list[dict[str, Any]]) -> dict[str, str]:
    out = {}
    for name, form in _forms(events).items():
        with pytest.raises(giod.DataError) as info:
            append(form)
        out[name] = str(info.value)
    return out


@pytest.fixture
def tiny(local_fed):
    return local_fed.create_dataset("tiny", giod.Schema.from_yaml(TINY))


def _append(ds, **options):
    def append(form):
        with ds.writer(**options) as w:
            w.append(form)
    return append


LITERAL = [{"hits": [{"x": 1.0, "layer": 3.9, "bogus": 5}], "njets": 2.7}]


@pytest.mark.parametrize("events,words", [
    (LITERAL, ["collection hits", "unknown field 'bogus'"]),
    ([{"hits": [{"x": 1.0, "layer": 3.9, "id": 1}], "njets": 2, "met": 0.5}], ["hits.layer", "uint8", "fraction"]),
    ([{"hits": [{"x": 1.0, "layer": 3, "id": 1}], "njets": 2.7, "met": 0.5}], ["tag njets", "int32", "fraction"]),
], ids=["literal", "layer 3.9", "njets 2.7"])
def test_the_issue_example_is_refused_alike_in_every_form(tiny, events, words):
    version = tiny.federation.version
    refused = _refusals(_append(tiny), events)
    assert len(refused) == 6
    assert len(set(refused.values())) == 1, refused
    assert all(w in refused["list of dicts"] for w in words)
    assert tiny.federation.version == version and len(tiny) == 0


def _hit(**change):
    return {"x": 1.5, "layer": 3, "id": 7, **change}


@pytest.mark.parametrize("events,words", [
    ([{"hits": [_hit(layer=3.0)], "njets": 1, "met": 0.5}], ["hits.layer", "fraction"]),
    ([{"hits": [_hit(layer=256)], "njets": 1, "met": 0.5}], ["hits.layer", "256", "uint8"]),
    ([{"hits": [_hit(layer=-1)], "njets": 1, "met": 0.5}], ["hits.layer", "-1", "uint8"]),
    ([{"hits": [_hit()], "njets": float("nan"), "met": 0.5}], ["tag njets", "int32"]),
    ([{"hits": [_hit(x="1.5")], "njets": 1, "met": 0.5}], ["hits.x", "float32", "strings"]),
    ([{"hits": [_hit(x=1e300)], "njets": 1, "met": 0.5}], ["hits.x", "1e+300", "float32"]),
    ([{"hits": [{"x": 1.5, "layer": 3}], "njets": 1, "met": 0.5}], ["hits", "'id' is missing"]),
    ([{"hits": [_hit(lyer=3)], "njets": 1, "met": 0.5}], ["hits", "'lyer'", "did you mean 'layer'"]),
    ([{"hitz": [_hit()], "njets": 1, "met": 0.5}], ["'hitz'", "did you mean 'hits'"]),
    ([{"hits": [_hit(layer=None)], "njets": 1, "met": 0.5}], ["hits.layer", "missing"]),
    ([{"hits": [_hit()], "njets": 1, "met": 0.5}, {"hits": [_hit()], "met": 0.5}], ["tag njets", "missing"]),
    ([{"hits": [_hit(), _hit(layer=True)], "njets": 1, "met": 0.5}], ["hits.layer", "mixed types"]),
    ([{"hits": [_hit(id=-5)], "njets": 1, "met": 0.5}], ["hits.id", "-5", "uint64"]),
    ([{"hits": [_hit(id=2**64)], "njets": 1, "met": 0.5}], ["hits.id", str(2**64), "uint64"]),
    ([{"hits": [_hit(id=2**63), _hit(id=-1)], "njets": 1, "met": 0.5}], ["hits.id", "uint64"]),
], ids=["integral float", "overflow", "negative into unsigned", "NaN into int", "string into float",
        "float32 overflow", "missing field", "unknown field", "unknown collection", "None", "missing tag",
        "bool among ints", "negative uint64", "beyond uint64", "beyond int64 and negative"])
def test_lossy_or_wrong_values_are_refused_alike(tiny, events, words):
    refused = _refusals(_append(tiny), events)
    assert len(set(refused.values())) == 1, refused
    assert all(w in refused["list of dicts"] for w in words), refused["list of dicts"]
    assert len(tiny) == 0 and not fsck(tiny.federation.store).problems


@pytest.mark.parametrize("events,words", [
    ([{"hits": [_hit()], "njets": True, "met": 0.5}], ["tag njets", "int32", "bool"]),
    ([{"hits": [_hit()], "njets": 1, "met": False}], ["tag met", "float32", "bool"]),
    ([{"hits": [_hit(layer=True)], "njets": 1, "met": 0.5}], ["hits.layer", "uint8", "bool"]),
    ([{"hits": [_hit(x=True)], "njets": 1, "met": 0.5}], ["hits.x", "float32", "bool"]),
], ids=["bool into int tag", "bool into float tag", "bool into int field", "bool into float field"])
def test_booleans_are_refused_by_number_fields(tiny, events, words):
    refused = _refusals(_append(tiny), events)
    assert len(set(refused.values())) == 1, refused
    assert all(w in refused["list of dicts"] for w in words), refused["list of dicts"]
    assert len(tiny) == 0


def test_numpy_booleans_are_refused_by_number_fields(tiny):
    hits = ak.Array([[_hit()], [_hit()]])
    for tag, value in (("njets", np.array([True, False])), ("met", np.array([True, True]))):
        events = {"hits": hits, "njets": np.array([1, 2], dtype=np.int32), "met": np.array([0.5, 1.5])}
        events[tag] = value
        with pytest.raises(giod.DataError, match=f"tag {tag}.*bool"):
            _append(tiny)(events)
    assert len(tiny) == 0


def test_integers_into_float_fields_are_kept(tiny):
    _append(tiny)([{"hits": [_hit(x=3)], "njets": np.int64(2), "met": 7}])
    back = tiny.read()
    assert back.hits.x.to_list() == [[3.0]] and back.met.to_list() == [7.0] and back.njets.to_list() == [2]


def test_uint64_beyond_int64_is_stored_exactly(tiny):
    events = [{"hits": [_hit(id=2**64 - 1), _hit(id=2**63)], "njets": 1, "met": 2**70}]
    for form in _forms(events).values():
        _append(tiny)(form)
    back = tiny.read()
    assert back.hits.id.to_list() == [[2**64 - 1, 2**63]] * 2
    assert back.met.to_list() == [float(np.float32(2**70))] * 2


def test_a_refused_append_leaves_the_writer_usable(tiny):
    good = [{"hits": [_hit(layer=i)], "njets": i, "met": 0.5} for i in range(3)]
    with tiny.writer(database_events=4) as w:
        w.append(good)
        for form in _forms(LITERAL).values():
            with pytest.raises(giod.DataError):
                w.append(form)
        w.append(good)
    assert tiny.read().hits.layer.to_list() == [[0], [1], [2]] * 2
    assert [d.n_events for d in tiny.databases()] == [4, 2]
    assert not fsck(tiny.federation.store).problems


def test_a_later_pass_checks_every_form_alike(tiny):
    with tiny.writer() as w:
        w.append([{"hits": [_hit(), _hit()], "njets": 1, "met": 0.5}])
    db = tiny.databases()[0]
    version = tiny.federation.version

    def extend(form):
        with tiny.add_containers() as p:
            p.write(db, form)

    for cluster, words in [({"e": 1.0, "hits": [0, 1], "bogus": 1}, ["clusters", "'bogus'"]),
                           ({"e": "1.0", "hits": [0, 1]}, ["clusters.e", "strings"]),
                           ({"e": 1.0, "hits": [0.0, 1.0]}, ["clusters.hits", "integers"]),
                           ({"e": 1.0, "hits": [0, 2]}, ["clusters.hits", "index 2 out of range"]),
                           ({"e": 1e39, "hits": [0]}, ["clusters.e", "float32"])]:
        refused = _refusals(extend, [{"clusters": [cluster]}])
        assert len(set(refused.values())) == 1, refused
        assert all(w in refused["list of dicts"] for w in words), refused["list of dicts"]
    assert tiny.federation.version == version
    assert not fsck(tiny.federation.store).problems
    extend([{"clusters": [{"e": 2.5, "hits": [1]}]}])
    assert tiny.read(["clusters"]).clusters.to_list() == [[{"e": 2.5, "hits_index": [1]}]]


# ------------------------------------------------------------------ property: every form, every dtype

EVERY_DTYPE = f"""
schema_version: 1
name: every_dtype
types:
  O: {{fields: {{{", ".join(f"f_{d}: {d}" for d in DTYPES)}}}}}
collections: {{objs: O}}
tags: {{{", ".join(f"t_{d}: {d}" for d in DTYPES)}}}
"""

KINDS = ("bool", "int", "float", "str")


def _natural(dtype: str) -> str:
    return "bool" if dtype == "bool" else "float" if dtype.startswith("float") else "int"


def _values(kind: str, dtype: str, fitting: bool) -> st.SearchStrategy[Any]:
    """Python values of ``kind``; with ``fitting``, only values a ``dtype`` field of that kind holds."""
    if kind == "bool":
        return st.booleans()
    if kind == "str":
        return st.text(max_size=3)
    if kind == "float":
        if fitting:
            return st.floats(width=32 if dtype == "float32" else 64)
        return st.one_of(st.floats(width=32), st.floats(), st.integers(-300, 300).map(float))
    if _natural(dtype) == "int":
        info = np.iinfo(dtype)
        if fitting:
            return st.integers(int(info.min), int(info.max))
        return st.integers(int(info.min) - 1, int(info.max) + 1)  # now and then one past either end
    return st.one_of(st.integers(-(2**65), 2**65), st.integers(-1000, 1000))


def _expected(kind: str, dtype: str, values: list[Any]) -> list[Any] | None:
    """What a column of ``values`` (all of ``kind``) must read back as in a ``dtype`` field; None: refused."""
    if not values:
        return []
    if kind == "str":
        return None
    if dtype == "bool":
        return values if kind == "bool" else None
    if kind == "bool":  # a bool is no number, whatever Python says
        return None
    if _natural(dtype) == "int":  # integers, exactly
        if kind == "float":
            return None
        info = np.iinfo(dtype)
        return values if all(info.min <= int(v) <= info.max for v in values) else None
    out = []
    for v in values:
        try:
            wide = float(v)
        except OverflowError:
            return None
        with np.errstate(over="ignore"):
            stored = float(np.dtype(dtype).type(wide))
        if math.isinf(stored) and math.isfinite(wide):
            return None
        out.append(stored)
    return out


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x == y or (x != x and y != y) for x, y in zip(a, b, strict=True))


@st.composite
def _columns(draw):
    """Events of the every-dtype schema: per field one kind of Python value; at most two fields get any kind
    and any value, the others values of their own kind that fit."""
    odd = draw(st.sets(st.sampled_from(DTYPES), max_size=2))
    kinds = {d: draw(st.sampled_from(KINDS)) if d in odd else _natural(d) for d in DTYPES}
    counts = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    n_objects = sum(counts)
    values = {d: _values(kinds[d], d, fitting=d not in odd) for d in DTYPES}
    objs = {d: draw(st.lists(values[d], min_size=n_objects, max_size=n_objects)) for d in DTYPES}
    tags = {d: draw(st.lists(values[d], min_size=len(counts), max_size=len(counts))) for d in DTYPES}
    starts = [0, *itertools.accumulate(counts)]
    events = [{"objs": [{f"f_{d}": objs[d][k] for d in DTYPES} for k in range(starts[i], starts[i + 1])],
               **{f"t_{d}": tags[d][i] for d in DTYPES}} for i in range(len(counts))]
    return kinds, objs, tags, events


@pytest.fixture(scope="module")
def every_dtype(tmp_path_factory):
    fed = giod.open(tmp_path_factory.mktemp("prop") / "fed", create=True)
    yield fed, giod.Schema.from_yaml(EVERY_DTYPE)
    fed.close()


_COUNTER = itertools.count()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@pytest.mark.slow  # generated inputs, each written
@given(_columns())
def test_every_form_stores_the_value_given_or_refuses_alike(every_dtype, drawn):
    fed, schema = every_dtype
    kinds, objs, tags, events = drawn
    expected = {f"f_{d}": _expected(kinds[d], d, objs[d]) for d in DTYPES}
    expected |= {f"t_{d}": _expected(kinds[d], d, tags[d]) for d in DTYPES}
    accepted = all(v is not None for v in expected.values())
    outcomes = {}
    for name, form in _forms(events).items():
        ds = fed.create_dataset(f"p{next(_COUNTER)}", schema)
        try:
            with ds.writer() as w:
                w.append(form)
        except giod.DataError as exc:
            outcomes[name] = str(exc)
            assert len(ds) == 0
            continue
        outcomes[name] = "stored"
        assert accepted, f"{name} stored {events!r}, expected {expected!r}"
        back = ds.read()
        for d in DTYPES:
            assert _same(ak.flatten(back.objs[f"f_{d}"]).to_list(), expected[f"f_{d}"]), (name, d)
            assert _same(back[f"t_{d}"].to_list(), expected[f"t_{d}"]), (name, d)
    assert len(set(outcomes.values())) == 1, outcomes
    assert (next(iter(outcomes.values())) == "stored") == accepted, (outcomes, expected)
    event("stored" if accepted else "refused")
    event(f"{len(outcomes)} forms")


def test_an_unknown_collection_is_named_first_even_beside_integers_beyond_int64(tiny):
    events = [{"hitz": [{"x": 2**64}], "hits": [_hit(id=2**64 - 1)], "njets": 1, "met": 0.5}]
    refused = _refusals(_append(tiny), events)
    assert set(refused.values()) == {refused["list of dicts"]}
    assert "unknown collection or tag 'hitz'" in refused["list of dicts"]
    assert "did you mean 'hits'" in refused["list of dicts"]
