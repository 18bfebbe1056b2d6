"""Expressions over objects: random expressions against a per-event Python reference.

The reference walks the events one by one, as a physicist would write the cut
in a loop; a missing value (an index past the last object, the min or max of
no objects) makes the comparison that reads it false.
"""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.errors import ExpressionError
from giod.expression import parse

FIELDS = {"ht": "float32", "k": "int32"}
COLLECTIONS = {"Jet": {"pt": "float32", "eta": "float32", "id": "int16", "tight": "bool"},
               "Muon": {"pt": "float32", "eta": "float32"}}
MISSING = object()

_VALUES = st.integers(-4, 60).map(float)  # whole numbers: sums are exact in any order


def _object(collection: str) -> st.SearchStrategy[dict]:
    if collection == "Jet":
        return st.fixed_dictionaries({"pt": _VALUES, "eta": _VALUES, "id": st.integers(-3, 5),
                                      "tight": st.booleans()})
    return st.fixed_dictionaries({"pt": _VALUES, "eta": _VALUES})


EVENTS = st.lists(st.fixed_dictionaries({
    "ht": _VALUES, "k": st.integers(-5, 5),
    "Jet": st.lists(_object("Jet"), max_size=4), "Muon": st.lists(_object("Muon"), max_size=3),
}), max_size=8)


def _num(op, a, b):
    if a is MISSING or b is MISSING:
        return MISSING
    return {"+": a + b, "-": a - b, "*": a * b}[op]


def _cmp(op, a, b):
    if a is MISSING or b is MISSING:
        return False
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]


# Each strategy draws (text, reference); a per-object reference takes (event, object).

def per_object_number(collection: str):
    fields = ["pt", "eta", "id"] if collection == "Jet" else ["pt", "eta"]
    field = st.sampled_from(fields).map(lambda f: (f"{collection}.{f}", lambda e, o, f=f: o[f]))
    leaf = st.one_of(
        field,
        st.integers(-3, 40).map(lambda c: (str(c), lambda e, o, c=c: c)),
        st.just(("ht", lambda e, o: e["ht"])),
    )
    tree = st.recursive(leaf, lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(
            lambda t: (f"({t[0][0]} {t[1]} {t[2][0]})", lambda e, o, t=t: _num(t[1], t[0][1](e, o), t[2][1](e, o)))),
        inner.map(lambda a: (f"abs({a[0]})", lambda e, o, a=a: abs(a[1](e, o)))),
    ), max_leaves=4)
    # at least one field of the objects, so that the value is one per object
    return st.one_of(field, st.tuples(field, st.sampled_from(["+", "-", "*"]), tree).map(
        lambda t: (f"({t[0][0]} {t[1]} {t[2][0]})", lambda e, o, t=t: _num(t[1], t[0][1](e, o), t[2][1](e, o)))))


def per_object_condition(collection: str):
    comparison = st.tuples(per_object_number(collection), st.sampled_from(["<", "<=", ">", ">=", "==", "!="]),
                           per_object_number(collection)).map(
        lambda t: (f"({t[0][0]} {t[1]} {t[2][0]})", lambda e, o, t=t: _cmp(t[1], t[0][1](e, o), t[2][1](e, o))))
    leaf = comparison if collection == "Muon" else st.one_of(
        comparison, st.just(("Jet.tight", lambda e, o: o["tight"])))
    return st.recursive(leaf, lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(
            lambda t: (f"({t[0][0]} {t[1]} {t[2][0]})",
                       lambda e, o, t=t: (t[0][1](e, o) and t[2][1](e, o)) if t[1] == "and"
                       else (t[0][1](e, o) or t[2][1](e, o)))),
        inner.map(lambda a: (f"(not {a[0]})", lambda e, o, a=a: not a[1](e, o))),
    ), max_leaves=3)


def _reduced(function: str, values: list):
    if function == "sum":
        return sum(values, 0.0)
    if not values:
        return MISSING
    return min(values) if function == "min" else max(values)


def _at(values: list, k: int):
    return values[k] if -len(values) <= k < len(values) else MISSING


