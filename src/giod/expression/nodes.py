"""The syntax tree of a selection expression, and its canonical text.

Every node knows its value kind (``"bool"``, ``"int"`` or ``"float"``), the
span of the user's text it came from (for error messages) and its depth (to
bound the work of the recursive passes). A node has one value per event,
except the parts over a collection's objects (``Jet.pt > 30``): they have one
value per object until a reduction (``count``, ``any``, …) or an index
(``Jet.pt[0]``) brings them back to one value per event.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal as TypingLiteral

Kind = TypingLiteral["bool", "int", "float"]

ARITHMETIC = ("+", "-", "*", "/", "%", "**")
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
FUNCTIONS: dict[str, tuple[int, int | None]] = {
    # name -> (least, most) number of arguments; None: no upper limit
    "abs": (1, 1),
    "sqrt": (1, 1),
    "min": (2, None),
    "max": (2, None),
    # reductions over a collection's objects; min and max of one argument reduce too
    "count": (1, 1),
    "any": (1, 1),
    "all": (1, 1),
    "sum": (1, 1),
}
REDUCTIONS = ("count", "any", "all", "sum", "min", "max")


@dataclass(frozen=True, slots=True)
class Node:
    """Base of all nodes: value kind, source span ``[start, end)`` and depth."""

    kind: Kind
    start: int
    end: int
    depth: int


@dataclass(frozen=True, slots=True)
class Constant(Node):
    """A literal: ``3``, ``2.5``, ``true``."""

    value: bool | int | float


@dataclass(frozen=True, slots=True)
class Field(Node):
    """A tag field read from the event's tag columns."""

    name: str


@dataclass(frozen=True, slots=True)
class Negate(Node):
    """Unary minus."""

    operand: Node


@dataclass(frozen=True, slots=True)
class Not(Node):
    """Logical negation."""

    operand: Node


@dataclass(frozen=True, slots=True)
class Arithmetic(Node):
    """A binary arithmetic operator, one of ``ARITHMETIC``."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Call(Node):
    """A call of one of ``FUNCTIONS``."""

    function: str
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Compare(Node):
    """A comparison chain: ``a < b <= c`` means ``a < b and b <= c``."""

    operands: tuple[Node, ...]
    ops: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Logical(Node):
    """``and`` / ``or`` over two or more conditions (flattened)."""

    op: str
    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Member(Node):
    """``x in (a, b, …)``, or ``x not in (…)`` when negated."""

    operand: Node
    items: tuple[Node, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class Between(Node):
    """``x between low and high`` (both ends included), or its negation."""

    operand: Node
    low: Node
    high: Node
    negated: bool


@dataclass(frozen=True, slots=True)
class ObjectField(Node):
    """A field of the objects of a collection (``Jet.pt``): one value per object."""

    collection: str
    name: str


@dataclass(frozen=True, slots=True)
class Counter(Node):
    """The number of objects of a collection in each event (``nJet`` for ``Jet``)."""

    collection: str
    name: str


@dataclass(frozen=True, slots=True)
class Reduce(Node):
    """One of ``REDUCTIONS`` over the objects of each event: one value per event."""

    function: str
    operand: Node


@dataclass(frozen=True, slots=True)
class Index(Node):
    """The value of the ``position``-th object of each event (``Jet.pt[0]``); missing when
    the event has too few objects. Negative positions count from the last object."""

    operand: Node
    position: int


def render(node: Node) -> str:
    """The canonical, fully parenthesised text of ``node``; it parses back to an equal tree."""
    match node:
        case Constant(value=bool() as value):
            return "true" if value else "false"
        case Constant(value=value) if math.copysign(1, value) < 0:
            # a folded negative constant reads back as minus applied to a literal
            return f"(-{render(dataclasses.replace(node, value=-value))})"
        case Constant(value=float() as value):
            return repr(value)
        case Constant(value=value):
            return str(value)
        case Field(name=name) | Counter(name=name):
            return name
        case ObjectField(collection=collection, name=name):
            return f"{collection}.{name}"
        case Reduce(function=function, operand=operand):
            return f"{function}({render(operand)})"
        case Index(operand=operand, position=position):
            return f"{render(operand)}[{position}]"
        case Negate(operand=operand):
            return f"(-{render(operand)})"
        case Not(operand=operand):
            return f"(not {render(operand)})"
        case Arithmetic(op=op, left=left, right=right):
            return f"({render(left)} {op} {render(right)})"
        case Call(function=function, args=args):
            return f"{function}({', '.join(render(arg) for arg in args)})"
        case Compare(operands=operands, ops=ops):
            parts = [render(operands[0])]
            for op, operand in zip(ops, operands[1:], strict=True):
                parts += [op, render(operand)]
            return f"({' '.join(parts)})"
        case Logical(op=op, operands=operands):
            return "(" + f" {op} ".join(render(operand) for operand in operands) + ")"
        case Member(operand=operand, items=items, negated=negated):
            keyword = "not in" if negated else "in"
            listed = ", ".join(render(item) for item in items)
            return f"({render(operand)} {keyword} ({listed}))"
        case Between(operand=operand, low=low, high=high, negated=negated):
            keyword = "not between" if negated else "between"
            return f"({render(operand)} {keyword} {render(low)} and {render(high)})"
    raise AssertionError(f"unknown node {node!r}")  # pragma: no cover


def fields_of(node: Node) -> frozenset[str]:
    """The names of the tag fields ``node`` reads."""
    names: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Field):
            names.add(current.name)
        stack.extend(children(current))
    return frozenset(names)


def objects_of(node: Node) -> dict[str, frozenset[str]]:
    """The collections ``node`` reads, each with the fields of its objects it reads
    (none for a collection only counted)."""
    found: dict[str, set[str]] = {}
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ObjectField):
            found.setdefault(current.collection, set()).add(current.name)
        elif isinstance(current, Counter):
            found.setdefault(current.collection, set())
        stack.extend(children(current))
    return {name: frozenset(found[name]) for name in sorted(found)}


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-expressions of ``node``."""
    match node:
        case Negate(operand=operand) | Not(operand=operand) | Reduce(operand=operand) | Index(operand=operand):
            return (operand,)
        case Arithmetic(left=left, right=right):
            return (left, right)
        case Call(args=args):
            return args
        case Compare(operands=operands) | Logical(operands=operands):
            return operands
        case Member(operand=operand, items=items):
            return (operand, *items)
        case Between(operand=operand, low=low, high=high):
            return (operand, low, high)
    return ()
