"""Decide from per-database (min, max) statistics whether a database can hold a match.

Numbers become intervals ``[lo, hi]`` plus a flag saying whether ``nan`` may
occur; conditions become the pair (can be true, can be false). Every step
over-approximates what the numpy evaluation can produce, so the answer
"cannot match" is only given when no event can match. Bounds of integer
values are exact Python ints (numpy computes them exactly in int64); a bound
that leaves int64 falls back to "unknown", because numpy would wrap around.
Floating-point bounds are computed with the same correctly rounded double
operations as numpy, which are monotone, so corners of a box bound it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from giod.errors import DataError
from giod.expression.nodes import (
    Arithmetic,
    Between,
    Call,
    Compare,
    Constant,
    Counter,
    Field,
    Index,
    Kind,
    Logical,
    Member,
    Negate,
    Node,
    Not,
    Reduce,
)

INF = math.inf
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

Number = int | float


@dataclass(frozen=True, slots=True)
class Interval:
    """Every non-nan value lies in ``[lo, hi]``; ``nan`` says a nan may also occur."""

    lo: Number
    hi: Number
    nan: bool


@dataclass(frozen=True, slots=True)
class Truth:
    """Which of true and false a condition can take for some event."""

    can_true: bool
    can_false: bool


UNKNOWN = Interval(-INF, INF, True)
UNKNOWN_INT = Interval(-INF, INF, False)
MAYBE = Truth(True, True)


def may_match_tree(node: Node, kinds: Mapping[str, Kind], stats: Mapping[str, Any], numbers: bool = False) -> bool:
    """False only when no event described by ``stats`` can satisfy ``node`` (with ``numbers``: no event
    whose fields hold numbers, no nan, no null)."""
    result = _bounds(node, kinds, stats, numbers)
    assert isinstance(result, Truth)
    return result.can_true


def always_matches_tree(node: Node, kinds: Mapping[str, Kind], stats: Mapping[str, Any]) -> bool:
    """True only when every event whose fields hold numbers (no nan, no null) within ``stats`` satisfies
    ``node``: the condition cannot be false for any of them."""
    return matches_tree(node, kinds, stats)[1]


def matches_tree(node: Node, kinds: Mapping[str, Kind], stats: Mapping[str, Any]) -> tuple[bool, bool]:
    """``(may_match_tree(..., numbers=True), always_matches_tree(...))`` from one walk of ``node``."""
    result = _bounds(node, kinds, stats, numbers=True)
    assert isinstance(result, Truth)
    return result.can_true, not result.can_false


def _bounds(node: Node, kinds: Mapping[str, Kind], stats: Mapping[str, Any], numbers: bool = False
            ) -> Interval | Truth:
    def number(child: Node) -> Interval:
        result = _bounds(child, kinds, stats, numbers)
        assert isinstance(result, Interval)
        return result

    def truth(child: Node) -> Truth:
        result = _bounds(child, kinds, stats, numbers)
        assert isinstance(result, Truth)
        return result

    match node:
        case Constant(value=bool() as value):
            return Truth(value, not value)
        case Constant(value=value):
            return Interval(value, value, False)
        case Field(name=name, kind=kind):
            return _field(name, kind, stats.get(name), numbers)
        case Counter() | Reduce() | Index():
            # objects have no statistics: anything their kind allows (a missing value only
            # makes a comparison false, which "maybe" covers)
            return MAYBE if node.kind == "bool" else UNKNOWN if node.kind == "float" else UNKNOWN_INT
        case Not(operand=operand):
            inner = truth(operand)
            return Truth(inner.can_false, inner.can_true)
        case Logical(op=op, operands=operands):
            return _logical(op, [truth(o) for o in operands])
        case Compare(operands=operands, ops=ops):
            tests = [
                _compare_nodes(op, a, b, number, truth)
                for op, a, b in zip(ops, operands, operands[1:], strict=False)
            ]
            return _logical("and", tests)
        case Member(operand=operand, items=items, negated=negated):
            subject = number(operand)
            found = _logical(
                "or",
                [
                    _compare(("==", operand.kind, item.kind), subject, number(item))
                    for item in items
                ],
            )
            return Truth(found.can_false, found.can_true) if negated else found
        case Between(operand=operand, low=low, high=high, negated=negated):
            subject = number(operand)
            inside = _logical(
                "and",
                [
                    _compare(("<=", low.kind, operand.kind), number(low), subject),
                    _compare(("<=", operand.kind, high.kind), subject, number(high)),
                ],
            )
            return Truth(inside.can_false, inside.can_true) if negated else inside
        case Negate(operand=operand):
            a = number(operand)
            return _result(node.kind, -a.hi, -a.lo, a.nan)
        case Arithmetic(op=op, left=left, right=right):
            a, b = number(left), number(right)
            if node.kind == "float":
                a, b = _as_float(a), _as_float(b)
            return _ARITHMETIC[op](node.kind, a, b)
        case Call(function=function, args=args):
            values = [number(arg) for arg in args]
            if node.kind == "float":
                values = [_as_float(v) for v in values]
            if function == "abs":
                return _abs(node.kind, values[0])
            if function == "sqrt":
                return _sqrt(values[0])
            combine = _fmin if function == "min" else _fmax
            result = values[0]
            for other in values[1:]:
                result = combine(result, other)
            return result
    raise AssertionError(f"unknown node {node!r}")  # pragma: no cover


# -- fields --------------------------------------------------------------------


def _field(name: str, kind: Kind, bounds: Any, numbers: bool = False) -> Interval | Truth:
    lo, hi = _pair(name, bounds)
    if kind == "bool":
        return Truth(hi is None or bool(hi), lo is None or not bool(lo))
    if lo is not None and hi is not None and lo > hi:
        lo = hi = None  # contradictory statistics tell nothing
    if kind == "float":
        # Statistics ignore nan, and a float column may hold some (unless the values are known numbers).
        return Interval(-INF if lo is None else float(lo), INF if hi is None else float(hi), not numbers)
    low = -INF if lo is None or lo == -INF else math.ceil(lo)
    high = INF if hi is None or hi == INF else math.floor(hi)
    if low < INT64_MIN or high > INT64_MAX:
        return UNKNOWN_INT  # values beyond int64 were wrapped when read
    return Interval(low, high, False)


def _pair(name: str, bounds: Any) -> tuple[Any, Any]:
    """``(min, max)`` with ``None`` for each unknown (missing, None or nan) bound."""
    if bounds is None:
        return None, None
    try:
        lo, hi = bounds
        values = [None if v is None or math.isnan(float(v)) else v for v in (lo, hi)]
    except (TypeError, ValueError) as exc:
        raise DataError(
            f"statistics of tag field {name!r} must be a (min, max) pair of numbers, not {bounds!r}"
        ) from exc
    return (
        None if values[0] is None else _plain(values[0]),
        None if values[1] is None else _plain(values[1]),
    )


def _plain(value: Any) -> Number:
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, int | np.integer):
        return int(value)
    return float(value)


# -- conditions ----------------------------------------------------------------


def _logical(op: str, parts: list[Truth]) -> Truth:
    if op == "and":
        return Truth(all(p.can_true for p in parts), any(p.can_false for p in parts))
    return Truth(any(p.can_true for p in parts), all(p.can_false for p in parts))


def _compare_nodes(
    op: str,
    left: Node,
    right: Node,
    number: Callable[[Node], Interval],
    truth: Callable[[Node], Truth],
) -> Truth:
    if left.kind == "bool":
        a, b = truth(left), truth(right)
        equal = Truth(
            (a.can_true and b.can_true) or (a.can_false and b.can_false),
            (a.can_true and b.can_false) or (a.can_false and b.can_true),
        )
        return equal if op == "==" else Truth(equal.can_false, equal.can_true)
    return _compare((op, left.kind, right.kind), number(left), number(right))


def _compare(signature: tuple[str, Kind, Kind], a: Interval, b: Interval) -> Truth:
    op, left_kind, right_kind = signature
    if left_kind != right_kind:
        # numpy compares an int64 with a float64 after converting it to float64.
        a, b = _as_float(a), _as_float(b)
    nan = a.nan or b.nan
    match op:
        case "<":
            return Truth(a.lo < b.hi, a.hi >= b.lo or nan)
        case "<=":
            return Truth(a.lo <= b.hi, a.hi > b.lo or nan)
        case ">":
            return Truth(a.hi > b.lo, a.lo <= b.hi or nan)
        case ">=":
            return Truth(a.hi >= b.lo, a.lo < b.hi or nan)
    lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
    overlap = lo <= hi and ("int" not in (left_kind, right_kind) or _holds_integer(lo, hi))
    always_equal = a.lo == a.hi == b.lo == b.hi and not nan
    if op == "==":
        return Truth(overlap, not always_equal)
    return Truth(not always_equal, overlap)


def _holds_integer(lo: Number, hi: Number) -> bool:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return True
    return math.ceil(lo) <= math.floor(hi)


# -- numbers -------------------------------------------------------------------


def _as_float(a: Interval) -> Interval:
    return Interval(float(a.lo), float(a.hi), a.nan)


def _result(kind: Kind, lo: Number, hi: Number, nan: bool) -> Interval:
    """An interval of the given kind, widened to unknown where int64 would wrap."""
    if math.isnan(lo) or math.isnan(hi):
        return UNKNOWN if kind == "float" else UNKNOWN_INT
    if kind == "int":
        if lo < INT64_MIN or hi > INT64_MAX:
            return UNKNOWN_INT
        return Interval(lo, hi, False)
    return Interval(lo, hi, nan)


def _corners(
    kind: Kind, op: Callable[[Any, Any], Number], a: Interval, b: Interval, nan: bool
) -> Interval:
    values = [op(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    if any(math.isnan(v) for v in values):
        return UNKNOWN if kind == "float" else UNKNOWN_INT
    return _result(kind, min(values), max(values), nan or a.nan or b.nan)


def _contains_zero(a: Interval) -> bool:
    return a.lo <= 0 <= a.hi


def _has_infinity(a: Interval) -> bool:
    return math.isinf(a.lo) or math.isinf(a.hi)


def _add(kind: Kind, a: Interval, b: Interval) -> Interval:
    return _corners(kind, lambda x, y: x + y, a, b, False)


def _subtract(kind: Kind, a: Interval, b: Interval) -> Interval:
    return _corners(kind, lambda x, y: x - y, a, b, False)


def _multiply(kind: Kind, a: Interval, b: Interval) -> Interval:
    # 0 * inf is nan, and the zero may sit inside an interval whose corner is infinite.
    nan = kind == "float" and (
        (_contains_zero(a) and _has_infinity(b)) or (_contains_zero(b) and _has_infinity(a))
    )
    return _corners(kind, lambda x, y: x * y, a, b, nan)


def _divide(kind: Kind, a: Interval, b: Interval) -> Interval:
    if _contains_zero(b):
        return UNKNOWN
    return _corners("float", lambda x, y: x / y, a, b, False)


def _remainder(kind: Kind, a: Interval, b: Interval) -> Interval:
    # numpy's remainder takes the divisor's sign and never exceeds it in size.
    nan = a.nan or b.nan or _has_infinity(a) or _contains_zero(b)
    if b.lo > 0:
        return Interval(0.0, b.hi, nan)
    if b.hi < 0:
        return Interval(b.lo, 0.0, nan)
    return Interval(min(b.lo, 0.0), max(b.hi, 0.0), nan)


def _power(kind: Kind, a: Interval, b: Interval) -> Interval:
    nan = a.nan or b.nan
    exponent = float(b.lo) if b.lo == b.hi and not b.nan and math.isfinite(b.lo) else None
    if exponent is not None and exponent.is_integer() and exponent >= 0 and a.lo < 0:
        if exponent == 0:
            return Interval(1.0, 1.0, False)  # pow(nan, 0) is 1 too
        if exponent % 2 == 0:
            magnitude = _abs("float", a)
            a = Interval(magnitude.lo, magnitude.hi, a.nan)
    elif a.lo < 0:
        return UNKNOWN  # a negative base to a fractional power is nan
    with np.errstate(all="ignore"):
        result = _corners("float", lambda x, y: float(np.power(x, y)), a, b, nan)
    # pow is not correctly rounded (numpy may use a vectorised math library), so it may
    # miss monotonicity by an ulp or a few: widen the corners by far more than that.
    lo = _widen(result.lo, -INF)
    if a.lo == 0 and b.lo < 0:
        lo = -INF  # the base may be -0.0, and pow(-0.0, -3) is -inf
    elif a.lo >= 0:
        lo = max(lo, 0.0)  # a power of a non-negative base is never negative
    return Interval(lo, _widen(result.hi, INF), result.nan)


def _widen(value: float, towards: float) -> float:
    if not math.isfinite(value):
        return value
    moved = value + math.copysign(abs(value) * 1e-12, towards)
    return math.nextafter(moved, towards)


def _abs(kind: Kind, a: Interval) -> Interval:
    if a.lo >= 0:
        return a
    if a.hi <= 0:
        return _result(kind, -a.hi, -a.lo, a.nan)
    return _result(kind, 0, max(-a.lo, a.hi), a.nan)


def _sqrt(a: Interval) -> Interval:
    lo = math.sqrt(max(a.lo, 0.0))
    hi = math.sqrt(a.hi) if a.hi >= 0 else 0.0  # all-negative input: only nan comes out
    return Interval(lo, hi, a.nan or a.lo < 0)


def _fmin(a: Interval, b: Interval) -> Interval:
    # fmin returns the other side when one side is nan.
    hi = min(a.hi, b.hi)
    if a.nan:
        hi = max(hi, b.hi)
    if b.nan:
        hi = max(hi, a.hi)
    return Interval(min(a.lo, b.lo), hi, a.nan and b.nan)


def _fmax(a: Interval, b: Interval) -> Interval:
    lo = max(a.lo, b.lo)
    if a.nan:
        lo = min(lo, b.lo)
    if b.nan:
        lo = min(lo, a.lo)
    return Interval(lo, max(a.hi, b.hi), a.nan and b.nan)


_ARITHMETIC: dict[str, Callable[[Kind, Interval, Interval], Interval]] = {
    "+": _add,
    "-": _subtract,
    "*": _multiply,
    "/": _divide,
    "%": _remainder,
    "**": _power,
}


# -- the necessary box, for pruning in SQL ---------------------------------------------

Box = dict[str, tuple[float, float]]

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}


def necessary_box(node: Node) -> Box:
    """Closed ranges ``{field: (lo, hi)}`` that every matching event's fields lie in.

    Only comparisons of a numeric field with constants, ``and``/``or``,
    ``between`` and ``in`` give a range; anything else constrains nothing.
    A comparison is false for nan, so a matching event's value is a number
    in the range. Bounds are rounded to float like the catalog's statistics
    (rounding is monotone, so ``max < lo`` still proves that no value
    reaches ``lo``). A database whose statistics lie outside the box for any
    field cannot match; ``may_match`` stays the finer test.
    """
    match node:
        case Logical(op="and", operands=operands):
            box: Box = {}
            for part in operands:
                for name, (lo, hi) in necessary_box(part).items():
                    old_lo, old_hi = box.get(name, (-INF, INF))
                    box[name] = (max(lo, old_lo), min(hi, old_hi))
            return box
        case Logical(op="or", operands=operands):
            boxes = [necessary_box(part) for part in operands]
            common = set.intersection(*(set(b) for b in boxes)) if boxes else set()
            return {
                name: (min(b[name][0] for b in boxes), max(b[name][1] for b in boxes))
                for name in common
            }
        case Compare(operands=operands, ops=ops):
            box = {}
            for op, a, b in zip(ops, operands, operands[1:], strict=False):
                single = _compared(op, a, b)
                if single is not None:
                    name, (lo, hi) = single
                    old_lo, old_hi = box.get(name, (-INF, INF))
                    box[name] = (max(lo, old_lo), min(hi, old_hi))
            return box
        case Between(operand=Field(name=name, kind=kind), low=Constant() as low,
                     high=Constant() as high, negated=False) if kind != "bool":
            first, last = _float(low.value), _float(high.value)
            return {} if first is None or last is None else {name: (first, last)}
        case Member(operand=Field(name=name, kind=kind), items=items, negated=False) if (
            kind != "bool" and items and all(isinstance(i, Constant) for i in items)
        ):
            values = [_float(i.value) for i in items]  # type: ignore[attr-defined]
            if any(v is None for v in values):
                return {}
            return {name: (min(values), max(values))}  # type: ignore[type-var, dict-item]
    return {}


def _compared(op: str, a: Node, b: Node) -> tuple[str, tuple[float, float]] | None:
    if isinstance(b, Field) and isinstance(a, Constant):
        a, b, op = b, a, _FLIP.get(op, op)
    if not (isinstance(a, Field) and isinstance(b, Constant)) or a.kind == "bool":
        return None
    value = _float(b.value)
    if value is None or isinstance(b.value, bool):
        return None
    if op in ("<", "<="):
        return a.name, (-INF, value)
    if op in (">", ">="):
        return a.name, (value, INF)
    if op == "==":
        return a.name, (value, value)
    return None  # !=


def _float(value: Any) -> float | None:
    try:
        out = float(value)
    except OverflowError:
        return None
    return None if math.isnan(out) else out
