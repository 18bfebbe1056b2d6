"""Catalog records as JSON: what the server sends and the remote catalog reads.

Records are frozen dataclasses of ints, floats, strings, tuples and dicts;
they go out as JSON objects and come back as the same records (tuples stay
tuples, nested containers stay ``ContainerRecord``). Non-finite tag bounds
(a tag may hold ±inf) travel as the strings ``"inf"``, ``"-inf"`` and
``"nan"`` so that every body is strict JSON.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, TypeVar

from giod.catalog.records import (
    INT64_MAX,
    CommitResult,
    ContainerRecord,
    ContainerSpec,
    DatabaseCommit,
    DatabaseRecord,
    DatasetRecord,
    SchemaRecord,
    SiteRecord,
    VersionRecord,
    counts,
)
from giod.errors import CatalogError

__all__ = ["checked", "dump", "dump_stats", "got", "load", "load_many", "load_stats", "time_of"]

R = TypeVar("R")

# fields holding tuples, and nested record types, per record type
_TUPLES = {"cluster_entries", "site_ids", "parents", "cluster_checksums"}
_NESTED: dict[str, type] = {"containers": ContainerRecord}
_NESTED_BY_TYPE: dict[type, dict[str, type]] = {DatabaseCommit: {"containers": ContainerSpec}}
KNOWN = (
    CommitResult, ContainerRecord, ContainerSpec, DatabaseCommit, DatabaseRecord,
    DatasetRecord, SchemaRecord, SiteRecord, VersionRecord,
)


def _number(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def _unnumber(x: Any) -> float:
    return float(x)  # float("inf"), float("-inf"), float("nan") parse the strings too


def dump_stats(stats: Any) -> dict[str, list[float | str]]:
    """Tag statistics ``{field: (min, max)}`` as strict JSON."""
    return {str(k): [_number(float(lo)), _number(float(hi))] for k, (lo, hi) in stats.items()}


def load_stats(data: Any) -> dict[str, tuple[float, float]]:
    try:
        return {str(k): (_unnumber(v[0]), _unnumber(v[1])) for k, v in data.items()}
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise CatalogError(f"malformed tag statistics: {exc}") from exc


def dump(record: Any) -> dict[str, Any]:
    """A record as a JSON-ready dict."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.name == "tag_stats":
            value = dump_stats(value)
        elif f.name == "containers":
            value = [dump(c) for c in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def _anything(value: Any) -> bool:
    return True


def _int64(value: Any) -> bool:
    return type(value) is int and -INT64_MAX - 1 <= value <= INT64_MAX


#: fields that count or place events and bytes: never negative
_COUNTS = frozenset({"first_entry", "n_events", "size", "bytes"})
#: what a record's plain field may hold, by its annotation: a server's value is checked before any use
_PLAIN: dict[str, Callable[[Any], bool]] = {
    "int": _int64,
    "float": lambda v: type(v) is float or type(v) is int,
    "str": lambda v: type(v) is str,
    "str | None": lambda v: v is None or type(v) is str,
    "bool": lambda v: type(v) is bool,
    "dict[str, Any]": lambda v: type(v) is dict,
    "list": lambda v: type(v) is list,
}


def _ints(value: Any, name: str) -> tuple[int, ...]:
    """A list of integers from 0 to 2^63-1 (cluster entries, checksums, ids) as the server sent it."""
    if type(value) is list and counts(value):
        return tuple(value)
    raise CatalogError(f"malformed {name}: not a list of integers from 0 to 2^63-1: {str(value)[:80]}")


def got(doc: Any, key: str) -> Any:
    """``doc[key]`` of a server's JSON answer; CatalogError when the answer is no object or lacks it."""
    if not isinstance(doc, dict) or key not in doc:
        raise CatalogError(f"malformed answer from the server: no {key!r} in {str(doc)[:80]}")
    return doc[key]


def checked(value: Any, kind: str, what: str) -> Any:
    """``value`` of a server's answer if it is of ``kind`` (an annotation of ``_PLAIN``: "int" within 64
    bits, "str", "list"...); CatalogError naming ``what`` when it is not."""
    if _PLAIN[kind](value):
        return value
    raise CatalogError(f"malformed answer from the server: {what} is not {kind}: {str(value)[:80]}")


def time_of(value: Any, what: str) -> float:
    """A finite number of a server's answer (a time); CatalogError when it is not one."""
    if _PLAIN["float"](value) and math.isfinite(value):
        return float(value)
    raise CatalogError(f"malformed answer from the server: {what} is not a number: {str(value)[:80]}")


@functools.cache
def _layout(cls: type) -> tuple[tuple[str, str, Any], ...]:
    """How each field of ``cls`` is read: (name, kind, its check or nested type), made once per type."""
    nested = _NESTED_BY_TYPE.get(cls, _NESTED)
    out: list[tuple[str, str, Any]] = []
    for f in dataclasses.fields(cls):
        if f.name == "tag_stats":
            out.append((f.name, "stats", None))
        elif f.name in nested:
            out.append((f.name, "nested", nested[f.name]))
        elif f.name in _TUPLES:
            out.append((f.name, "ints", None))
        else:
            out.append((f.name, "count" if f.name in _COUNTS else "plain", _PLAIN.get(str(f.type), _anything)))
    return tuple(out)


def load(cls: type[R], data: Any) -> R:
    """The record of type ``cls`` that ``dump`` turned into ``data``; CatalogError when a field does not hold
    what its annotation says."""
    if not isinstance(data, dict):
        raise CatalogError(f"malformed {cls.__name__}: expected an object, got {type(data).__name__}")
    kwargs: dict[str, Any] = {}
    try:
        for name, kind, how in _layout(cls):  # type: ignore[arg-type]
            if name not in data:
                continue  # a default applies (or the constructor says what is missing)
            value = data[name]
            if kind == "plain" or kind == "count":
                if not how(value) or (kind == "count" and value < 0):
                    raise CatalogError(f"malformed {cls.__name__}: {name} is not "
                                       f"{'a count' if kind == 'count' else 'of its type'}: {str(value)[:80]}")
            elif kind == "stats":
                value = load_stats(value)
            elif kind == "nested":
                value = tuple(load(how, c) for c in value)
            else:
                value = _ints(value, name)
            kwargs[name] = value
        return cls(**kwargs)
    except CatalogError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise CatalogError(f"malformed {cls.__name__}: {exc}") from exc


def load_many(cls: type[R], data: Any) -> list[R]:
    if not isinstance(data, list):
        raise CatalogError(f"malformed list of {cls.__name__}")
    return [load(cls, d) for d in data]
