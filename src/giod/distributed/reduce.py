"""Reducing task results in partition order: histograms add, arrays concatenate, custom reducers.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import awkward as ak
import numpy as np

from giod.errors import DataError

if TYPE_CHECKING:
    pass


from giod.distributed.tasks import EMPTY

# ---------------------------------------------------------------- reduction


class _Pieces:
    """Arrays (or lists) to concatenate once, at the end, in partition order."""

    def __init__(self, first: Any):
        self.items = [first]


def _lift(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _lift(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_lift(v) for v in value)
    if isinstance(value, np.ndarray | ak.Array | list):
        return _Pieces(value)
    return value


def _combine(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = _combine(out[k], v) if k in out else v
        return out
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(_combine(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, _Pieces) and isinstance(b, _Pieces):
        a.items.extend(b.items)
        return a
    if isinstance(a, numbers.Number | np.number) and isinstance(b, numbers.Number | np.number):
        return a + b  # type: ignore[operator]  # numbers.Number declares no __add__
    if type(a) is type(b) and hasattr(a, "__add__") and not isinstance(a, str | bytes):
        return add(a, b)  # histograms (hist, boost-histogram) and anything else that adds
    raise DataError(f"cannot reduce a {type(a).__name__} with a {type(b).__name__}: pass reduce=callable")


def add(a: Any, b: Any, *, inplace: bool = False) -> Any:
    """``a + b`` (or ``a += b``); two unweighted histograms stay unweighted.

    boost-histogram marks the variances of any sum as unknown, although the
    sum of two histograms of counts is still one of counts: the flag is put
    back, so that a merged histogram has the variances of one filled serially.
    """
    known = getattr(a, "_variance_known", None), getattr(b, "_variance_known", None)
    if inplace:
        a += b
        out = a
    else:
        out = a + b
    if None not in known and hasattr(out, "_variance_known"):
        out._variance_known = known[0] and known[1]
    return out


def _finish(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _finish(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_finish(v) for v in value)
    if isinstance(value, _Pieces):
        first = value.items[0]
        if isinstance(first, np.ndarray):
            return np.concatenate(value.items)
        if isinstance(first, ak.Array):
            return value.items[0] if len(value.items) == 1 else ak.concatenate(value.items)
        return [x for item in value.items for x in item]
    return value


class Ordered:
    """Folds results in partition order as they arrive in any order."""

    def __init__(self, reduce: Callable[[Any, Any], Any] | None):
        self.reduce = reduce
        self.waiting: dict[int, Any] = {}
        self.next = 0
        self.value: Any = EMPTY

    def add(self, index: int, value: Any) -> None:
        self.waiting[index] = value
        while self.next in self.waiting:
            v = self.waiting.pop(self.next)
            self.next += 1
            if v is EMPTY:
                continue
            if self.reduce is not None:
                self.value = v if self.value is EMPTY else self.reduce(self.value, v)
            else:
                v = _lift(v)
                self.value = v if self.value is EMPTY else _combine(self.value, v)

    def result(self) -> Any:
        if self.value is EMPTY or self.reduce is not None:
            return self.value
        return _finish(self.value)

