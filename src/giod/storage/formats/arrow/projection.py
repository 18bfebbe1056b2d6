"""One projection rule for every read of an Arrow container: whole collections or some of their members.

Columns are named as Parquet paths, so that both formats answer the same
request the same way: ``coll`` keeps a collection whole,
``coll.list.element.field`` one member of its structs.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from giod.errors import NotFound

__all__ = ["project", "top_columns"]


def top_columns(columns: Sequence[str] | None) -> list[str] | None:
    """The top-level columns of Parquet-style paths (None: all)."""
    return None if columns is None else list(dict.fromkeys(c.partition(".")[0] for c in columns))


def project(table: pa.Table, columns: Sequence[str] | None) -> pa.Table:
    """Keep ``columns`` as pyarrow's Parquet reader does: ``coll`` whole, ``coll.list.element.f`` one member."""
    if columns is None:
        return table
    whole: list[str] = []
    members: dict[str, list[str]] = {}
    for c in columns:
        parts = c.split(".")
        if len(parts) == 1:
            whole.append(c)
        else:
            members.setdefault(parts[0], []).append(parts[-1])
    present = table.column_names
    at = {n: i for i, n in enumerate(present)}  # lookups by name in lists made wide reads quadratic
    kept_whole = set(whole)
    names, arrays, fields = [], [], []
    for name in dict.fromkeys([c.split(".")[0] for c in columns]):
        i = at.get(name)
        if i is None:
            raise NotFound(f"no column {name!r} in the container (it has {', '.join(present)})")
        col = table.column(i)
        if name not in kept_whole:
            col = _members(col, members[name])
        names.append(name)
        arrays.append(col)
        fields.append(pa.field(name, col.type, nullable=table.schema.field(i).nullable))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=table.schema.metadata))


def _members(col: pa.ChunkedArray, members: list[str]) -> pa.ChunkedArray:
    chunks = []
    item = col.type.value_field
    for chunk in col.chunks:
        struct = chunk.values
        kept = [struct.field(m) for m in members]
        sub = pa.StructArray.from_arrays(kept, fields=[item.type.field(m) for m in members])
        chunks.append(pa.ListArray.from_arrays(chunk.offsets, sub, type=pa.list_(pa.field(item.name, sub.type,
                                                                                           nullable=item.nullable))))
    typ = pa.list_(pa.field(item.name, pa.struct([item.type.field(m) for m in members]), nullable=item.nullable))
    return pa.chunked_array(chunks, type=typ)
