"""Parquet footers for page-level reads: the layout of a file, decoded once.

The footer's Thrift structures are walked here (not through pyarrow) for what
:func:`giod.storage.formats.parquet.read_rows` needs: the leaf columns, the row groups, and where
each column chunk's OffsetIndex and pages lie.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from giod.errors import IntegrityError, StorageError
from giod.storage.formats.parquet import thrift
from giod.storage.formats.parquet.thrift import I64, LIST, STRUCT, List, Struct

MAGIC = b"PAR1"

# parquet.thrift field ids: FileMetaData, SchemaElement, RowGroup, ColumnChunk, ColumnMetaData
FMD_VERSION, FMD_SCHEMA, FMD_ROWS, FMD_ROW_GROUPS, FMD_KV, FMD_CREATED_BY, FMD_ORDERS = 1, 2, 3, 4, 5, 6, 7
_FMD_ENCRYPTION = 8
_SE_NAME, SE_CHILDREN = 4, 5
RG_COLUMNS, RG_BYTES, RG_ROWS = 1, 2, 3
_CC_FILE_PATH, CC_FILE_OFFSET, CC_META, _CC_OI_OFFSET, _CC_OI_LENGTH, _CC_CRYPTO = 1, 2, 3, 4, 5, 8
CMD_TYPE, CMD_ENCODINGS, CMD_PATH, CMD_CODEC, CMD_VALUES, CMD_USIZE, CMD_CSIZE = 1, 2, 3, 4, 5, 6, 7
CMD_DATA_OFFSET, CMD_DICT_OFFSET = 9, 11


def need(s: Struct, fid: int, kind: type | tuple[type, ...], what: str, default: Any = None) -> Any:
    v = s.value(fid, default) if isinstance(s, Struct) else None
    if not isinstance(v, kind):
        raise IntegrityError(f"corrupt Parquet metadata: {what} missing or malformed")
    return v


PYARROW_ERRORS = (pa.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError)  # on damaged files


# --- the footer --------------------------------------------------------------------

@dataclass
class Layout:
    """What page-level reads need from one footer; built once, shared by reads."""

    footer: Struct
    leaves: list[str]  # dotted paths, in column order
    chains: list[tuple[int, ...]]  # schema element positions from the top-level field down to each leaf
    prefixes: dict[str, list[int]]  # column name → leaves, pyarrow's rule
    rg_rows: np.ndarray
    rg_first: np.ndarray  # first row of each row group
    meta: list[list[Struct]]  # [row group][leaf] ColumnMetaData
    index: np.ndarray  # [row group, leaf, (OffsetIndex offset, its length, dictionary page offset,
    #                                        data page offset, compressed chunk size)]
    empty_file: bytes  # the file without row groups: pyarrow resolves column names and types on it
    memo: dict[Any, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def resolve(self, key: Any, make: Any) -> Any:
        """``make()``, computed once per key (two threads may both compute it; one result is kept)."""
        with self.lock:
            if key in self.memo:
                return self.memo[key]
        value = make()
        with self.lock:
            return self.memo.setdefault(key, value)

    def empty_read(self, columns: list[str] | None) -> pa.Table:
        try:
            return pq.ParquetFile(pa.BufferReader(self.empty_file)).read(columns=columns)
        except PYARROW_ERRORS as exc:
            raise IntegrityError(f"corrupt Parquet schema: {exc}") from exc


def parse_layout(footer_bytes: bytes) -> Layout:
    md, _ = thrift.decode_struct(footer_bytes)
    if _FMD_ENCRYPTION in md:
        raise StorageError("encrypted Parquet files are not supported by page-level reads")
    schema = need(md, FMD_SCHEMA, List, "schema").items
    leaves: list[str] = []
    chains: list[tuple[int, ...]] = []
    pos = 1

    def walk(n_children: int, prefix: str, chain: tuple[int, ...]) -> None:
        nonlocal pos
        if len(chain) > 64:
            raise IntegrityError("corrupt Parquet footer: schema nested too deeply")
        for _ in range(n_children):
            if pos >= len(schema):
                raise IntegrityError("corrupt Parquet footer: schema shorter than its num_children")
            el = schema[pos]
            name = need(el, _SE_NAME, bytes, "schema element name").decode("utf-8", "replace")
            here, path = (*chain, pos), f"{prefix}.{name}" if prefix else name
            pos += 1
            kids = el.value(SE_CHILDREN)
            if kids is None:
                leaves.append(path)
                chains.append(here)
            else:
                walk(kids, path, here)

    walk(need(schema[0], SE_CHILDREN, int, "schema root") if schema else 0, "", ())
    prefixes: dict[str, list[int]] = {}
    for i, path in enumerate(leaves):
        parts = path.split(".")  # as pyarrow's ParquetFile: every dotted prefix names its leaves
        for k in range(1, len(parts) + 1):
            prefixes.setdefault(".".join(parts[:k]), []).append(i)

    groups = need(md, FMD_ROW_GROUPS, List, "row groups").items
    rg_rows = np.array([need(rg, RG_ROWS, int, "row group num_rows") for rg in groups], dtype=np.int64)
    index = np.full((len(groups), len(leaves), 5), -1, dtype=np.int64)
    meta: list[list[Struct]] = []
    for g, rg in enumerate(groups):
        chunks = need(rg, RG_COLUMNS, List, "row group columns").items
        if len(chunks) != len(leaves):
            raise IntegrityError("corrupt Parquet footer: row group column count differs from the schema")
        row = []
        for leaf, cc in enumerate(chunks):
            m = need(cc, CC_META, Struct, "column metadata")
            row.append(m)
            if _CC_FILE_PATH in cc or _CC_CRYPTO in cc:
                continue  # no page index use: reported when the column is read
            index[g, leaf] = (need(cc, _CC_OI_OFFSET, int, "offset index offset", -1),
                              need(cc, _CC_OI_LENGTH, int, "offset index length", -1),
                              need(m, CMD_DICT_OFFSET, int, "dictionary page offset", -1),
                              need(m, CMD_DATA_OFFSET, int, "data page offset"),
                              need(m, CMD_CSIZE, int, "column chunk size", -1))
        meta.append(row)
    rg_first = np.zeros(len(groups), dtype=np.int64)
    np.cumsum(rg_rows[:-1], out=rg_first[1:])

    empty = Struct(md)
    empty.put(FMD_ROWS, I64, 0)
    empty.put(FMD_ROW_GROUPS, LIST, List(STRUCT, []))
    footer = thrift.encode_struct(empty)
    empty_file = b"".join((MAGIC, footer, len(footer).to_bytes(4, "little"), MAGIC))
    return Layout(md, leaves, chains, prefixes, rg_rows, rg_first, meta, index, empty_file)
