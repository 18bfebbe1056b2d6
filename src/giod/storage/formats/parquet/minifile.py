"""In-memory Parquet files: selected pages wrapped, byte for byte, with a footer written here."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from giod.errors import IntegrityError
from giod.storage.formats.parquet import thrift
from giod.storage.formats.parquet.footer import (
    CC_FILE_OFFSET,
    CC_META,
    CMD_CODEC,
    CMD_CSIZE,
    CMD_DATA_OFFSET,
    CMD_DICT_OFFSET,
    CMD_ENCODINGS,
    CMD_PATH,
    CMD_TYPE,
    CMD_USIZE,
    CMD_VALUES,
    FMD_CREATED_BY,
    FMD_KV,
    FMD_ORDERS,
    FMD_ROW_GROUPS,
    FMD_ROWS,
    FMD_SCHEMA,
    FMD_VERSION,
    MAGIC,
    PYARROW_ERRORS,
    RG_BYTES,
    RG_COLUMNS,
    RG_ROWS,
    SE_CHILDREN,
    Layout,
    need,
)
from giod.storage.formats.parquet.pageindex import LeafPages
from giod.storage.formats.parquet.thrift import BINARY, I32, I64, LIST, STRUCT, List, Struct


def _restricted_schema(layout: Layout, leaves: list[int]) -> list[Struct]:
    """The schema elements of these leaves and their ancestors, child counts fixed."""
    schema = layout.footer.value(FMD_SCHEMA).items
    children: dict[int, set[int]] = {0: set()}
    for leaf in leaves:
        chain = (0, *layout.chains[leaf])
        for parent, child in zip(chain, chain[1:], strict=False):
            children.setdefault(parent, set()).add(child)
            children.setdefault(child, set())
    out = []
    for p in sorted(children):
        el = Struct(schema[p])
        if SE_CHILDREN in el:
            el.put(SE_CHILDREN, I32, len(children[p]))
        out.append(el)
    return out


def _prune(t: pa.DataType, keep: set[int], leaf: int) -> tuple[pa.DataType | None, int]:
    """``t`` with only the leaves numbered in ``keep`` (numbering from ``leaf``), and the next leaf number."""
    if pa.types.is_struct(t):
        fields = []
        for f in t:
            sub, leaf = _prune(f.type, keep, leaf)
            if sub is not None:
                fields.append(f.with_type(sub))
        return (pa.struct(fields) if fields else None), leaf
    if pa.types.is_map(t):
        raise LookupError("maps are pruned by pyarrow")
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        sub, leaf = _prune(t.value_type, keep, leaf)
        if sub is None:
            return None, leaf
        value = t.value_field.with_type(sub)
        if pa.types.is_fixed_size_list(t):
            return pa.list_(value, t.list_size), leaf
        return (pa.large_list(value) if pa.types.is_large_list(t) else pa.list_(value)), leaf
    return (t if leaf in keep else None), leaf + 1


def _arrow_schema(layout: Layout, leaves: tuple[int, ...]) -> bytes:
    """The ARROW:schema value for a file of these leaves: the types pyarrow gives them in the whole file.

    Arrow leaves follow Parquet leaves one to one, in order, so pruning the
    whole file's Arrow schema gives it without asking pyarrow again.
    """
    full = layout.resolve("schema", lambda: layout.empty_read(None).schema.remove_metadata())
    keep, fields, leaf = set(leaves), [], 0
    try:
        for f in full:
            sub, leaf = _prune(f.type, keep, leaf)
            if sub is not None:
                fields.append(f.with_type(sub))
    except LookupError:
        leaf = -1
    schema = pa.schema(fields) if leaf == len(layout.leaves) else layout.empty_read(
        [layout.leaves[i] for i in leaves]).schema.remove_metadata()
    return base64.b64encode(schema.serialize().to_pybytes())


def mini_file(layout: Layout, group: list[LeafPages], buf: Any,
               dicts: dict[tuple[int, int], tuple[int, int, int]]) -> bytes:
    """``PAR1`` + the pages of a group of leaves + a footer that describes them."""
    lead = group[0]
    leaves = [lp.leaf for lp in group]
    rgs = np.unique(lead.rg)
    codecs = np.array([[layout.meta[g][leaf].value(CMD_CODEC) for leaf in leaves] for g in rgs.tolist()])
    # a dictionary page serves one column chunk, so its pages keep their row group; else one row group
    split = any((g, leaf) in dicts for g in rgs.tolist() for leaf in leaves) or bool(np.any(codecs != codecs[0]))
    cuts = [0, *(np.flatnonzero(np.diff(lead.rg)) + 1).tolist(), len(lead.rg)] if split else [0, len(lead.rg)]
    pieces: list[Any] = [MAGIC]
    pos = len(MAGIC)
    row_groups = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        g = int(lead.rg[a])
        columns = []
        for lp in group:
            chunk_start, dict_off, usize = pos, None, 0
            d = dicts.get((g, lp.leaf)) if split else None
            if d is not None:
                at, n, usize = d
                pieces.append(buf[at:at + n])
                dict_off, pos = pos, pos + n
            data_off = pos
            for at, n in zip(lp.at[a:b].tolist(), lp.size[a:b].tolist(), strict=True):
                pieces.append(buf[at:at + n])
            pos += int(lp.size[a:b].sum())
            original = layout.meta[g][lp.leaf]
            encodings: list[int] = []
            for gg in ([g] if split else rgs.tolist()):
                some = need(layout.meta[gg][lp.leaf], CMD_ENCODINGS, List, "column encodings").items
                encodings += [e for e in some if e not in encodings]
            meta = Struct()
            for fid in (CMD_TYPE, CMD_ENCODINGS, CMD_PATH, CMD_CODEC):  # kept as found, wire types too
                meta[fid] = original.get(fid, (I32, 0))
            meta.put(CMD_ENCODINGS, LIST, List(I32, encodings))
            meta.put(CMD_VALUES, I64, int(lp.values[a:b].sum()))
            meta.put(CMD_USIZE, I64, usize + int(lp.usize[a:b].sum()))
            meta.put(CMD_CSIZE, I64, pos - chunk_start)
            meta.put(CMD_DATA_OFFSET, I64, data_off)
            if dict_off is not None:
                meta.put(CMD_DICT_OFFSET, I64, dict_off)
            chunk = Struct()
            chunk.put(CC_FILE_OFFSET, I64, 0)
            chunk.put(CC_META, STRUCT, meta)
            columns.append(chunk)
        rg = Struct()
        rg.put(RG_COLUMNS, LIST, List(STRUCT, columns))
        rg.put(RG_BYTES, I64, pos)
        rg.put(RG_ROWS, I64, int((lead.end[a:b] - lead.first[a:b]).sum()))
        row_groups.append(rg)

    md = Struct()
    md[FMD_VERSION] = layout.footer.get(FMD_VERSION, (I32, 1))
    md.put(FMD_SCHEMA, LIST, List(STRUCT, _restricted_schema(layout, leaves)))
    md.put(FMD_ROWS, I64, int((lead.end - lead.first).sum()))
    md.put(FMD_ROW_GROUPS, LIST, List(STRUCT, row_groups))
    kv = Struct()
    kv.put(1, BINARY, b"ARROW:schema")
    kv.put(2, BINARY, layout.resolve(("arrow", *leaves), lambda: _arrow_schema(layout, tuple(leaves))))
    md.put(FMD_KV, LIST, List(STRUCT, [kv]))
    if FMD_CREATED_BY in layout.footer:  # Arrow chooses its work-arounds for old writers by it
        md[FMD_CREATED_BY] = layout.footer[FMD_CREATED_BY]
    orders = layout.footer.value(FMD_ORDERS)
    if isinstance(orders, List) and len(orders.items) == len(layout.leaves):
        md.put(FMD_ORDERS, LIST, List(orders.elem_type, [orders.items[i] for i in leaves]))
    footer = thrift.encode_struct(md)
    pieces += [footer, len(footer).to_bytes(4, "little"), MAGIC]
    return b"".join(pieces)


def decode(mini: bytes, rows: int, name: str) -> pa.Table:
    try:
        table = pq.ParquetFile(pa.BufferReader(mini), page_checksum_verification=True).read()
    except PYARROW_ERRORS as exc:
        raise IntegrityError(f"{name}: corrupt data pages: {exc}") from exc
    if table.num_rows != rows:
        raise IntegrityError(f"{name}: the pages read hold {table.num_rows} rows, the page index says {rows}")
    return table
