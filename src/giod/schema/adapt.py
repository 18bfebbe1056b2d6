"""Read data written with an old model as if it were written with the new one.

Work is per column and per chunk, never per event or object: a collection
column is taken apart into its list offsets and struct children, children
are renamed, cast (widening only) or replaced by default arrays, and the
column is rebuilt from the same offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from giod.errors import DataError, NotFound
from giod.schema.arrow import member_arrow_field
from giod.schema.definitions import TAG_CONTAINER, FieldDef, RelationDef, TypeDef, dtype_arrow_type
from giod.schema.evolution import check, source_field

if TYPE_CHECKING:
    from giod.schema.view import ModelView

__all__ = ["adapt_table", "default_array", "source_name"]


def adapt_table(
    new: ModelView,
    table: pa.Table,
    container: str,
    old: ModelView,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Convert ``table`` (a container of ``old``) to ``new.arrow_schema(container)``.

    Without ``columns``, a table holding every column ``old`` puts in the
    container is a full read: the result has every column of the new layout,
    new collections empty and new tags at their defaults. A table holding only
    some columns is a projection: the result has only the columns they
    become. With ``columns`` (names in ``new``), the result has exactly those,
    new ones filled with defaults. A collection column read with only some of
    its members (a Parquet sub-field projection) keeps only what they become.
    """
    target = new.arrow_schema(container)
    if old != new:
        check(old, new)
    present = set(table.column_names)
    if columns is None:
        old_columns = old.tags if container == TAG_CONTAINER else old.containers.get(container, ())
        full = set(old_columns) <= present
        wanted = [f.name for f in target]
    else:
        full = True
        wanted = list(columns)
        for name in wanted:
            if target.get_field_index(name) < 0:
                raise NotFound(
                    f"container '{container}' of model '{new.name}' has no column '{name}' "
                    f"(columns: {', '.join(target.names)})"
                )
    fields: list[pa.Field] = []
    arrays: list[pa.ChunkedArray] = []
    for name in wanted:
        field = target.field(name)
        source = source_name(new, old, name)
        if source is not None and source in present:
            try:
                column = _adapt_column(new, old, container, field, source, table.column(source))
            except (pa.ArrowException, ValueError, DataError) as exc:
                raise DataError(f"column '{source}' of container '{container}': {exc}") from exc
        elif source is None and full:
            column = _new_column(new, container, field, table.num_rows)
        elif columns is None:
            continue
        else:
            raise DataError(f"column '{name}' is read from '{source}', which the table lacks")
        fields.append(field.with_type(column.type))  # the target's field: its doc (metadata) too
        arrays.append(column)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=target.metadata))


def source_name(new: ModelView, old: ModelView, name: str) -> str | None:
    """Where ``name`` of ``new`` is stored in data written with ``old``; None when it is new.

    ``name`` is a tag, a collection, or ``collection.member``; the answer has
    the same form with old names (a renamed tag or field gives its old name).
    """
    head, _, member = name.partition(".")
    if not member:
        if head in new.tags:
            src = source_field(new.tags[head], old.tags)
            return src.name if isinstance(src, FieldDef) else None
        return head if head in old.collections and head in new.collections else None
    if head not in old.collections or head not in new.collections:
        return None
    old_type, new_type = old.collection_type(head), new.collection_type(head)
    if member in new_type.relations:
        return name if member in old_type.relations else None
    if member not in new_type.fields:
        return None
    src = source_field(new_type.fields[member], old_type.fields)
    return f"{head}.{src.name}" if isinstance(src, FieldDef) else None


def _adapt_column(
    new: ModelView, old: ModelView, container: str, field: pa.Field, source: str, column: pa.ChunkedArray
) -> pa.ChunkedArray:
    if container == TAG_CONTAINER:
        if _same(column.type, field.type):
            return column
        return pa.chunked_array([_cast(c, field.type) for c in column.chunks], type=field.type)
    old_type, new_type = old.collection_type(source), new.collection_type(field.name)
    if _undocumented(old_type) == _undocumented(new_type) and column.type == field.type:
        # Equal but for list item names (Parquet calls them "element") or docs (field metadata):
        # a cheap cast relabels them.
        return column if _same(column.type, field.type) else column.cast(field.type)
    if not pa.types.is_list(column.type) or not pa.types.is_struct(column.type.value_type):
        raise DataError(f"column '{source}' has type {column.type}, expected a list of structs")
    read = {column.type.value_type.field(i).name for i in range(column.type.value_type.num_fields)}
    # A struct read with only some members (sub-field projection) keeps only what they become.
    full = read >= {*old_type.fields, *old_type.relations}
    members = [m for m in _members(new_type) if full or _member_source(m, old_type) in read]
    target = pa.list_(
        pa.field("item", pa.struct([member_arrow_field(m) for m in members]), nullable=False)
    )
    chunks = [_adapt_objects(c, old_type, members, target) for c in column.chunks]
    return pa.chunked_array(chunks, type=target)


