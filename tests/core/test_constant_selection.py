"""Constant parts of a selection are computed, never taken for "no condition".

Random selections that mix tag fields and constants are run on a real
federation and compared with a plain numpy evaluation of the same tree over
the tag columns; pruning by database statistics must never drop a selected event.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import awkward as ak
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import giod
import giod.distributed
from giod.testing import synthetic

FIELDS = {"njets": "int", "ntracks": "int", "ht": "float", "lead_pt": "float"}

Tree = tuple[Any, ...]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory):
    """Four databases of events sorted by ht (so that statistics prune), and their tag columns."""
    fed = giod.open(tmp_path_factory.mktemp("constants") / "fed", create=True)
    ds = fed.create_dataset("qcd", synthetic.schema())
    events = synthetic.events(800, seed=21)
    events = events[np.argsort(ak.to_numpy(events.ht), kind="stable")]
    with ds.writer(database_events=200, cluster_events=50) as w:
        w.append(events)
    tags = {name: ak.to_numpy(events[name]) for name in FIELDS}
    yield ds, tags
    fed.close()


# -- the literal cases --------------------------------------------------------------------

NOTHING = ["false", "1 > 2", "not true", "njets > 1 and false", "false and ht > 0", "not (1 < 2)",
           "(2 - 2) * ht > 1", "ht > 1e308 * 10", "not (njets >= 0 or true)"]
EVERYTHING = ["true", "2 > 1", "not false", "njets >= 0 or true", "1 + 1 == 2", "ht > -1e308 * 10"]


@pytest.mark.parametrize("text", NOTHING)
def test_a_false_selection_selects_nothing(stored, text):
    ds, _ = stored
    sel = ds.select(text)
    assert len(sel) == 0 and sel.entries().tolist() == []
    assert sel.databases() == []  # a constant false needs no file at all
    empty = sel.read(["ht", "njets", "jets.pt"])
    assert len(empty) == 0 and empty.fields == ["ht", "njets", "jets"]
    assert len(ds.query(text, ["ht"])) == 0
    assert giod.distributed.map_selection(sel, len, columns=["ht"], scheduler="sync") == 0


@pytest.mark.parametrize("text", EVERYTHING)
def test_a_true_selection_selects_everything(stored, text):
    ds, _ = stored
    sel = ds.select(text)
    assert sel.entries().tolist() == list(range(800))
    assert len(ds.query(text, ["ht"], limit=5)) == 5


@pytest.mark.parametrize(("text", "divisor"), [
    ("1 % 0 == 0", "'0'"), ("ht / 0 > 1", "'0'"), ("ht % (3 - 3) > 1", "'(3 - 3)'"),
    ("njets / (0.0 * 7) < 2", "'(0.0 * 7)'"), ("1 / -0.0 > 0", "'-0.0'"),
])
def test_dividing_by_a_constant_zero_is_an_expression_error(stored, text, divisor):
    ds, _ = stored
    with pytest.raises(giod.ExpressionError, match=f"by zero: the divisor {re.escape(divisor)}") as info:
        ds.select(text)
    assert text[info.value.position:].startswith(divisor.strip("'"))
    with pytest.raises(giod.ExpressionError):
        ds.query(text, ["ht"])


def test_constant_parts_are_folded_but_keep_the_fields_they_sit_beside(stored):
    ds, tags = stored
    assert str(ds.select("ht > 100 * 2 + 50").expression) == "(ht > 250)"
    assert str(ds.select("njets > 1 and true").expression) == "(njets > 1)"
    sel = ds.select("not (njets > 1 and false)")  # true for every event, still reading njets
    assert sel.expression.fields == {"njets"} and len(sel) == 800
    want = np.flatnonzero(tags["njets"] * -1 < -2)
    np.testing.assert_array_equal(ds.select("njets * (2 - 3) < -2").entries(), want)


# -- random selections against a numpy reference -------------------------------------------


@functools.cache
def numbers(depth: int, fields: tuple[str, ...]) -> st.SearchStrategy[Tree]:
    leaves = [st.tuples(st.just("num"), st.integers(0, 5)),
              st.tuples(st.just("num"), st.sampled_from([0.0, 0.5, 2.0, 40.0, 150.0, 300.0]))]
    if fields:  # as often as a constant
        leaves += [st.tuples(st.just("field"), st.sampled_from(fields))] * 2
    leaf = st.one_of(*leaves)
    if depth == 0:
        return leaf
    sub = numbers(depth - 1, fields)
    return st.one_of(
        leaf,
        st.tuples(st.just("neg"), sub),
        st.tuples(st.just("abs"), sub),
        st.tuples(st.just("arith"), st.sampled_from(["+", "-", "*", "/", "%", "**"]), sub, sub),
    )


COMPARISONS = ["==", "!=", "<", "<=", ">", ">="]


@functools.cache
def conditions(depth: int, fields: tuple[str, ...]) -> st.SearchStrategy[Tree]:
    leaves = [st.tuples(st.just("bool"), st.booleans()),
              st.tuples(st.just("cmp"), st.sampled_from(COMPARISONS), numbers(2, fields), numbers(2, fields))]
    if fields:  # a plain cut inside the fields' ranges, so that selections are neither all nor nothing
        leaves.append(st.tuples(st.just("cmp"), st.sampled_from(COMPARISONS),
                                st.tuples(st.just("field"), st.sampled_from(fields)),
                                st.tuples(st.just("num"), st.sampled_from([1, 2, 3, 5, 10, 50.0, 100.0, 200.0]))))
    leaf = st.one_of(*leaves)
    if depth == 0:
        return leaf
    sub = conditions(depth - 1, fields)
    return st.one_of(
        leaf,
        st.tuples(st.just("not"), sub),
        st.tuples(st.sampled_from(["and", "or"]), sub, sub),
    )


def text_of(tree: Tree) -> str:
    """Fully parenthesised text: the reference need not know the precedence rules."""
    match tree:
        case ("num", value):
            return repr(value)
        case ("bool", value):
            return "true" if value else "false"
        case ("field", name):
            return name
        case ("neg", operand):
            return f"(-{text_of(operand)})"
        case ("abs", operand):
            return f"abs({text_of(operand)})"
        case ("not", operand):
            return f"(not {text_of(operand)})"
        case ("arith" | "cmp", op, left, right):
            return f"({text_of(left)} {op} {text_of(right)})"
        case (op, left, right):
            return f"({text_of(left)} {op} {text_of(right)})"
    raise AssertionError(tree)


def value_of(tree: Tree, tags: dict[str, np.ndarray]) -> Any:
    """The tree over whole columns with numpy: integers as int64, numbers as float64."""
    match tree:
        case ("num", value):
            return np.int64(value) if isinstance(value, int) else np.float64(value)
        case ("bool", value):
            return np.bool_(value)
        case ("field", name):
            return tags[name].astype(np.int64 if FIELDS[name] == "int" else np.float64)
        case ("neg", operand):
            return -value_of(operand, tags)
        case ("abs", operand):
            return np.abs(value_of(operand, tags))
        case ("not", operand):
            return ~value_of(operand, tags)
        case ("and", left, right):
            return value_of(left, tags) & value_of(right, tags)
        case ("or", left, right):
            return value_of(left, tags) | value_of(right, tags)
        case ("cmp", op, left, right):
            a, b = value_of(left, tags), value_of(right, tags)
            return {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
                    ">": np.greater, ">=": np.greater_equal}[op](a, b)
        case ("arith", op, left, right):
            a, b = value_of(left, tags), value_of(right, tags)
            if op in ("/", "%", "**"):
                a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
                return {"/": np.true_divide, "%": np.remainder, "**": np.power}[op](a, b)
            return {"+": np.add, "-": np.subtract, "*": np.multiply}[op](a, b)
    raise AssertionError(tree)


def reads_a_field(tree: Tree) -> bool:
    return tree[0] == "field" or any(reads_a_field(p) for p in tree[1:] if isinstance(p, tuple))


def divides_by_constant_zero(tree: Tree) -> bool:
    if tree[0] == "arith" and tree[1] in ("/", "%") and not reads_a_field(tree[3]):
        with np.errstate(all="ignore"):
            if value_of(tree[3], {}) == 0:
                return True
    return any(divides_by_constant_zero(p) for p in tree[1:] if isinstance(p, tuple))


# a quarter of them read no field at all
selections = st.integers(0, 3).flatmap(lambda k: conditions(3, () if k == 0 else tuple(FIELDS)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=selections)
def test_random_selections_equal_the_numpy_reference(stored, tree):
    ds, tags = stored
    text = text_of(tree)
    if divides_by_constant_zero(tree):
        with pytest.raises(giod.ExpressionError, match="by zero"):
            ds.select(text)
        return
    with np.errstate(all="ignore"):
        mask = np.broadcast_to(value_of(tree, tags), (800,))
    want = np.flatnonzero(mask)
    sel = ds.select(text)
    np.testing.assert_array_equal(sel.entries(), want, err_msg=text)
    # the statistics skip only databases that hold no selected event
    kept = {db.id for db in sel.databases()}
    for db in ds.databases():
        if db.id not in kept:
            assert not ((want >= db.first_entry) & (want < db.stop_entry)).any(), text


def test_the_reference_meets_pruned_databases(stored):
    # guard against a vacuous pruning property: these selections do skip databases
    ds, tags = stored
    top = float(np.sort(tags["ht"])[-3])
    assert len(ds.select(f"ht >= {top} and 1 < 2").databases()) == 1
    assert len(ds.select(f"ht * (3 - 2) >= {top}").databases()) == 1
