"""The parts a data model is made of: dtypes, fields, relations, types, collections.

These are plain frozen value objects; :class:`giod.schema.Schema` holds them
and ``giod.schema.parse`` builds them from YAML after validation.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = [
    "DTYPES",
    "STRING",
    "TAG_CONTAINER",
    "TAG_INDEX",
    "CollectionDef",
    "FieldDef",
    "RelationDef",
    "TypeDef",
    "check_default",
    "check_value",
    "dtype_arrow_type",
    "format_dtype",
    "parse_dtype",
    "widens",
]

#: The reserved container that holds the per-event tag columns.
TAG_CONTAINER = "tag"
#: The container of a database's tag index (``giod.read.tagindex``); no schema can name a container
#: so (schema names have no '-').
TAG_INDEX = "tag-index"

#: The element types a field may have, in the order error messages list them.
DTYPES: tuple[str, ...] = (
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "bool",
)

#: Text, one UTF-8 string per object or event: a field or tag type beside the numeric DTYPES.
#: Scalars only (no fixed-size arrays of strings), without default, not usable in selections.
STRING = "string"

_ARROW_TYPES: dict[str, pa.DataType] = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    STRING: pa.string(),
}

# Largest integer magnitude a float type holds exactly (2 ** mantissa bits).
_FLOAT_EXACT = {"float32": 2**24, "float64": 2**53}

_DTYPE_RE = re.compile(r"^\s*([a-z0-9]+)\s*((?:\[\s*\d+\s*\]\s*)*)$")
_DIM_RE = re.compile(r"\[\s*(\d+)\s*\]")


def parse_dtype(text: str) -> tuple[str, tuple[int, ...]]:
    """Split ``"float32[3][3]"`` into ``("float32", (3, 3))``; ValueError if malformed."""
    match = _DTYPE_RE.match(text)
    if match is None or match.group(1) not in _ARROW_TYPES:
        raise ValueError(text)
    shape = tuple(int(n) for n in _DIM_RE.findall(match.group(2)))
    if any(n < 1 for n in shape) or (shape and match.group(1) == STRING):
        raise ValueError(text)
    return match.group(1), shape


def format_dtype(dtype: str, shape: tuple[int, ...] = ()) -> str:
    """The inverse of :func:`parse_dtype`."""
    return dtype + "".join(f"[{n}]" for n in shape)


def dtype_arrow_type(dtype: str, shape: tuple[int, ...] = ()) -> pa.DataType:
    """The Arrow type of one value: a scalar, or nested non-null fixed-size lists."""
    arrow_type = _ARROW_TYPES[dtype]
    for size in reversed(shape):
        arrow_type = pa.list_(pa.field("item", arrow_type, nullable=False), size)
    return arrow_type


def _is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def widens(old: str, new: str) -> bool:
    """True when every value of dtype ``old`` is exactly representable in ``new``.

    This is the widening table of the evolution rules: ints to wider ints,
    unsigned to wider unsigned or to a strictly wider signed int, float32 to
    float64, and ints to a float whose mantissa holds them (so int32 ->
    float64 is allowed but int64 -> float64 is not). ``bool`` never widens.
    """
    if old == new or "bool" in (old, new) or STRING in (old, new):
        return False
    if _is_float(old):
        return new == "float64" and old == "float32"
    info = np.iinfo(old)
    if _is_float(new):
        return max(-int(info.min), int(info.max)) <= _FLOAT_EXACT[new]
    new_info = np.iinfo(new)
    return int(new_info.min) <= int(info.min) and int(info.max) <= int(new_info.max)


def check_value(value: Any, dtype: str) -> Any:
    """Return ``value`` normalised for ``dtype`` (ints to float for float types).

    Raises TypeError or ValueError with a phrase saying what was expected.
    """
    if dtype == STRING:
        raise ValueError("string fields and tags take no default")
    if dtype == "bool":
        if not isinstance(value, bool):
            raise TypeError("expected true or false")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number for {dtype}")
    if _is_float(dtype):
        value = float(value)
        if math.isfinite(value) and abs(value) > float(np.finfo(dtype).max):
            raise ValueError(f"{value!r} is out of range for {dtype}")
        return value
    if not isinstance(value, int):
        raise TypeError(f"expected an integer for {dtype}")
    info = np.iinfo(dtype)
    if not int(info.min) <= value <= int(info.max):
        raise ValueError(f"{value} is out of range for {dtype} ({info.min}..{info.max})")
    return value


def check_default(value: Any, dtype: str, shape: tuple[int, ...]) -> Any:
    """Normalise a default: a scalar (broadcast over a fixed array) or nested lists of ``shape``.

    Nested lists come back as nested tuples, so that a FieldDef stays immutable.
    """
    if not isinstance(value, (list, tuple)):
        return check_value(value, dtype)
    if not shape:
        raise ValueError(f"expected a single value for {dtype}, not a list")
    return _check_nested(value, dtype, shape, shape)


def _check_nested(value: Any, dtype: str, shape: tuple[int, ...], full: tuple[int, ...]) -> Any:
    if not shape:
        if isinstance(value, (list, tuple)):
            raise ValueError(f"nested lists are deeper than the shape {format_dtype('', full)}")
        return check_value(value, dtype)
    if not isinstance(value, (list, tuple)) or len(value) != shape[0]:
        raise ValueError(f"expected a scalar or nested lists of shape {format_dtype('', full)}")
    return tuple(_check_nested(v, dtype, shape[1:], full) for v in value)


def _plain(value: Any) -> Any:
    """Nested tuples back to lists, for YAML and JSON."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class FieldDef:
    """One field of a type, or one tag: a scalar or fixed-size array of ``dtype``."""

    name: str
    dtype: str
    shape: tuple[int, ...] = ()
    default: Any = None
    aliases: tuple[str, ...] = ()
    doc: str = ""
    precision: int | None = None  # mantissa bits stored (floats only; giod.schema.precision)

    @property
    def type_string(self) -> str:
        """The dtype as written in YAML, e.g. ``float32[6]``."""
        return format_dtype(self.dtype, self.shape)

    @property
    def arrow_type(self) -> pa.DataType:
        """The Arrow type of one value of this field."""
        return dtype_arrow_type(self.dtype, self.shape)

    def to_dict(self) -> str | dict[str, Any]:
        """The canonical YAML form: the dtype string alone, or a mapping."""
        if self.default is None and not self.aliases and not self.doc and self.precision is None:
            return self.type_string
        out: dict[str, Any] = {"type": self.type_string}
        if self.precision is not None:
            out["precision"] = self.precision
        if self.default is not None:
            out["default"] = _plain(self.default)
        if self.aliases:
            out["aliases"] = list(self.aliases)
        if self.doc:
            out["doc"] = self.doc
        return out


@dataclass(frozen=True)
class RelationDef:
    """A link from an object to objects of ``target`` (a collection) in the same event."""

    name: str
    target: str
    many: bool
    doc: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"to": self.target, "many": self.many}
        if self.doc:
            out["doc"] = self.doc
        return out


@dataclass(frozen=True)
class TypeDef:
    """An object type: fields (declaration order) then relations (declaration order)."""

    name: str
    fields: dict[str, FieldDef]
    relations: dict[str, RelationDef]
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.description:
            out["description"] = self.description
        out["fields"] = {name: f.to_dict() for name, f in self.fields.items()}
        if self.relations:
            out["relations"] = {name: r.to_dict() for name, r in self.relations.items()}
        return out


@dataclass(frozen=True)
class CollectionDef:
    """A named collection of objects of one type, stored in one container."""

    name: str
    type: str
    container: str
    doc: str = ""
    counter: str = ""  # another name for n<name> in selections: the file's counter (NJet)

    def to_dict(self) -> str | dict[str, Any]:
        if not self.doc and not self.counter:
            return self.type
        out: dict[str, Any] = {"type": self.type}
        if self.counter:
            out["counter"] = self.counter
        if self.doc:
            out["doc"] = self.doc
        return out
