"""The necessary box of an expression: pruning by it never drops a database ``may_match`` keeps."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.catalog.records import overlaps
from giod.expression import parse

FIELDS = {"njets": "int32", "ht": "float32", "ok": "bool"}

constant = st.one_of(st.integers(-4, 9).map(str), st.floats(-5, 10, allow_nan=False, allow_infinity=False)
                     .map(lambda x: f"{x:.3f}"))
numeric = st.sampled_from(["njets", "ht"])
op = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
atom = st.one_of(
    st.builds(lambda f, o, c: f"{f} {o} {c}", numeric, op, constant),
    st.builds(lambda f, o, c: f"{c} {o} {f}", numeric, op, constant),
    st.builds(lambda f, a, b: f"{f} between {a} and {b}", numeric, constant, constant),
    st.builds(lambda f, a, b: f"{f} in ({a}, {b})", numeric, constant, constant),
    st.builds(lambda a, b: f"{a} < njets <= {b}", constant, constant),
    st.just("ok"),
    st.just("ht / max(njets, 1) > 3"),
)
expression = st.recursive(
    atom,
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"({a}) and ({b})", inner, inner),
        st.builds(lambda a, b: f"({a}) or ({b})", inner, inner),
        st.builds(lambda a: f"not ({a})", inner),
    ),
    max_leaves=6,
)
bound = st.one_of(st.integers(-6, 11).map(float), st.floats(-6, 11, allow_nan=False), st.just(math.nan))
stats = st.dictionaries(st.sampled_from(["njets", "ht", "ok"]), st.tuples(bound, bound), max_size=3)


def _values(kind: str, lo: float, hi: float) -> np.ndarray:
    """Values a tag column may hold under statistics (lo, hi): the ends and points between."""
    lo = -20.0 if math.isnan(lo) else lo
    hi = 20.0 if math.isnan(hi) else hi
    grid = np.concatenate([np.linspace(lo, hi, 9), [lo, hi]])
    if kind == "int32":
        return np.unique(np.arange(math.ceil(lo), math.floor(hi) + 1)[:40]).astype(np.int32)
    values = grid.astype(np.float32)
    values = values[(values >= lo) & (values <= hi)]
    return np.append(values, np.float32("nan"))  # statistics ignore nan


@settings(max_examples=400, deadline=None)
@given(text=expression, stats=stats)
def test_a_database_the_box_prunes_holds_no_match(text: str, stats: dict) -> None:
    expr = parse(text, FIELDS)
    # the catalog reads unknown (nan) bounds back as infinite
    listed = {k: (-math.inf if math.isnan(lo) else lo, math.inf if math.isnan(hi) else hi)
              for k, (lo, hi) in stats.items()}
    if overlaps(listed, expr.necessary_box()):
        return
    columns = {}
    for name, kind in (("njets", "int32"), ("ht", "float32")):
        lo, hi = stats.get(name, (math.nan, math.nan))
        columns[name] = _values(kind, lo, hi) if not lo > hi else _values(kind, math.nan, math.nan)
    njets, ht, ok = np.meshgrid(columns["njets"], columns["ht"], np.array([False, True]), indexing="ij")
    events = {"njets": njets.ravel(), "ht": ht.ravel(), "ok": ok.ravel()}
    assert not expr.evaluate(events).any(), (text, stats, expr.necessary_box())


def test_box_of_simple_expressions() -> None:
    box = parse("njets >= 4 and ht > 500 and ok", FIELDS).necessary_box()
    assert box == {"njets": (4.0, math.inf), "ht": (500.0, math.inf)}
    assert parse("njets < 2 or njets > 8", FIELDS).necessary_box() == {}
    assert parse("(njets == 1 and ht < 7) or (njets > 2 and ht < 1)", FIELDS).necessary_box() == {
        "njets": (1.0, math.inf), "ht": (-math.inf, 7.0)}
    assert parse("not (njets > 3)", FIELDS).necessary_box() == {}
