"""Translate a syntax tree into a ``pyarrow.compute.Expression`` with the same meaning.

Filters built here can be pushed into ``pyarrow.dataset`` scans. They follow
the numpy evaluation exactly: fields used in arithmetic are widened to int64 or
float64, integer arithmetic wraps around like numpy's, ``min``/``max`` ignore
nan, and a row where any field read is null is dropped: the filter is
conjoined with ``is_valid`` of every field, which also makes Arrow's Kleene
``&``/``|`` agree with plain boolean logic on the rows that remain. A field compared directly with
constants stays unwrapped so that Parquet statistics can prune row groups.
"""

from __future__ import annotations

import functools
import operator

import pyarrow as pa
import pyarrow.compute as pc

from giod.errors import ExpressionError
from giod.expression.nodes import (
    Arithmetic,
    Between,
    Call,
    Compare,
    Constant,
    Field,
    Logical,
    Member,
    Negate,
    Node,
    Not,
    fields_of,
    objects_of,
)

_TYPES = {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64()}
_COMPARE = {
    "==": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}
# The unchecked kernels: they wrap around (ints) or give inf/nan (floats) like numpy.
_ARITHMETIC = {
    "+": pc.add,
    "-": pc.subtract,
    "*": pc.multiply,
    "/": pc.divide,
    "%": pc.modulo,
    "**": pc.power,
}


def to_arrow(node: Node) -> pc.Expression:
    """The pyarrow dataset expression for a boolean ``node`` over tag fields only."""
    if objects := objects_of(node):
        raise ExpressionError(
            f"a selection over the objects of {', '.join(sorted(objects))} cannot be pushed into a"
            " pyarrow scan of tags"
        )
    validity = [pc.field(name).is_valid() for name in sorted(fields_of(node))]
    return functools.reduce(operator.and_, validity, _build(node))


def _build(node: Node) -> pc.Expression:
    match node:
        case Constant(kind=kind, value=value):
            return pc.scalar(pa.scalar(value, _TYPES[kind]))
        case Field(kind=kind, name=name):
            if kind == "bool":
                return pc.field(name)
            return pc.field(name).cast(_TYPES[kind], safe=False)
        case Negate(operand=operand):
            return pc.negate(_build(operand))
        case Not(operand=operand):
            return ~_build(operand)
        case Arithmetic(op=op, left=left, right=right):
            if node.kind == "float":
                return _ARITHMETIC[op](_as_float(left), _as_float(right))
            return _ARITHMETIC[op](_build(left), _build(right))
        case Call(function=function, args=args):
            convert = _as_float if node.kind == "float" else _build
            values = [convert(arg) for arg in args]
            if function == "abs":
                return pc.abs(values[0])
            if function == "sqrt":
                return pc.sqrt(values[0])
            combine = pc.min_element_wise if function == "min" else pc.max_element_wise
            return combine(*values, skip_nulls=False)
        case Compare(operands=operands, ops=ops):
            values = [_operand(o, operands) for o in operands]
            tests = [_COMPARE[op](a, b) for op, a, b in zip(ops, values, values[1:], strict=False)]
            return functools.reduce(operator.and_, tests)
        case Logical(op=op, operands=operands):
            combine = operator.and_ if op == "and" else operator.or_
            return functools.reduce(combine, (_build(o) for o in operands))
        case Member(operand=operand, items=items, negated=negated):
            value = _operand(operand, (operand, *items))
            found = functools.reduce(
                operator.or_,
                (pc.equal(value, _operand(item, (operand, *items))) for item in items),
            )
            return ~found if negated else found
        case Between(operand=operand, low=low, high=high, negated=negated):
            group = (operand, low, high)
            value = _operand(operand, group)
            inside = pc.less_equal(_operand(low, group), value) & pc.less_equal(
                value, _operand(high, group)
            )
            return ~inside if negated else inside
    raise AssertionError(f"unknown node {node!r}")  # pragma: no cover


def _operand(node: Node, group: tuple[Node, ...]) -> pc.Expression:
    """A comparison operand; a field compared only with constants is left bare."""
    others = [other for other in group if other is not node]
    if isinstance(node, Field) and all(isinstance(o, Constant) for o in others):
        return pc.field(node.name)
    if node.kind == "int" and any(other.kind == "float" for other in others):
        # As numpy does; Arrow alone might meet a float32 field in float32.
        return _as_float(node)
    return _build(node)


def _as_float(node: Node) -> pc.Expression:
    if isinstance(node, Constant):
        return pc.scalar(pa.scalar(float(node.value), pa.float64()))
    built = _build(node)
    return built if node.kind == "float" else built.cast(pa.float64(), safe=False)
