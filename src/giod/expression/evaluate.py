"""Evaluate a syntax tree over whole columns with numpy.

Integer tag columns are computed as int64 and floating-point ones as float64,
so a result never depends on how narrow a column was stored. ``/``, ``%``,
``**`` and ``sqrt`` give floats; dividing by zero gives ``inf`` or ``nan``
(never an exception); ``min`` and ``max`` ignore a ``nan`` when the other
side is a number (as Arrow's ``min_element_wise`` does). An event in which any
field the expression reads is null is never selected.

Values over a collection's objects are awkward arrays with one list per event,
computed by the same numpy ufuncs (awkward broadcasts a per-event value over
the objects of its event). ``min``/``max`` of an event without objects and an
index past its last object are missing; a comparison (or a true/false value
used as a condition) that reads a missing value is false.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa

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
    ObjectField,
    Reduce,
)
from giod.storage.numpyview import chunked_values

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
    node: Node,
    kinds: Mapping[str, Kind],
    columns: Mapping[str, Any],
    size: int | None,
    objects: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """The boolean mask of ``node`` over ``columns`` (one value per event) and ``objects``
    (per collection, an awkward array of the events' lists of objects)."""
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
    lists: dict[str, ak.Array] = {}
    for name, given in (objects or {}).items():
        lists[name] = ak.Array(given)
        if size is None:
            size = len(lists[name])
        elif len(lists[name]) != size:
            raise DataError(f"collection {name!r} has {len(lists[name])} events, but other columns have {size}")
    if size is None:
        size = _length_of_any(columns)
    with np.errstate(all="ignore"):
        result = _truth(_evaluate(node, arrays, lists))
    if isinstance(result, ak.Array):
        result = ak.to_numpy(result)
    mask = np.array(np.broadcast_to(np.asarray(result, dtype=np.bool_), (size,)))
    if valid is not None:
        mask &= valid
    return mask


def evaluate_constant(node: Node) -> bool | int | float:
    """The value of a ``node`` that reads no field, as a Python scalar of its kind."""
    with np.errstate(all="ignore"):
        value = _evaluate(node, {})
    result: bool | int | float = _PYTHON[node.kind](value)
    return result


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
                mask = chunked_values(column.is_valid())
                column = column.fill_null(False if pa.types.is_boolean(column.type) else 0)
            values = chunked_values(column)
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


def _evaluate(node: Node, arrays: Mapping[str, np.ndarray], lists: Mapping[str, ak.Array] | None = None) -> Value:
    def ev(child: Node) -> Value:
        return _evaluate(child, arrays, lists)

    match node:
        case Constant(kind=kind, value=value):
            return _CAST[kind](value)
        case Field(name=name):
            return arrays[name]
        case ObjectField(kind=kind, collection=collection, name=name):
            return ak.values_astype(_objects(lists, collection)[name], _CAST[kind])
        case Counter(collection=collection):
            return ak.to_numpy(ak.num(_objects(lists, collection), axis=1)).astype(np.int64)
        case Reduce(function=function, operand=operand):
            return _reduce(function, node.kind, ev(operand))
        case Index(operand=operand, position=position):
            # a one-element slice is empty past the end: firsts() makes that a missing value
            return ak.firsts(ev(operand)[:, position : position + 1 or None], axis=1)
        case Negate(operand=operand):
            return np.negative(ev(operand))
        case Not(operand=operand):
            return np.logical_not(_truth(ev(operand)))
        case Arithmetic(op=op, left=left, right=right):
            a, b = ev(left), ev(right)
            if op in _FLOAT_ARITHMETIC:
                return _FLOAT_ARITHMETIC[op](*_common("float", a, b))
            return _ARITHMETIC[op](*_common(node.kind, a, b))
        case Call(function=function, args=args):
            values = _common(node.kind, *(ev(arg) for arg in args))
            if function == "abs":
                return np.abs(values[0])
            if function == "sqrt":
                return np.sqrt(values[0])
            return functools.reduce(np.fmin if function == "min" else np.fmax, values)
        case Compare(operands=operands, ops=ops):
            values = [ev(operand) for operand in operands]
            tests = (_COMPARE[op](a, b) for op, a, b in zip(ops, values, values[1:], strict=False))
            return _truth(functools.reduce(np.logical_and, tests))
        case Logical(op=op, operands=operands):
            combine = np.logical_and if op == "and" else np.logical_or
            return functools.reduce(combine, (_truth(ev(o)) for o in operands))
        case Member(operand=operand, items=items, negated=negated):
            value = ev(operand)
            found = _truth(functools.reduce(np.logical_or, (np.equal(value, ev(item)) for item in items)))
            return np.logical_not(found) if negated else found
        case Between(operand=operand, low=low, high=high, negated=negated):
            value = ev(operand)
            inside = np.logical_and(
                np.less_equal(ev(low), value),
                np.less_equal(value, ev(high)),
            )
            inside = _truth(inside)
            return np.logical_not(inside) if negated else inside
    raise AssertionError(f"unknown node {node!r}")  # pragma: no cover


def _common(kind: Kind, *values: Value) -> list[Value]:
    """Bring numeric operands to the result's kind (int64 or float64) before the numpy call."""
    if kind == "float":
        return [ak.values_astype(value, np.float64) if isinstance(value, ak.Array)
                else np.asarray(value, dtype=np.float64) for value in values]
    return list(values)


def _objects(lists: Mapping[str, ak.Array] | None, collection: str) -> ak.Array:
    if lists is None or collection not in lists:
        raise DataError(f"no objects given for collection {collection!r}")
    return lists[collection]


def _truth(value: Value) -> Value:
    """A condition with its missing values (index past the end, min of no objects) false."""
    return ak.fill_none(value, False) if isinstance(value, ak.Array) else value


def _reduce(function: str, kind: Kind, values: Value) -> Value:
    """One value per event from each event's list of ``values``."""
    if function == "count":
        return ak.to_numpy(ak.sum(values, axis=1)).astype(np.int64)
    if function == "any":
        return ak.to_numpy(ak.any(values, axis=1))
    if function == "all":
        return ak.to_numpy(ak.all(values, axis=1))
    if function == "sum":
        return ak.to_numpy(ak.sum(values, axis=1)).astype(_CAST[kind])
    reduced = (ak.min if function == "min" else ak.max)(values, axis=1, mask_identity=True)
    return ak.values_astype(reduced, _CAST[kind])
