"""Fold the parts of a syntax tree that read no field (of tags or of objects) into constants.

A part without a field has one value for every event, so it is computed once,
at parse time, with the evaluator's own numpy arithmetic: the folded tree
selects exactly the events the unfolded one does, and an expression that
reads no field at all becomes ``true`` or ``false``. ``and`` and ``or`` drop
the operands that cannot change their result (``x and true`` is ``x``); an
operand that decides the result alone (``x and false``) is kept beside the
others, because an event whose field ``x`` is null is never selected, even by
``not (x > 1 and false)``.

Dividing by a constant zero (``x / 0``, ``x % (2 - 2)``) is refused here with
an ``ExpressionError``: it can only be a mistake.

A value is folded only when its canonical text parses back to it (a finite
number, an integer other than -2⁶³); other constant parts stay as they are,
their own constant operands folded.
"""

from __future__ import annotations

import dataclasses
import math

from giod.errors import ExpressionError
from giod.expression.evaluate import evaluate_constant
from giod.expression.nodes import (
    Arithmetic,
    Between,
    Call,
    Compare,
    Constant,
    Counter,
    Field,
    Index,
    Logical,
    Member,
    Negate,
    Node,
    Not,
    ObjectField,
    Reduce,
)

_INT64_MIN = -(2**63)


def fold(node: Node, text: str) -> Node:
    """``node`` with every part that reads no field computed; ``text`` is quoted in errors."""
    return _fold(node, text)[0]


def _fold(node: Node, text: str) -> tuple[Node, bool]:
    """The folded node and whether it reads a field."""
    if isinstance(node, Constant):
        return node, False
    if isinstance(node, Field | ObjectField | Counter):
        return node, True
    reads = False

    def sub(child: Node) -> Node:
        nonlocal reads
        folded, child_reads = _fold(child, text)
        reads = reads or child_reads
        return folded

    match node:
        case Negate(operand=operand) | Not(operand=operand) | Reduce(operand=operand) | Index(operand=operand):
            node = _rebuilt(node, operand=sub(operand))
        case Arithmetic(left=left, right=right):
            node = _rebuilt(node, left=sub(left), right=sub(right))
            assert isinstance(node, Arithmetic)
            _refuse_zero_divisor(node, text)
        case Call(args=args):
            node = _rebuilt(node, args=tuple(sub(arg) for arg in args))
        case Compare(operands=operands):
            node = _rebuilt(node, operands=tuple(sub(o) for o in operands))
        case Logical(operands=operands):
            node = _rebuilt(node, operands=tuple(sub(o) for o in operands))
        case Member(operand=operand, items=items):
            node = _rebuilt(node, operand=sub(operand), items=tuple(sub(i) for i in items))
        case Between(operand=operand, low=low, high=high):
            node = _rebuilt(node, operand=sub(operand), low=sub(low), high=sub(high))
    if not reads:
        value = evaluate_constant(node)
        if _renders_back(value):
            return Constant(node.kind, node.start, node.end, 1, value), False
        return node, False
    if isinstance(node, Logical):
        return _simplified(node), True
    return node, True


def _rebuilt(node: Node, **parts: object) -> Node:
    depths = [p.depth for part in parts.values() for p in (part if isinstance(part, tuple) else (part,))]
    return dataclasses.replace(node, depth=1 + max(depths, default=0), **parts)  # type: ignore[arg-type]


def _refuse_zero_divisor(node: Arithmetic, text: str) -> None:
    divisor = node.right
    if node.op in ("/", "%") and isinstance(divisor, Constant) and divisor.value == 0:
        shown = text[divisor.start : divisor.end]
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise ExpressionError(
            f"'{node.op}' by zero: the divisor {shown!r} is always 0",
            expression=text,
            position=divisor.start,
        )


def _renders_back(value: bool | int | float) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value != _INT64_MIN


def _simplified(node: Logical) -> Node:
    """``node`` without the constant operands that cannot change it, flattened again."""
    neutral = node.op == "and"  # true in an "and", false in an "or"
    kept: list[Node] = []
    for operand in node.operands:
        if isinstance(operand, Constant) and operand.value is neutral:
            continue
        flat = isinstance(operand, Logical) and operand.op == node.op
        kept.extend(operand.operands if flat else (operand,))  # type: ignore[attr-defined]
    if len(kept) == 1:
        return kept[0]
    return _rebuilt(node, operands=tuple(kept))