@st.composite
def per_event_number(draw):
    collection = draw(st.sampled_from(["Jet", "Muon"]))
    kind = draw(st.sampled_from(["tag", "counter", "count", "reduce", "index", "const"]))
    if kind == "tag":
        name = draw(st.sampled_from(["ht", "k"]))
        return name, lambda e, name=name: e[name]
    if kind == "counter":
        return f"n{collection}", lambda e, c=collection: len(e[c])
    if kind == "count":
        text, ref = draw(per_object_condition(collection))
        return f"count({text})", lambda e, c=collection, ref=ref: sum(bool(ref(e, o)) for o in e[c])
    if kind == "reduce":
        function = draw(st.sampled_from(["sum", "min", "max"]))
        text, ref = draw(per_object_number(collection))
        return f"{function}({text})", lambda e, c=collection, f=function, ref=ref: _reduced(
            f, [ref(e, o) for o in e[c]])
    if kind == "index":
        k = draw(st.integers(-3, 3))
        text, ref = draw(per_object_number(collection))
        return f"({text})[{k}]", lambda e, c=collection, k=k, ref=ref: _at([ref(e, o) for o in e[c]], k)
    value = draw(st.integers(-2, 80))
    return str(value), lambda e, v=value: v


@st.composite
def per_event_condition(draw, depth: int = 0):
    choice = draw(st.sampled_from(["compare", "any", "all"] + (["and", "or", "not"] if depth < 2 else [])))
    if choice == "compare":
        (a, fa), op, (b, fb) = draw(per_event_number()), draw(st.sampled_from(["<", ">=", "==", "!="])), \
            draw(per_event_number())
        return f"({a} {op} {b})", lambda e: _cmp(op, fa(e), fb(e))
    if choice in ("any", "all"):
        collection = draw(st.sampled_from(["Jet", "Muon"]))
        text, ref = draw(per_object_condition(collection))
        combine = any if choice == "any" else all
        return f"{choice}({text})", lambda e: combine(bool(ref(e, o)) for o in e[collection])
    if choice == "not":
        text, ref = draw(per_event_condition(depth + 1))
        return f"(not {text})", lambda e: not ref(e)
    (a, fa), (b, fb) = draw(per_event_condition(depth + 1)), draw(per_event_condition(depth + 1))
    if choice == "and":
        return f"({a} and {b})", lambda e: fa(e) and fb(e)
    return f"({a} or {b})", lambda e: fa(e) or fb(e)


_DTYPES = {"pt": np.float32, "eta": np.float32, "id": np.int16, "tight": np.bool_}


def _columns(events: list[dict]) -> tuple[dict, dict]:
    """Tags as numpy, and each collection as a typed awkward list of records (also when empty)."""
    tags = {"ht": np.array([e["ht"] for e in events], dtype=np.float32),
            "k": np.array([e["k"] for e in events], dtype=np.int32)}
    objects = {}
    for collection, fields in COLLECTIONS.items():
        offsets = np.cumsum([0] + [len(e[collection]) for e in events]).astype(np.int64)
        flat = [o for e in events for o in e[collection]]
        record = ak.contents.RecordArray(
            [ak.contents.NumpyArray(np.array([o[f] for o in flat], dtype=_DTYPES[f])) for f in fields],
            list(fields), length=len(flat))
        objects[collection] = ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(offsets), record))
    return tags, objects


@settings(max_examples=200, deadline=None)
@given(events=EVENTS, condition=per_event_condition())
def test_random_object_expressions_match_a_per_event_reference(events, condition):
    text, reference = condition
    expression = parse(text, FIELDS, COLLECTIONS)
    tags, objects = _columns(events)
    got = expression.evaluate(tags, objects=objects, size=len(events))
    expected = np.array([bool(reference(e)) for e in events], dtype=bool)
    np.testing.assert_array_equal(got, expected, err_msg=text)
    # the canonical text parses back to the same selection
    again = parse(str(expression), FIELDS, COLLECTIONS)
    assert again == expression
    np.testing.assert_array_equal(again.evaluate(tags, objects=objects, size=len(events)), expected)
    # the tag part never drops an event the whole selection keeps
    tag_part, object_part = expression.split()
    keep = tag_part.evaluate(tags, size=len(events))
    assert not np.any(got & ~keep)
    both = keep & object_part.evaluate(tags, objects=objects, size=len(events))
    np.testing.assert_array_equal(both, expected)


def test_min_of_one_value_per_event_says_how_to_reduce_objects():
    with pytest.raises(ExpressionError, match=r"min\(\) takes at least 2 arguments, got 1 \(or one value over "
                                              r"objects, e.g. 'min\(Jet.pt\)'\)"):
        parse("min(ht) > 1", FIELDS, COLLECTIONS)