def _undocumented(type_def: TypeDef) -> TypeDef:
    """``type_def`` without its docs: a doc changes no value, so old data needs no conversion for it."""
    return TypeDef(type_def.name, {n: replace(f, doc="") for n, f in type_def.fields.items()},
                   {n: replace(r, doc="") for n, r in type_def.relations.items()})


def _members(type_def: TypeDef) -> list[FieldDef | RelationDef]:
    return [*type_def.fields.values(), *type_def.relations.values()]


def _member_source(member: FieldDef | RelationDef, old: TypeDef) -> str | None:
    if isinstance(member, RelationDef):
        return member.name if member.name in old.relations else None
    src = source_field(member, old.fields)
    return src.name if isinstance(src, FieldDef) else None


def _adapt_objects(
    chunk: pa.ListArray, old: TypeDef, members: list[FieldDef | RelationDef], target: pa.ListType
) -> pa.Array:
    offsets = chunk.offsets
    if len(offsets) and offsets[0].as_py() != 0:
        offsets = pc.subtract(offsets, offsets[0])
    objects = chunk.flatten()
    names = [objects.type.field(i).name for i in range(objects.type.num_fields)]
    children = dict(zip(names, objects.flatten(), strict=True))
    n = len(objects)
    struct_type = target.value_type
    arrays: list[pa.Array] = []
    for member in members:
        member_type = struct_type.field(member.name).type
        source = _member_source(member, old)
        if source is not None:
            arrays.append(_cast(_child(children, source), member_type))
        elif isinstance(member, RelationDef):
            arrays.append(_missing_relation(member, n))
        else:
            arrays.append(default_array(member, n))
    objects = pa.StructArray.from_arrays(arrays, fields=list(struct_type))
    return pa.ListArray.from_arrays(offsets, objects, type=target)


def _child(children: dict[str, pa.Array], name: str) -> pa.Array:
    try:
        return children[name]
    except KeyError:
        raise DataError(
            f"the objects have no member '{name}', which the model they were written with declares"
        ) from None


def _cast(array: pa.Array, target: pa.DataType) -> pa.Array:
    """Cast recursively, rebuilding lists so that item fields are named and non-nullable."""
    if _same(array.type, target):
        return array
    if pa.types.is_fixed_size_list(target):
        if not pa.types.is_fixed_size_list(array.type) or array.type.list_size != target.list_size:
            raise DataError(f"cannot read {array.type} as {target}")
        return pa.FixedSizeListArray.from_arrays(
            _cast(array.flatten(), target.value_type), type=target
        )
    if pa.types.is_list(target):
        if not pa.types.is_list(array.type):
            raise DataError(f"cannot read {array.type} as {target}")
        offsets = array.offsets
        if len(offsets) and offsets[0].as_py() != 0:
            offsets = pc.subtract(offsets, offsets[0])
        values = _cast(array.flatten(), target.value_type)
        return pa.ListArray.from_arrays(offsets, values, type=target)
    return pc.cast(array, target, safe=True)


def _same(a: pa.DataType, b: pa.DataType) -> bool:
    """Type equality that also compares nested field names, which ``==`` ignores."""
    return bool(a.equals(b, check_metadata=True))


def default_array(field: FieldDef, n: int) -> pa.Array:
    """``n`` copies of ``field.default`` as an Arrow array of the field's type."""
    value = np.asarray(field.default, dtype=np.dtype(field.dtype))
    block = np.ascontiguousarray(np.broadcast_to(value, (n, *field.shape)))
    flat = pa.array(block.reshape(-1), type=dtype_arrow_type(field.dtype))
    return _wrap_fixed(flat, field.arrow_type)


def _wrap_fixed(flat: pa.Array, target: pa.DataType) -> pa.Array:
    if not pa.types.is_fixed_size_list(target):
        return flat
    return pa.FixedSizeListArray.from_arrays(_wrap_fixed(flat, target.value_type), type=target)


def _missing_relation(rel: RelationDef, n: int) -> pa.Array:
    if rel.many:
        return _empty_lists(
            n, pa.array([], type=pa.int32()), pa.list_(pa.field("item", pa.int32(), nullable=False))
        )
    return pa.array(np.full(n, -1, dtype=np.int32), type=pa.int32())


def _empty_lists(n: int, values: pa.Array, list_type: pa.DataType) -> pa.Array:
    offsets = pa.array(np.zeros(n + 1, dtype=np.int32), type=pa.int32())
    return pa.ListArray.from_arrays(offsets, values, type=list_type)


def _new_column(new: ModelView, container: str, field: pa.Field, n_rows: int) -> pa.ChunkedArray:
    if container == TAG_CONTAINER:
        return pa.chunked_array([default_array(new.tags[field.name], n_rows)], type=field.type)
    objects = pa.array([], type=field.type.value_type)
    return pa.chunked_array([_empty_lists(n_rows, objects, field.type)], type=field.type)
