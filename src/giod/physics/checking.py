"""Frozen dataclasses built from parsed YAML, with errors that name the key.

A field's metadata may carry a ``check`` (value -> problem or None);
``build(cls, data)`` converts nested mappings and lists to the annotated
types, refuses unknown and missing keys, runs the checks and then the class's
own ``_validate(path)``. Problems are raised as :class:`KeyProblem` with the
key's dotted path (``tracker.barrel[3].radius``), for the caller to wrap.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

__all__ = [
    "KeyProblem",
    "build",
    "checked",
    "fraction",
    "key_error",
    "nonnegative",
    "one_of",
    "positive",
    "probability",
]

Check = Callable[[Any], str | None]


def positive(v: Any) -> str | None:
    return None if v > 0 else "must be > 0"


def nonnegative(v: Any) -> str | None:
    return None if v >= 0 else "must be >= 0"


def probability(v: Any) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


def fraction(v: Any) -> str | None:
    return None if 0 <= v <= 1 else "must be in [0, 1]"


def one_of(*choices: str) -> Check:
    def check(v: Any) -> str | None:
        return None if v in choices else f"must be one of {', '.join(choices)}"

    return check


def checked(check: Check | None = None) -> Any:
    """A dataclass field (without default) whose value ``check`` validates."""
    return field(metadata={"check": check} if check else {})


class KeyProblem(Exception):
    """A problem with one key of a description."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def key_error(path: str, problem: str) -> KeyProblem:
    """The problem ``problem`` at ``path`` (leading dots dropped)."""
    return KeyProblem(path.lstrip("."), problem)


def build(cls: type, data: Any, path: str = "") -> Any:
    """An instance of the dataclass ``cls`` from parsed ``data`` found at ``path``."""
    if not isinstance(data, Mapping):
        raise key_error(path or "(top)", "expected a mapping")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in known:
            raise key_error(f"{path}.{key}", "unknown key")
    values: dict[str, Any] = {}
    for name, fld in known.items():
        where = f"{path}.{name}"
        if name not in data:
            raise key_error(where, "missing key")
        value = _convert(hints[name], data[name], where)
        check = fld.metadata.get("check")
        if check is not None and (problem := check(value)) is not None:
            raise key_error(where, f"{problem} (got {value!r})")
        values[name] = value
    obj = cls(**values)
    validate = getattr(obj, "_validate", None)
    if validate is not None:
        validate(path)
    return obj


def _convert(hint: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(hint)
    if origin is tuple:
        if not isinstance(value, list):
            raise key_error(path, "expected a list")
        item = typing.get_args(hint)[0]
        return tuple(_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return build(hint, value, path)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise key_error(path, f"expected a number (got {value!r})")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise key_error(path, f"expected an integer (got {value!r})")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise key_error(path, f"expected a string (got {value!r})")
        return value
    raise key_error(path, f"unsupported type {hint!r}")  # pragma: no cover - a bug here
