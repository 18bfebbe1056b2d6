"""Events in memory (awkward) to container columns (Arrow) and back.

Both directions work on whole buffers: offsets and flat field arrays move
between awkward layouts and Arrow arrays without a Python loop per event or
object, and without copies where the memory layouts agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa

from giod.errors import DataError
from giod.fieldvalues import (
    _cast,
    _field_array,
    _fixed,
    _flat_numpy,
    _leaf,
    _Objects,
    _offsets,
    field_width,  # noqa: F401 - re-exported
)
from giod.schema import TAG_CONTAINER, Schema


def as_events(events: Any, schema: Schema | None = None) -> ak.Array:
    """Accept an awkward Array, a list of dicts or a dict of arrays.

    With a schema, a list of dicts is typed by the schema through Arrow, so
    that e.g. uint64 values above 2**63 and collections that are empty in
    every event keep their declared types.
    """
    if isinstance(events, ak.Array):
        return events
    if schema is not None and isinstance(events, list | tuple) and events and \
            all(isinstance(e, Mapping) for e in events):
        return _typed_from_dicts(list(events), schema)
    try:
        if isinstance(events, Mapping):
            return ak.Array(dict(events))
        return ak.Array(list(events))
    except Exception as exc:  # awkward raises several types for malformed input
        raise DataError(f"cannot read events as an array of records: {exc}") from exc


def _typed_from_dicts(events: list[Mapping[str, Any]], schema: Schema) -> ak.Array:
    keys: dict[str, None] = {}
    for e in events:
        keys.update(dict.fromkeys(e))
    fields = []
    for k in keys:
        if k in schema.collections:
            fields.append(pa.field(k, schema.arrow_type(k)))
        elif k in schema.tags:
            fields.append(pa.field(k, schema.arrow_schema(TAG_CONTAINER).field(k).type))
        else:
            known = ", ".join(sorted([*schema.collections, *schema.tags]))
            raise DataError(f"unknown collection or tag {k!r} in the events (the schema has {known})")
    try:
        table = pa.Table.from_pylist(events, schema=pa.schema(fields))
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise DataError(f"events do not match the schema: {exc}") from exc
    contents = []
    for name in table.column_names:
        col = table.column(name)
        if col.null_count:
            raise DataError(f"{name} is missing in some events")
        contents.append(column_content(col))
    return ak.Array(ak.contents.RecordArray(contents, table.column_names, length=table.num_rows))


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
    events: ak.Array, schema: Schema, name: str, counts: Mapping[str, np.ndarray]
) -> pa.Array:
    tdef = schema.collection_type(name)
    if int(counts[name].sum()) == 0:  # no object at all: the type may be unknown (list of dicts)
        empty = pa.array([], type=schema.arrow_type(name).value_type)
        return pa.ListArray.from_arrays(pa.array(_offsets(counts[name])), empty, type=schema.arrow_type(name))
    objs = _Objects(events[name])
    have = set(objs.fields())
    known = set(tdef.fields) | set(tdef.relations)
    unknown = sorted(have - known)
    if unknown:
        raise DataError(
            f"collection {name}: unknown field {unknown[0]!r} "
            f"(type {tdef.name} has {', '.join(sorted(known))})"
        )
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
            arrays.append(_fixed(value, types[fname]))
            continue
        flat = None if fdef.shape else objs.values(fname)
        if flat is not None:
            arrays.append(pa.array(_cast(flat, fdef, where), type=types[fname]))
        else:
            arrays.append(_field_array(objs.flat[fname], fdef, where, types[fname]))
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
                    column = pa.ListArray.from_arrays(pa.array(inner.astype(np.int32)),
                                                      pa.array(idx.astype(np.int32, copy=False)), type=types[rname])
        else:
            one = objs.values(rname)
            if one is not None and one.dtype.kind in "iu" and _in_range(one, objs.offsets, limit, -1):
                column = pa.array(one.astype(np.int32, copy=False))
        if column is None:  # another layout, or an index out of range: checked object by object
            event_of_object = np.repeat(np.arange(len(objs.coll)), counts[name])
            column = _relation_column(objs.flat[rname], rdef.many, rdef.target, limit[event_of_object], where,
                                      types[rname])
        arrays.append(column)
    struct = pa.StructArray.from_arrays(arrays, fields=list(item_type))
    return pa.ListArray.from_arrays(pa.array(_offsets(counts[name])), struct, type=schema.arrow_type(name))


def _relation_column(values: ak.Array, many: bool, target: str, limit: np.ndarray, where: str,
                     arrow_type: pa.DataType) -> pa.Array:
    """A relation's indices, checked against ``limit`` (objects of ``target`` in each object's event)."""
    if many:
        inner = np.asarray(ak.num(values, axis=1), dtype=np.int64)
        idx = _flat_numpy(ak.flatten(values, axis=1), where)
        if idx.size == 0:
            idx = idx.astype(np.int32)  # an empty list has no type to speak of
        if idx.dtype.kind not in "iu":
            raise DataError(f"{where}: relation indices must be integers, got {idx.dtype}")
        lim = np.repeat(limit, inner)
        bad = (idx < 0) | (idx >= lim)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"{where}: index {int(idx[i])} out of range (the event has {int(lim[i])} {target})")
        return pa.ListArray.from_arrays(pa.array(_offsets(inner)), pa.array(idx.astype(np.int32)), type=arrow_type)
    idx = _flat_numpy(values, where)
    if idx.dtype.kind not in "iu":
        raise DataError(f"{where}: relation indices must be integers, got {idx.dtype}")
    bad = (idx < -1) | (idx >= limit)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(
            f"{where}: index {int(idx[i])} out of range (the event has {int(limit[i])} {target}; -1 means none)"
        )
    return pa.array(idx.astype(np.int32))


def containers_in(events: ak.Array, schema: Schema) -> list[str]:
    """The containers that ``events`` carries data for."""
    fields = set(ak.fields(events))
    unknown = sorted(fields - set(schema.collections) - set(schema.tags))
    if unknown:
        raise DataError(
            f"unknown collection or tag {unknown[0]!r} in the events "
            f"(the schema has {', '.join(sorted([*schema.collections, *schema.tags]))})"
        )
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
    present = set(ak.fields(events))
    layout = events.layout
    top = layout if isinstance(layout, ak.contents.RecordArray) else None
    counts: dict[str, np.ndarray] = dict(target_counts or {})
    for name in schema.collections:
        if name in present:
            content = top.content(name) if top is not None else None
            if isinstance(content, ak.contents.ListOffsetArray):
                counts[name] = np.diff(np.asarray(content.offsets).astype(np.int64, copy=False))
                continue
            try:
                counts[name] = np.asarray(ak.num(events[name], axis=1), dtype=np.int64)
            except Exception as exc:  # noqa: BLE001
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
                    columns.append(pa.array(np.full(len(events), fdef.default, dtype=fdef.dtype),
                                            type=fld.type))
                else:
                    flat = _leaf(top.content(fld.name)) if top is not None and not fdef.shape else None
                    if flat is not None:
                        columns.append(pa.array(_cast(flat, fdef, f"tag {fld.name}"), type=fld.type))
                    else:
                        columns.append(_field_array(events[fld.name], fdef, f"tag {fld.name}", fld.type))
            else:
                if fld.name not in present:
                    raise DataError(f"container {container}: collection {fld.name!r} is missing")
                columns.append(_collection_column(events, schema, fld.name, counts))
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
        offsets = array.offsets.to_numpy()
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
        return ak.contents.NumpyArray(array.to_numpy(zero_copy_only=False))
    if array.null_count:
        raise DataError(f"unexpected missing values in a {t} column")
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
