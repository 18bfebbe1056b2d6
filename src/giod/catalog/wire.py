"""Catalog records as JSON: what the server sends and the remote catalog reads.

Records are frozen dataclasses of ints, floats, strings, tuples and dicts;
they go out as JSON objects and come back as the same records (tuples stay
tuples, nested containers stay ``ContainerRecord``). Non-finite tag bounds
(a tag may hold ±inf) travel as the strings ``"inf"``, ``"-inf"`` and
``"nan"`` so that every body is strict JSON.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, TypeVar

from giod.catalog.records import (
    CommitResult,
    ContainerRecord,
    ContainerSpec,
    DatabaseCommit,
    DatabaseRecord,
    DatasetRecord,
    SchemaRecord,
    SiteRecord,
    VersionRecord,
)
from giod.errors import CatalogError

__all__ = ["dump", "dump_stats", "load", "load_many", "load_stats"]

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


def load(cls: type[R], data: Any) -> R:
    """The record of type ``cls`` that ``dump`` turned into ``data``."""
    if not isinstance(data, dict):
        raise CatalogError(f"malformed {cls.__name__}: expected an object, got {type(data).__name__}")
    nested = _NESTED_BY_TYPE.get(cls, _NESTED)
    kwargs: dict[str, Any] = {}
    try:
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name not in data:
                continue  # a default applies (or the constructor says what is missing)
            value = data[f.name]
            if f.name == "tag_stats":
                value = load_stats(value)
            elif f.name in nested:
                value = tuple(load(nested[f.name], c) for c in value)
            elif f.name in _TUPLES:
                value = tuple(int(v) for v in value)
            kwargs[f.name] = value
        return cls(**kwargs)
    except CatalogError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise CatalogError(f"malformed {cls.__name__}: {exc}") from exc


def load_many(cls: type[R], data: Any) -> list[R]:
    if not isinstance(data, list):
        raise CatalogError(f"malformed list of {cls.__name__}")
    return [load(cls, d) for d in data]
