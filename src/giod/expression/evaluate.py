"""Evaluate a syntax tree over whole columns with numpy.

Integer tag columns are computed as int64 and floating-point ones as float64,
so a result never depends on how narrow a column was stored. ``/``, ``%``,
``**`` and ``sqrt`` give floats; dividing by zero gives ``inf`` or ``nan``
(never an exception); ``min`` and ``max`` ignore a ``nan`` when the other
side is a number (as Arrow's ``min_element_wise`` does). An event in which any
field the expression reads is null is never selected.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from giod.errors import DataError
from giod.expression.nodes import (
    Arithmetic,
    Between,
    Call,
    Compare,
    Constant,
    Field,
    Kind,
    Logical,
    Member,
    Negate,
    Node,
    Not,
)

_CAST = {"bool": np.bool_, "int": np.int64, "float": np.float64}
_PYTHON = {"bool": bool, "int": int, "float": float}
_ACCEPTED_KINDS = {"bool": "b", "int": "iu", "float": "iuf"}
_COMPARE = {
    "==": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}
_ARITHMETIC = {"+": np.add, "-": np.subtract, "*": np.multiply}
_FLOAT_ARITHMETIC = {"/": np.true_divide, "%": np.remainder, "**": np.power}

Value = Any  # a numpy array or numpy scalar


def evaluate_tree(
    node: Node, kinds: Mapping[str, Kind], columns: Mapping[str, Any], size: int | None
) -> np.ndarray:
    """The boolean mask of ``node`` over ``columns`` (one value per event)."""
    arrays: dict[str, np.ndarray] = {}
    valid: np.ndarray | None = None
    for name, kind in sorted(kinds.items()):
        if name not in columns:
            raise DataError(f"no column given for tag field {name!r}")
        values, mask = _column(name, kind, columns[name])
        if size is None:
            size = len(values)
        elif len(values) != size:
            raise DataError(
                f"column {name!r} has {len(values)} values, but other columns have {size}"
            )
        arrays[name] = values
        if mask is not None:
            valid = mask if valid is None else valid & mask
    if size is None:
        size = _length_of_any(columns)
    with np.errstate(all="ignore"):
        result = _evaluate(node, arrays)
    mask = np.array(np.broadcast_to(np.asarray(result, dtype=np.bool_), (size,)))
    if valid is not None:
        mask &= valid
    return mask


def evaluate_constant(node: Node) -> bool | int | float:
    """The value of a ``node`` that reads no field, as a Python scalar of its kind."""
    with np.errstate(all="ignore"):
        value = _evaluate(node, {})
    return _PYTHON[node.kind](value)


def _length_of_any(columns: Mapping[str, Any]) -> int:
    for column in columns.values():
        try:
            return len(column)
        except TypeError:
            continue
    raise DataError("cannot tell the number of events: no columns given")


def _column(name: str, kind: Kind, column: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """The column as a 1-D numpy array of the field's kind, and its validity (None: all valid)."""
    mask: np.ndarray | None = None
    try:
        if isinstance(column, pa.ChunkedArray | pa.Array):
            if column.null_count:
                mask = column.is_valid().to_numpy(zero_copy_only=False)
                column = column.fill_null(False if pa.types.is_boolean(column.type) else 0)
            values = column.to_numpy(zero_copy_only=False)
        elif isinstance(column, np.ma.MaskedArray):
            if np.ma.getmask(column) is not np.ma.nomask:
                mask = ~np.ma.getmaskarray(column)
            values = np.ma.getdata(column)
        else:
            values = np.asarray(column)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise DataError(f"column {name!r} cannot be read as numbers: {exc}") from exc
    if values.ndim != 1:
        raise DataError(f"column {name!r} must be one-dimensional, not of shape {values.shape}")
    if values.dtype.kind not in _ACCEPTED_KINDS[kind]:
        raise DataError(
            f"column {name!r} holds {values.dtype} values, but the tag field is of kind {kind}"
        )
    return values.astype(_CAST[kind], copy=False), mask


def _evaluate(node: Node, arrays: Mapping[str, np.ndarray]) -> Value:
    match node:
        case Constant(kind=kind, value=value):
            return _CAST[kind](value)
        case Field(name=name):
            return arrays[name]
        case Negate(operand=operand):
            return np.negative(_evaluate(operand, arrays))
        case Not(operand=operand):
            return np.logical_not(_evaluate(operand, arrays))
        case Arithmetic(op=op, left=left, right=right):
            a, b = _evaluate(left, arrays), _evaluate(right, arrays)
            if op in _FLOAT_ARITHMETIC:
                return _FLOAT_ARITHMETIC[op](*_common("float", a, b))
            return _ARITHMETIC[op](*_common(node.kind, a, b))
        case Call(function=function, args=args):
            values = _common(node.kind, *(_evaluate(arg, arrays) for arg in args))
            if function == "abs":
                return np.abs(values[0])
            if function == "sqrt":
                return np.sqrt(values[0])
            return functools.reduce(np.fmin if function == "min" else np.fmax, values)
        case Compare(operands=operands, ops=ops):
            values = [_evaluate(operand, arrays) for operand in operands]
            tests = (_COMPARE[op](a, b) for op, a, b in zip(ops, values, values[1:], strict=False))
            return functools.reduce(np.logical_and, tests)
        case Logical(op=op, operands=operands):
            combine = np.logical_and if op == "and" else np.logical_or
            return functools.reduce(combine, (_evaluate(o, arrays) for o in operands))
        case Member(operand=operand, items=items, negated=negated):
            value = _evaluate(operand, arrays)
            found = functools.reduce(
                np.logical_or, (np.equal(value, _evaluate(item, arrays)) for item in items)
            )
            return np.logical_not(found) if negated else found
        case Between(operand=operand, low=low, high=high, negated=negated):
            value = _evaluate(operand, arrays)
            inside = np.logical_and(
                np.less_equal(_evaluate(low, arrays), value),
                np.less_equal(value, _evaluate(high, arrays)),
            )
            return np.logical_not(inside) if negated else inside
    raise AssertionError(f"unknown node {node!r}")  # pragma: no cover


def _common(kind: Kind, *values: Value) -> list[Value]:
    """Bring numeric operands to the result's kind (int64 or float64) before the numpy call."""
    if kind == "float":
        return [np.asarray(value, dtype=np.float64) for value in values]
    return list(values)
