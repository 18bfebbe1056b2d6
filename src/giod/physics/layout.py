"""The in-memory event layout of the physics model (``model.yaml``).

Events are an ``ak.Array`` with one record per event. Each collection is a
field holding a variable-length list of records with its type's fields; a
one-to-one relation is an int32 field named after the relation (-1 = none), a
one-to-many relation a variable-length list of int32. Each tag is a scalar
field. Indices point into the target collection of the same event. Dtypes are
exactly the model's, so the federation's writer takes the array as it is.

The physics code works on flat numpy columns (one entry per object of all
events, plus per-event counts); this module turns those into the layout and
back without a Python loop over events.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

import awkward as ak
import numpy as np
import yaml

from giod.errors import DataError, SchemaError

__all__ = [
    "build_collection",
    "collection_fields",
    "counts",
    "flat",
    "load_model",
    "make_events",
    "model_text",
    "stable_order",
    "tag_dtypes",
    "with_fields",
]

#: Dtype of one-to-one relation fields and of one-to-many index lists.
INDEX_DTYPE = np.dtype(np.int32)


def model_text() -> str:
    """The physics data model as YAML text (for registering a dataset)."""
    return resources.files("giod.physics").joinpath("model.yaml").read_text(encoding="utf-8")


@functools.cache
def load_model() -> dict[str, Any]:
    """The physics data model, parsed."""
    try:
        model = yaml.safe_load(model_text())
    except yaml.YAMLError as exc:  # pragma: no cover - the packaged file is tested
        raise SchemaError(f"the physics model is not valid YAML: {exc}") from exc
    return dict(model)


def _dtype(spec: Any) -> np.dtype:
    name = spec["type"] if isinstance(spec, Mapping) else spec
    return np.dtype(name)


@functools.cache
def collection_fields(collection: str) -> dict[str, np.dtype | None]:
    """Field name to dtype for a collection; ``None`` marks a one-to-many relation."""
    model = load_model()
    try:
        tdef = model["types"][model["collections"][collection]]
    except KeyError:
        raise DataError(f"the physics model has no collection {collection!r}") from None
    out: dict[str, np.dtype | None] = {
        name: _dtype(spec) for name, spec in (tdef.get("fields") or {}).items()
    }
    for name, spec in (tdef.get("relations") or {}).items():
        out[name] = None if spec.get("many") else INDEX_DTYPE
    return out


@functools.cache
def tag_dtypes() -> dict[str, np.dtype]:
    """Tag name to dtype."""
    return {name: _dtype(spec) for name, spec in load_model()["tags"].items()}


def _offsets(n_per_event: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(n_per_event) + 1, dtype=np.int64)
    np.cumsum(n_per_event, out=offsets[1:])
    return offsets


def build_collection(
    collection: str, columns: Mapping[str, Any], n_per_event: np.ndarray
) -> ak.Array:
    """One collection from flat columns ordered by event, and objects per event.

    One-to-many relations are given as ``(n_per_object, flat_indices)``.
    """
    fields = collection_fields(collection)
    missing = set(fields) - set(columns)
    extra = set(columns) - set(fields)
    if missing or extra:
        raise DataError(
            f"collection {collection!r}: missing fields {sorted(missing)}, unknown {sorted(extra)}"
        )
    n_per_event = np.asarray(n_per_event, dtype=np.int64)
    total = int(n_per_event.sum())
    contents = []
    for name, dtype in fields.items():
        value = columns[name]
        if dtype is None:
            n_per_object, indices = value
            inner = ak.contents.ListOffsetArray(
                ak.index.Index64(_offsets(np.asarray(n_per_object))),
                ak.contents.NumpyArray(np.asarray(indices, dtype=INDEX_DTYPE)),
            )
            contents.append(inner)
        else:
            array = np.ascontiguousarray(value, dtype=dtype)
            contents.append(ak.contents.NumpyArray(array))
        if len(contents[-1]) != total:
            raise DataError(
                f"collection {collection!r}: field {name!r} has {len(contents[-1])} entries, "
                f"the counts say {total}"
            )
    record = ak.contents.RecordArray(contents, list(fields), length=total)
    return ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(_offsets(n_per_event)), record))


def make_events(collections: Mapping[str, ak.Array], tags: Mapping[str, Any]) -> ak.Array:
    """Events from whole collections and tag columns (cast to the model's dtypes)."""
    dtypes = tag_dtypes()
    fields: dict[str, Any] = dict(collections)
    for name, values in tags.items():
        if name not in dtypes:
            raise DataError(f"the physics model has no tag {name!r}")
        fields[name] = np.asarray(values, dtype=dtypes[name])
    lengths = {len(v) for v in fields.values()}
    if len(lengths) > 1:
        raise DataError(f"collections and tags disagree on the number of events: {sorted(lengths)}")
    return ak.zip(fields, depth_limit=1)


def with_fields(
    events: ak.Array, collections: Mapping[str, ak.Array], tags: Mapping[str, Any] | None = None
) -> ak.Array:
    """``events`` with collections and tags added (or replaced)."""
    existing = {name: events[name] for name in events.fields}
    return make_events({**existing, **collections}, {**_tags_of(existing), **(tags or {})})


def _tags_of(fields: dict[str, Any]) -> dict[str, Any]:
    dtypes = tag_dtypes()
    tags = {name: fields.pop(name) for name in list(fields) if name in dtypes}
    return {name: ak.to_numpy(values) for name, values in tags.items()}


def counts(events: ak.Array, collection: str) -> np.ndarray:
    """Objects per event of a collection, as int64."""
    return np.asarray(ak.num(events[collection], axis=1), dtype=np.int64)


def flat(events: ak.Array, collection: str, name: str) -> np.ndarray:
    """One field of a collection over all events, flattened to numpy."""
    return np.asarray(ak.to_numpy(ak.flatten(events[collection][name], axis=1)))


def stable_order(key: np.ndarray) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` for non-negative integer keys, several times faster.

    Key and position are packed into one int64 and sorted by value when they fit.
    """
    key = np.asarray(key, dtype=np.int64)
    n = len(key)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    pos_bits = max(int(n - 1).bit_length(), 1)
    if int(key.max()).bit_length() + pos_bits > 62 or key.min() < 0:
        return np.argsort(key, kind="stable")
    packed = np.sort((key << pos_bits) | np.arange(n, dtype=np.int64))
    return packed & ((1 << pos_bits) - 1)
