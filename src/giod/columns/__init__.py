"""Conversion between events in memory (awkward) and container columns (Arrow), both ways.

Both directions work on whole buffers: offsets and flat field arrays move
between awkward layouts and Arrow arrays without a Python loop per event or
object, and without copies where the memory layouts agree. The checks and
casts of single field values on the way to Arrow are ``giod.columns.fieldvalues``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa

from giod.columns.fieldvalues import (
    Objects,
    cast_field,
    field_array,
    field_width,
    fixed_width_array,
    flat_numpy,
    leaf_values,
    numpy_array,
    offsets_of,
    range_message,
    strip_options,
)
from giod.errors import DataError
from giod.schema import STRING, TAG_CONTAINER, FieldDef, Schema
from giod.schema.precision import round_array
from giod.storage import numpyview

__all__ = ["as_events", "column_content", "containers_in", "field_width", "to_tables"]


def as_events(events: Any, schema: Schema | None = None) -> ak.Array:
    """Events as an awkward Array, from an awkward Array, a list of dicts, a dict of arrays or lists, or a
    pyarrow Table or RecordBatch.

    Nothing is cast or dropped here: every form becomes the array awkward itself
    would make of it, and :func:`to_tables` is the one place that checks it
    against the schema. Python integers beyond int64, which awkward cannot hold,
    become uint64 (or float64, for a float field) when they fit exactly.
    """
    if isinstance(events, ak.Array):
        return ak.Array(strip_options(events.layout))
    if isinstance(events, pa.Table | pa.RecordBatch):
        return ak.Array(strip_options(ak.from_arrow(events, highlevel=False)))
    if isinstance(events, Mapping):
        return _from_columns(events, schema)
    if isinstance(events, list | tuple) and events and all(isinstance(e, Mapping) for e in events):
        return _from_dicts(list(events), schema)
    try:
        return ak.Array(list(events))
    except Exception as exc:  # awkward raises several types for malformed input
        raise DataError(f"cannot read events as an array of records: {exc}") from exc


def _from_columns(columns: Mapping[str, Any], schema: Schema | None) -> ak.Array:
    contents: dict[str, ak.contents.Content] = {}
    for name, value in columns.items():
        if isinstance(value, list | tuple):
            contents[str(name)] = _python_column(list(value), str(name), schema)
            continue
        try:
            if isinstance(value, pa.Array | pa.ChunkedArray):
                layout = ak.from_arrow(value, highlevel=False)
            else:
                layout = ak.to_layout(value)
        except Exception as exc:
            raise DataError(f"{name}: cannot read the values as an array ({exc})") from exc
        contents[str(name)] = strip_options(layout)
    lengths = {n: c.length for n, c in contents.items()}
    if len(set(lengths.values())) > 1:
        raise DataError("the arrays of the events differ in length: "
                        + ", ".join(f"{n} {k}" for n, k in lengths.items()))
    length = next(iter(lengths.values()), 0)
    return ak.Array(ak.contents.RecordArray(list(contents.values()), list(contents), length=length))


def _from_dicts(events: list[Mapping[str, Any]], schema: Schema | None) -> ak.Array:
    try:
        # the same array as ak.Array(events): the dicts and awkward forms are checked alike
        return ak.from_iter(events)
    except Exception:  # noqa: BLE001, S110 - e.g. integers beyond int64: read column by column below
        pass
    keys: dict[str, None] = {}
    for e in events:
        keys.update(dict.fromkeys(e))
    contents = [_python_column([e.get(k) for e in events], str(k), schema) for k in keys]
    return ak.Array(ak.contents.RecordArray(contents, [str(k) for k in keys], length=len(events)))


def _python_column(values: list[Any], name: str, schema: Schema | None) -> ak.contents.Content:
    """One collection or tag given as Python values, one per event."""
    try:
        return ak.from_iter(values, highlevel=False)
    except Exception:  # noqa: BLE001, S110 - integers beyond int64 somewhere below
        pass
    if schema is not None and name not in schema.collections and name not in schema.tags:
        raise _unknown_name(name, schema)  # as to_tables would say, before any value is looked at
    if schema is None or name not in schema.collections:
        return _python_leaf(values, f"tag {name}", schema.tags.get(name) if schema else None)
    counts = np.zeros(len(values), dtype=np.int64)
    objects: list[Any] = []
    for i, v in enumerate(values):
        if not isinstance(v, list | tuple) or not all(isinstance(o, Mapping) for o in v):
            raise DataError(f"collection {name}: expected a list of objects per event, got {type(v).__name__}")
        counts[i] = len(v)
        objects.extend(v)
    keys: dict[str, None] = {}
    for o in objects:
        keys.update(dict.fromkeys(o))
    tdef = schema.collection_type(name)
    fields = [_python_leaf([o.get(k) for o in objects], f"{name}.{k}", tdef.fields.get(k)) for k in keys]
    record = ak.contents.RecordArray(fields, [str(k) for k in keys], length=len(objects))
    return ak.contents.ListOffsetArray(ak.index.Index64(_offsets64(counts)), record)


def _python_leaf(values: list[Any], where: str, fdef: FieldDef | None) -> ak.contents.Content:
    """Values of one field or tag that awkward cannot read as they are: integers beyond int64."""
    try:
        return ak.from_iter(values, highlevel=False)
    except Exception:  # noqa: BLE001, S110 - the values are checked one by one below
        pass
    expected = fdef.type_string if fdef else "numbers"
    scalars = list(_scalars(values))
    kinds = {"bool" if isinstance(v, bool | np.bool_) else "int64" if isinstance(v, int | np.integer)
             else "float64" if isinstance(v, float | np.floating) else type(v).__name__ for v in scalars}
    if "bool" in kinds and len(kinds) > 1:
        raise DataError(f"{where}: values of mixed types ({', '.join(sorted(kinds))}); expected {expected}")
    if not kinds <= {"int64", "float64"}:
        raise DataError(f"{where}: expected {expected}, got {', '.join(sorted(kinds - {'int64', 'float64'}))}")
    ints = [int(v) for v in scalars if not isinstance(v, float | np.floating)]
    if "float64" in kinds or (fdef is not None and fdef.dtype.startswith("float")):
        dtype: type = np.float64  # a float field reads every number as a float64 first (fieldvalues.cast_field)
    elif min(ints) >= 0 and max(ints) <= np.iinfo(np.uint64).max:
        dtype = np.uint64
    else:
        raise DataError(range_message(where, min(ints), max(ints), fdef.dtype if fdef else "64 bits"))
    try:
        arr: np.ndarray = np.array(values, dtype=dtype)
    except OverflowError as exc:
        raise DataError(range_message(where, min(ints), max(ints), fdef.dtype if fdef else "float64")) from exc
    except ValueError as exc:  # ragged lists
        raise DataError(f"{where}: expected {expected}, got lists of different lengths") from exc
    return ak.from_numpy(arr, regulararray=True, highlevel=False)


def _scalars(values: Any) -> Iterator[Any]:
    for v in values:
        if isinstance(v, list | tuple):
            yield from _scalars(v)
        else:
            yield v


def _offsets64(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


# ---------------------------------------------------------------- write side


def _in_range(idx: np.ndarray, bounds: np.ndarray, limit: np.ndarray, lowest: int) -> bool:
    """Whether every ``idx[bounds[i]:bounds[i + 1]]`` lies in ``[lowest, limit[i])``: one pass, no temporaries
    the size of ``idx``."""
    if idx.size == 0:
        return True
    if idx.min() < lowest:
        return False
    filled = bounds[1:] > bounds[:-1]
    # segments are contiguous and cover idx: each reduction runs from one filled segment's start to the next's
    top = np.maximum.reduceat(idx, bounds[:-1][filled])
    return bool((top < limit[filled]).all())


def _collection_column(
    collection: ak.Array | ak.contents.Content, schema: Schema, name: str, counts: Mapping[str, np.ndarray]
) -> pa.Array:
    """The column of collection ``name`` from its objects (an array or its layout: one list per event)."""
    tdef = schema.collection_type(name)
    if int(counts[name].sum()) == 0:  # no object at all: the type may be unknown (list of dicts)
        empty = pa.nulls(0, schema.arrow_type(name).value_type)
        return pa.ListArray.from_arrays(numpy_array(offsets_of(counts[name])), empty, type=schema.arrow_type(name))
    objs = Objects(collection)
    have = set(objs.fields())
    known = set(tdef.fields) | set(tdef.relations)
    unknown = sorted(have - known)
    if unknown:
        raise DataError(f"collection {name}: unknown field {unknown[0]!r} (type {tdef.name} has "
                        f"{', '.join(sorted(known))}){_did_you_mean(unknown[0], known)}")
    n_objects = len(objs)
    item_type = schema.arrow_type(name).value_type
    types = {f.name: f.type for f in item_type}
    arrays: list[pa.Array] = []
    for fname, fdef in tdef.fields.items():
        where = f"{name}.{fname}"
        if fname not in have:
            if fdef.default is None:
                raise DataError(f"collection {name}: field {fname!r} is missing and has no default")
            size = n_objects * int(np.prod(fdef.shape or (1,)))
            value: np.ndarray = np.full(size, fdef.default, dtype=fdef.dtype)
            arrays.append(fixed_width_array(value, types[fname]))
            continue
        if fdef.dtype == STRING:
            flat = None
        elif fdef.shape:
            flat = objs.fixed(fname, int(np.prod(fdef.shape)))
        else:
            flat = objs.values(fname)
        if flat is not None:
            arrays.append(fixed_width_array(cast_field(flat, fdef, where), types[fname]))
        else:
            arrays.append(field_array(objs.flat[fname], fdef, where, types[fname]))
        if fdef.precision is not None:
            arrays[-1] = round_array(arrays[-1], fdef.precision)
    for rname, rdef in tdef.relations.items():
        where = f"{name}.{rname}"
        if rname not in have:
            raise DataError(f"collection {name}: relation {rname!r} is missing")
        if rdef.target not in counts:
            raise DataError(f"{where}: relation target collection {rdef.target!r} is not in the events")
        limit = counts[rdef.target]
        column: pa.Array | None = None
        if rdef.many:
            lists = objs.lists(rname)
            if lists is not None and lists[1].dtype.kind in "iu":
                inner, idx = lists
                if inner[-1] <= np.iinfo(np.int32).max and _in_range(idx, inner[objs.offsets], limit, 0):
                    column = pa.ListArray.from_arrays(numpy_array(inner.astype(np.int32)),
                                                      numpy_array(idx.astype(np.int32, copy=False)), type=types[rname])
        else:
            one = objs.values(rname)
            if one is not None and one.dtype.kind in "iu" and _in_range(one, objs.offsets, limit, -1):
                column = numpy_array(one.astype(np.int32, copy=False))
        if column is None:  # another layout, or an index out of range: checked object by object
            event_of_object = np.repeat(np.arange(len(objs.coll)), counts[name])
            column = _relation_column(objs.flat[rname], rdef.many, rdef.target, limit[event_of_object], where,
                                      types[rname])
        arrays.append(column)
    struct = pa.StructArray.from_arrays(arrays, fields=list(item_type))
    return pa.ListArray.from_arrays(numpy_array(offsets_of(counts[name])), struct, type=schema.arrow_type(name))


def _relation_column(values: ak.Array, many: bool, target: str, limit: np.ndarray, where: str,
                     arrow_type: pa.DataType) -> pa.Array:
    """A relation's indices, checked against ``limit`` (objects of ``target`` in each object's event)."""
    if many:
        inner = np.asarray(ak.num(values, axis=1), dtype=np.int64)
        idx = flat_numpy(ak.flatten(values, axis=1), where, "integer indices")
        if idx.size == 0:
            idx = idx.astype(np.int32)  # an empty list has no type to speak of
        if idx.dtype.kind not in "iu":
            raise DataError(f"{where}: relation indices must be integers, got {idx.dtype}")
        lim = np.repeat(limit, inner)
        bad = (idx < 0) | (idx >= lim)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"{where}: index {int(idx[i])} out of range (the event has {int(lim[i])} {target})")
        return pa.ListArray.from_arrays(numpy_array(offsets_of(inner)), numpy_array(idx.astype(np.int32)),
                                        type=arrow_type)
    idx = flat_numpy(values, where, "integer indices")
    if idx.dtype.kind not in "iu":
        raise DataError(f"{where}: relation indices must be integers, got {idx.dtype}")
    bad = (idx < -1) | (idx >= limit)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(
            f"{where}: index {int(idx[i])} out of range (the event has {int(limit[i])} {target}; -1 means none)"
        )
    return numpy_array(idx.astype(np.int32))


def _unknown_name(name: str, schema: Schema) -> DataError:
    known = {*schema.collections, *schema.tags}
    return DataError(f"unknown collection or tag {name!r} in the events (the schema has "
                     f"{', '.join(sorted(known))}){_did_you_mean(name, known)}")


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def containers_in(events: ak.Array, schema: Schema) -> list[str]:
    """The containers that ``events`` carries data for."""
    fields = set(ak.fields(events))
    unknown = sorted(fields - set(schema.collections) - set(schema.tags))
    if unknown:
        raise _unknown_name(unknown[0], schema)
    out = []
    for container, collections in schema.containers.items():
        if container == TAG_CONTAINER:
            if fields & set(schema.tags):
                out.append(container)
        elif fields & set(collections):
            out.append(container)
    return out


def to_tables(
    events: ak.Array,
    schema: Schema,
    containers: Iterable[str],
    target_counts: Mapping[str, np.ndarray] | None = None,
) -> dict[str, pa.Table]:
    """Convert events to one Arrow table per container, validating against the schema.

    ``target_counts`` gives objects per event of relation targets that are
    not in ``events`` (already stored), so that indices can be checked.
    """
    if events.ndim != 1 or not ak.fields(events):
        raise DataError(f"events must be an array of records, got {events.type}")
    layout = events.layout
    top = layout if isinstance(layout, ak.contents.RecordArray) else None
    present = set(top.fields if top is not None else ak.fields(events))
    counts: dict[str, np.ndarray] = dict(target_counts or {})
    for name in schema.collections:
        if name in present:
            content = top.content(name) if top is not None else events[name].layout
            if content.is_option:
                raise DataError(f"collection {name} is missing in some events (None or an absent key)")
            if isinstance(content, ak.contents.ListOffsetArray):
                counts[name] = np.diff(np.asarray(content.offsets).astype(np.int64, copy=False))
                continue
            try:
                counts[name] = np.asarray(ak.num(events[name], axis=1), dtype=np.int64)
            except Exception as exc:
                raise DataError(f"collection {name}: expected a list of objects per event, got "
                                f"{events[name].type}") from exc
    out: dict[str, pa.Table] = {}
    for container in containers:
        arrow_schema = schema.arrow_schema(container)
        columns: list[pa.Array] = []
        for fld in arrow_schema:
            if container == TAG_CONTAINER:
                fdef = schema.tags[fld.name]
                if fld.name not in present:
                    if fdef.default is None:
                        raise DataError(f"tag {fld.name!r} is missing and has no default")
                    columns.append(numpy_array(np.full(len(events), fdef.default, dtype=fdef.dtype),
                                               fld.type))
                else:
                    plain = top is not None and not fdef.shape and fdef.dtype != STRING
                    flat = leaf_values(top.content(fld.name)) if plain and top is not None else None
                    if flat is not None:
                        columns.append(numpy_array(cast_field(flat, fdef, f"tag {fld.name}"), fld.type))
                    else:
                        columns.append(field_array(events[fld.name], fdef, f"tag {fld.name}", fld.type))
                    if fdef.precision is not None:
                        columns[-1] = round_array(columns[-1], fdef.precision)
            else:
                if fld.name not in present:
                    raise DataError(f"container {container}: collection {fld.name!r} is missing")
                # the layout itself where the events are a plain record array: no high-level indexing
                collection = top.content(fld.name) if top is not None else events[fld.name]
                columns.append(_collection_column(collection, schema, fld.name, counts))
        out[container] = pa.Table.from_arrays(columns, schema=arrow_schema)
    return out


# ----------------------------------------------------------------- read side


def _content(array: pa.Array) -> ak.contents.Content:
    t = array.type
    if pa.types.is_fixed_size_list(t):
        size = t.list_size
        inner = _content(array.flatten())
        return ak.contents.RegularArray(inner, size, zeros_length=len(array))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        offsets = numpyview.offsets(array)
        start, stop = int(offsets[0]), int(offsets[-1])
        inner = _content(array.values.slice(start, stop - start))
        if start:
            offsets = offsets - start
        index = ak.index.Index64(offsets) if offsets.dtype == np.int64 else ak.index.Index32(offsets)
        return ak.contents.ListOffsetArray(index, inner)
    if pa.types.is_struct(t):
        names = [f.name for f in t]
        children = array.flatten()
        return ak.contents.RecordArray([_content(c) for c in children], names, length=len(array))
    if pa.types.is_boolean(t):
        return ak.contents.NumpyArray(numpyview.values(array))
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if array.null_count:
            raise DataError(f"unexpected missing values in a {t} column")
        return strip_options(ak.from_arrow(array, highlevel=False))
    if array.null_count:
        raise DataError(f"unexpected missing values in a {t} column")
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return ak.contents.NumpyArray(numpyview.values(array))
    return ak.contents.NumpyArray(array.to_numpy(zero_copy_only=True))


def column_content(column: pa.ChunkedArray | pa.Array, type_name: str | None = None) -> ak.contents.Content:
    """One container column as an awkward layout; records named after their type."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    content = _content(column)
    if type_name is not None and isinstance(content, ak.contents.ListOffsetArray):
        rec = content.content
        if isinstance(rec, ak.contents.RecordArray):
            rec = ak.contents.RecordArray(
                rec.contents, rec.fields, length=rec.length, parameters={"__record__": type_name}
            )
            content = ak.contents.ListOffsetArray(content.offsets, rec)
    return content
