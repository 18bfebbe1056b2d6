"""Events → tables straight from the layout equals the generic path through awkward's operations.

``to_tables`` takes plain buffers from the events' layout (a collection's layout itself, a fixed-size
field's regular lists) and reads anything else through awkward; both must give the very same tables, and
the same errors."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.columns import fieldvalues, to_tables
from giod.errors import DataError
from giod.schema import Schema
from giod.testing import synthetic

SHAPED = """
schema_version: 1
name: shaped
types:
  Obj:
    fields: {a: float32, m: "float64[6]", v: "int16[4]", one: "float32[1]", f: float32}
collections:
  objs: Obj
containers:
  main: [objs]
tags:
  x: float32
"""


def generic(events: ak.Array, schema: Schema, containers: list[str]) -> dict[str, pa.Table]:
    """``to_tables`` through awkward's operations only: no plain buffer taken from a layout."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(fieldvalues.Objects, "fixed", lambda self, field, size: None)
        m.setattr(fieldvalues.Objects, "values", lambda self, field: None)
        m.setattr(fieldvalues.Objects, "lists", lambda self, field: None)
        return to_tables(ak.Array(events.layout), schema, containers)


def shaped_events(n: int, seed: int, nested: bool) -> ak.Array:
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 4, n)
    k = int(counts.sum())
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    m = rng.normal(size=(k, 2, 3))
    if nested:  # a list of lists: two regular levels
        mm: ak.contents.Content = ak.contents.RegularArray(
            ak.contents.RegularArray(ak.contents.NumpyArray(m.reshape(-1)), 3, zeros_length=2 * k), 2, zeros_length=k)
    else:  # one regular level of all six values
        mm = ak.contents.RegularArray(ak.contents.NumpyArray(m.reshape(-1)), 6, zeros_length=k)
    rec = ak.contents.RecordArray([
        ak.contents.NumpyArray(rng.normal(size=k).astype(np.float32)),
        mm,
        ak.contents.RegularArray(ak.contents.NumpyArray(rng.integers(-9, 9, 4 * k).astype(np.int64)), 4,
                                 zeros_length=k),
        ak.contents.RegularArray(ak.contents.NumpyArray(rng.normal(size=k)), 1, zeros_length=k),
        ak.contents.NumpyArray(rng.integers(0, 100, k).astype(np.int32)),
    ], ["a", "m", "v", "one", "f"], length=k)
    objs = ak.contents.ListOffsetArray(ak.index.Index64(offsets), rec)
    x = ak.contents.NumpyArray(rng.normal(size=n).astype(np.float32))
    return ak.Array(ak.contents.RecordArray([objs, x], ["objs", "x"], length=n))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), seed=st.integers(0, 2**16), cut=st.tuples(st.integers(0, 30), st.integers(0, 30)))
def test_synthetic_events_fast_equals_generic(n: int, seed: int, cut: tuple[int, int]) -> None:
    events = synthetic.events(n, seed=seed)
    lo, hi = sorted(cut)
    events = events[min(lo, n - 1):max(hi, min(lo, n - 1) + 1)]  # a slice: offsets that start past 0
    schema = synthetic.schema()
    containers = ["raw.tracker", "raw.calo", "reco", "tag"]
    fast = to_tables(events, schema, containers)
    assert fast.keys() == set(containers)
    for c, t in generic(events, schema, containers).items():
        assert fast[c].equals(t), c
        assert fast[c].schema == t.schema


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 20), seed=st.integers(0, 2**16), nested=st.booleans(), start=st.integers(0, 19))
def test_fixed_size_fields_fast_equals_generic(n: int, seed: int, nested: bool, start: int) -> None:
    schema = Schema.from_yaml(SHAPED)
    events = shaped_events(n, seed, nested)[min(start, n - 1):]
    taken: list[bool] = []
    fixed = fieldvalues.Objects.fixed
    with pytest.MonkeyPatch.context() as m:  # counts the fields read straight from the layout
        def counted(self: fieldvalues.Objects, field: str, size: int) -> np.ndarray | None:
            found = fixed(self, field, size)
            taken.append(found is not None)
            return found

        m.setattr(fieldvalues.Objects, "fixed", counted)
        fast = to_tables(events, schema, ["main", "tag"])
    slow = generic(events, schema, ["main", "tag"])
    if len(ak.flatten(events["objs"], axis=1)):
        assert taken == [True, True, True]  # m, v, one: no generic path
    for c in ("main", "tag"):
        assert fast[c].equals(slow[c]), c
    objs = ak.flatten(events["objs"], axis=1)
    got = fast["main"].column("objs").combine_chunks().flatten()
    assert np.array_equal(np.asarray(got.field("m").flatten()), np.asarray(objs["m"]).reshape(-1))
    vtype = got.field("v").type
    assert pa.types.is_fixed_size_list(vtype) and vtype.list_size == 4 and vtype.value_type == pa.int16()


def test_a_fixed_size_field_with_the_wrong_size_is_refused_alike() -> None:
    schema = Schema.from_yaml(SHAPED)
    events = shaped_events(5, 1, nested=False)
    objs = events.layout.content("objs")
    rec = objs.content
    wrong = ak.contents.RegularArray(ak.contents.NumpyArray(np.zeros(5 * rec.length)), 5, zeros_length=rec.length)
    bad_rec = ak.contents.RecordArray([rec.content(f) if f != "m" else wrong for f in rec.fields], rec.fields,
                                      length=rec.length)
    bad = ak.Array(ak.contents.RecordArray([objs.copy(content=bad_rec), events.layout.content("x")], ["objs", "x"],
                                           length=len(events)))
    messages = []
    for convert in (lambda: to_tables(bad, schema, ["main"]), lambda: generic(bad, schema, ["main"])):
        with pytest.raises(DataError, match=r"objs\.m: expected arrays of shape \[6\]") as err:
            convert()
        messages.append(str(err.value))
    assert messages[0] == messages[1]
