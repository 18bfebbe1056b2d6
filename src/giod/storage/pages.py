"""Page-level reads: fetch only the Parquet pages that hold the selected rows.

Arrow reads whole column chunks, so a sparse selection costs almost a full
scan. Here the footer and the OffsetIndex of each needed column say where
every data page lies and which rows it holds; only pages with a selected row
are read. The pages of the leaf columns whose selected pages cover the same
rows are wrapped, byte for byte, into a small in-memory Parquet file — ``PAR1``,
the pages, a footer written here — which Arrow decodes with its usual C++
code. The selected rows are taken from each such file, and nested columns
whose leaves came from different files are put back together.

This needs every page to start at a row boundary, which the format requires
whenever an OffsetIndex is written (pyarrow honours it for data pages v1 and
v2). Measurements and writer settings: ``docs/pages.md``.
"""

from __future__ import annotations

import base64
import io
import mmap
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from giod.errors import DataError, IntegrityError, NotFound, StorageError
from giod.storage import thrift
from giod.storage.thrift import BINARY, I32, I64, LIST, STRUCT, List, Struct

__all__ = ["read_rows"]

_MAGIC = b"PAR1"
_TAIL = 64 << 10  # the first read at the end of a file: most footers fit in it
_MERGE_GAP = 0  # byte ranges of a file object closer than this are read as one (adjacent ones always are)
_DENSE = 0.5  # when the pages to read hold this share of their row groups' bytes, pyarrow reads the row groups
_CACHED_FILES = 32

# parquet.thrift field ids: FileMetaData, SchemaElement, RowGroup, ColumnChunk, ColumnMetaData
_FMD_VERSION, _FMD_SCHEMA, _FMD_ROWS, _FMD_ROW_GROUPS, _FMD_KV, _FMD_CREATED_BY, _FMD_ORDERS = 1, 2, 3, 4, 5, 6, 7
_FMD_ENCRYPTION = 8
_SE_NAME, _SE_CHILDREN = 4, 5
_RG_COLUMNS, _RG_BYTES, _RG_ROWS = 1, 2, 3
_CC_FILE_PATH, _CC_FILE_OFFSET, _CC_META, _CC_OI_OFFSET, _CC_OI_LENGTH, _CC_CRYPTO = 1, 2, 3, 4, 5, 8
_CMD_TYPE, _CMD_ENCODINGS, _CMD_PATH, _CMD_CODEC, _CMD_VALUES, _CMD_USIZE, _CMD_CSIZE = 1, 2, 3, 4, 5, 6, 7
_CMD_DATA_OFFSET, _CMD_DICT_OFFSET = 9, 11


def _need(s: Struct, fid: int, kind: type | tuple[type, ...], what: str, default: Any = None) -> Any:
    v = s.value(fid, default) if isinstance(s, Struct) else None
    if not isinstance(v, kind):
        raise IntegrityError(f"corrupt Parquet metadata: {what} missing or malformed")
    return v


_PYARROW_ERRORS = (pa.ArrowException, OSError, ValueError, TypeError, KeyError, IndexError)  # on damaged files


# --- the footer --------------------------------------------------------------------

@dataclass
class _Layout:
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
        except _PYARROW_ERRORS as exc:
            raise IntegrityError(f"corrupt Parquet schema: {exc}") from exc


def _parse_layout(footer_bytes: bytes) -> _Layout:
    md, _ = thrift.decode_struct(footer_bytes)
    if _FMD_ENCRYPTION in md:
        raise StorageError("encrypted Parquet files are not supported by page-level reads")
    schema = _need(md, _FMD_SCHEMA, List, "schema").items
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
            name = _need(el, _SE_NAME, bytes, "schema element name").decode("utf-8", "replace")
            here, path = (*chain, pos), f"{prefix}.{name}" if prefix else name
            pos += 1
            kids = el.value(_SE_CHILDREN)
            if kids is None:
                leaves.append(path)
                chains.append(here)
            else:
                walk(kids, path, here)

    walk(_need(schema[0], _SE_CHILDREN, int, "schema root") if schema else 0, "", ())
    prefixes: dict[str, list[int]] = {}
    for i, path in enumerate(leaves):
        parts = path.split(".")  # as pyarrow's ParquetFile: every dotted prefix names its leaves
        for k in range(1, len(parts) + 1):
            prefixes.setdefault(".".join(parts[:k]), []).append(i)

    groups = _need(md, _FMD_ROW_GROUPS, List, "row groups").items
    rg_rows = np.array([_need(rg, _RG_ROWS, int, "row group num_rows") for rg in groups], dtype=np.int64)
    index = np.full((len(groups), len(leaves), 5), -1, dtype=np.int64)
    meta: list[list[Struct]] = []
    for g, rg in enumerate(groups):
        chunks = _need(rg, _RG_COLUMNS, List, "row group columns").items
        if len(chunks) != len(leaves):
            raise IntegrityError("corrupt Parquet footer: row group column count differs from the schema")
        row = []
        for leaf, cc in enumerate(chunks):
            m = _need(cc, _CC_META, Struct, "column metadata")
            row.append(m)
            if _CC_FILE_PATH in cc or _CC_CRYPTO in cc:
                continue  # no page index use: reported when the column is read
            index[g, leaf] = (_need(cc, _CC_OI_OFFSET, int, "offset index offset", -1),
                              _need(cc, _CC_OI_LENGTH, int, "offset index length", -1),
                              _need(m, _CMD_DICT_OFFSET, int, "dictionary page offset", -1),
                              _need(m, _CMD_DATA_OFFSET, int, "data page offset"),
                              _need(m, _CMD_CSIZE, int, "column chunk size", -1))
        meta.append(row)
    rg_first = np.zeros(len(groups), dtype=np.int64)
    np.cumsum(rg_rows[:-1], out=rg_first[1:])

    empty = Struct(md)
    empty.put(_FMD_ROWS, I64, 0)
    empty.put(_FMD_ROW_GROUPS, LIST, List(STRUCT, []))
    footer = thrift.encode_struct(empty)
    empty_file = b"".join((_MAGIC, footer, len(footer).to_bytes(4, "little"), _MAGIC))
    return _Layout(md, leaves, chains, prefixes, rg_rows, rg_first, meta, index, empty_file)


# --- bytes ---------------------------------------------------------------------------

class _Source:
    """Positioned reads from a path (memory-mapped) or a seekable binary file object."""

    def __init__(self, source: str | os.PathLike[str] | BinaryIO):
        self._path: str | None = None
        self._map: mmap.mmap | None = None
        self._tail, self._tail_at = b"", 0  # the footer read: page indexes usually sit just before the footer
        if isinstance(source, (str, os.PathLike)):
            self._path = os.fspath(source)
            try:
                self.file: Any = open(self._path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
            except OSError as exc:
                raise StorageError(f"cannot open {self._path}: {exc}") from exc
        else:
            self.file = source
        try:
            self.size: int = self.file.seek(0, os.SEEK_END)
        except (OSError, ValueError) as exc:
            self.close()
            raise StorageError(f"cannot read {self.name}: {exc}") from exc
        if self._path is not None and self.size:
            try:  # a mapped file costs no system call per page
                self._map = mmap.mmap(self.file.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):
                self._map = None

    @property
    def name(self) -> str:
        return self._path or str(getattr(self.file, "name", "<file object>"))

    @property
    def path(self) -> str | None:
        return self._path

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a view is still alive somewhere: the collector closes it
                pass
        if self._path is not None:
            self.file.close()

    def identity(self) -> tuple[Any, ...] | None:
        """A key that changes when the file does (None for file objects)."""
        if self._path is None:
            return None
        st = os.fstat(self.file.fileno())
        return os.path.abspath(self._path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns

    def read_into(self, offset: int, view: memoryview) -> None:
        if self._map is not None:
            view[:] = self._map[offset:offset + len(view)]
            return
        if offset >= self._tail_at and offset + len(view) <= self._tail_at + len(self._tail):
            view[:] = self._tail[offset - self._tail_at:offset - self._tail_at + len(view)]
            return
        try:
            self.file.seek(offset)
            got = 0
            readinto = getattr(self.file, "readinto", None)
            while got < len(view):
                if readinto is not None:
                    n = readinto(view[got:])
                else:
                    data = self.file.read(len(view) - got)
                    n = len(data)
                    view[got:got + n] = data
                if not n:
                    raise IntegrityError(f"{self.name} is truncated: {len(view)} bytes wanted at {offset}, "
                                         f"{got} found")
                got += n
        except OSError as exc:
            raise StorageError(f"cannot read {self.name}: {exc}") from exc

    def footer(self) -> bytes:
        if self.size < 12:
            raise IntegrityError(f"{self.name} is too short ({self.size} bytes) to be a Parquet file")
        tail = bytearray(min(self.size, _TAIL))
        self.read_into(self.size - len(tail), memoryview(tail))
        self._tail, self._tail_at = bytes(tail), self.size - len(tail)
        if tail[-4:] != _MAGIC:
            if tail[-4:] == b"PARE":
                raise StorageError(f"{self.name}: encrypted Parquet footers are not supported")
            raise IntegrityError(f"{self.name} does not end with the Parquet magic bytes (truncated?)")
        n = int.from_bytes(tail[-8:-4], "little")
        if n + 12 > self.size:
            raise IntegrityError(f"{self.name}: footer length {n} exceeds the file size {self.size}")
        if n + 8 <= len(tail):
            return bytes(tail[len(tail) - 8 - n:len(tail) - 8])
        footer = bytearray(n)
        self.read_into(self.size - 8 - n, memoryview(footer))
        return bytes(footer)

    def read_ranges(self, offset: np.ndarray, length: np.ndarray, *, compact: bool = True) -> tuple[Any, np.ndarray]:
        """Byte ranges, neighbours read together: a buffer and where each range is in it.

        A mapped file is its own buffer unless ``compact`` asks for a copy of just the ranges.
        """
        if len(offset) and (np.any(offset < 0) or np.any(length < 0) or np.any(offset + length > self.size)):
            raise IntegrityError(f"{self.name}: byte range outside the file (corrupt page index?)")
        if self._map is not None and not compact:
            return memoryview(self._map), offset
        if len(offset) == 0:
            return bytearray(), np.zeros(0, dtype=np.int64)
        order = np.argsort(offset, kind="stable")
        start, stop = offset[order], offset[order] + length[order]
        new = np.ones(len(start), dtype=bool)
        new[1:] = start[1:] > np.maximum.accumulate(stop)[:-1] + _MERGE_GAP
        heads = np.flatnonzero(new)
        run = np.cumsum(new) - 1
        run_start, run_stop = start[heads], np.maximum.reduceat(stop, heads)
        run_at = np.cumsum(run_stop - run_start) - (run_stop - run_start)
        buf = bytearray(int(run_at[-1] + run_stop[-1] - run_start[-1]))
        view = memoryview(buf)
        many = getattr(self.file, "read_many", None) if self._map is None else None
        if many is not None and len(heads) > 1:  # a remote file: every run in flight at once
            runs = list(zip(run_start.tolist(), run_stop.tolist(), strict=True))
            for (a, b), at, data in zip(runs, run_at.tolist(), many(runs), strict=True):
                view[at:at + b - a] = data
        else:
            for a, b, at in zip(run_start.tolist(), run_stop.tolist(), run_at.tolist(), strict=True):
                self.read_into(a, view[at:at + b - a])
        where = np.empty(len(offset), dtype=np.int64)
        where[order] = run_at[run] + start - run_start[run]
        return buf, where


class _Borrowed(io.RawIOBase):
    """A caller's file object lent to pyarrow, which closes the files it is given."""

    def __init__(self, f: Any):
        super().__init__()
        self._f = f

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return int(self._f.seek(offset, whence))

    def tell(self) -> int:
        return int(self._f.tell())

    def readinto(self, b: Any) -> int:
        if hasattr(self._f, "readinto"):
            return int(self._f.readinto(b))
        data = self._f.read(len(b))
        b[:len(data)] = data
        return len(data)


# A layout takes milliseconds to decode: cache it per file version and per pyarrow metadata object.
_by_file: OrderedDict[tuple[Any, ...], _Layout] = OrderedDict()
_by_metadata: weakref.WeakKeyDictionary[pq.FileMetaData, _Layout] = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


def _layout(src: _Source, metadata: pq.FileMetaData | None) -> _Layout:
    if metadata is not None:
        with _cache_lock:
            hit = _by_metadata.get(metadata)
        if hit is None:
            sink = pa.BufferOutputStream()
            metadata.write_metadata_file(sink)  # the footer's own Thrift bytes, framed as a file
            hit = _parse_layout(sink.getvalue().to_pybytes()[4:-8])
            with _cache_lock:
                _by_metadata[metadata] = hit
        return hit
    key = src.identity()
    if key is not None:
        with _cache_lock:
            hit = _by_file.get(key)
            if hit is not None:
                _by_file.move_to_end(key)
                return hit
    layout = _parse_layout(src.footer())
    if key is not None:
        with _cache_lock:
            _by_file[key] = layout
            while len(_by_file) > _CACHED_FILES:
                _by_file.popitem(last=False)
    return layout


# --- which pages ------------------------------------------------------------------------

@dataclass
class _LeafPages:
    """The selected data pages of one leaf column, over the row groups read."""

    leaf: int
    offset: np.ndarray  # file offset of each page, header included
    size: np.ndarray
    first: np.ndarray  # first row (counted over the file) of each page
    end: np.ndarray  # one past its last row
    rg: np.ndarray  # its row group
    at: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # where it is in the read buffer
    values: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # num_values of each page
    usize: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # uncompressed size with header


def _page_locations(src: _Source, layout: _Layout, rgs: np.ndarray, leaves: list[int]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Pages per (leaf, row group), leaf-major, and an (offset, size, first_row_index) row per page.

    Decoded OffsetIndexes are kept with the layout: a file is immutable, and
    decoding them is a good part of a cold read.
    """
    pairs = [(int(g), leaf) for leaf in leaves for g in rgs.tolist()]
    with layout.lock:
        found: list[Any] = [layout.memo.get(("pages", *pair)) for pair in pairs]
    todo = [i for i, f in enumerate(found) if f is None]
    if todo:
        idx = layout.index[[pairs[i][0] for i in todo], [pairs[i][1] for i in todo]]
        missing = np.flatnonzero((idx[:, 0] < 0) | (idx[:, 1] <= 0))
        if len(missing):
            leaf = pairs[todo[int(missing[0])]][1]
            raise StorageError(f"{src.name}: column {layout.leaves[leaf]} has no page index (OffsetIndex)")
        counts, loc = _decode_offset_indexes(*src.read_ranges(idx[:, 0], idx[:, 1]), idx[:, 1])
        with layout.lock:
            for i, part in zip(todo, np.split(loc, np.cumsum(counts)[:-1]), strict=True):
                found[i] = layout.memo.setdefault(("pages", *pairs[i]), part)
    return np.array([len(f) for f in found], dtype=np.int64), np.concatenate(found)


def _decode_offset_indexes(buf: Any, at: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    raw = np.frombuffer(buf, dtype=np.uint8)
    # OffsetIndex = {1: list<PageLocation{1: i64 offset, 2: i32 compressed_page_size, 3: i64 first_row_index}>}
    if len(at) and np.all(length > 1) and np.all(raw[at] == 0x19):
        fast = thrift.decode_int_struct_lists(buf, at + 1, (I64, I32, I64))
        if fast is not None:
            return fast
    counts, rows = [], []
    for a, n in zip(at.tolist(), length.tolist(), strict=True):
        oi, _ = thrift.decode_struct(bytes(buf[a:a + n]))
        locations = _need(oi, 1, List, "page locations").items
        counts.append(len(locations))
        rows += [tuple(_need(loc, f, int, "page location", -1) for f in (1, 2, 3)) for loc in locations]
    return np.array(counts, dtype=np.int64), np.array(rows, dtype=np.int64).reshape(-1, 3)


def _select_pages(src: _Source, layout: _Layout, rgs: np.ndarray, leaves: list[int],
                  rows: np.ndarray) -> tuple[list[_LeafPages], np.ndarray]:
    """The pages holding the rows, per leaf; and the offset of the first data page of each [row group, leaf]."""
    counts, loc = _page_locations(src, layout, rgs, leaves)
    offset, size, first = loc[:, 0], loc[:, 1], loc[:, 2]
    pair = np.repeat(np.arange(len(counts)), counts)
    rg = rgs[pair % len(rgs)]
    start = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    n_rows = layout.rg_rows[rg]
    same = pair[1:] == pair[:-1]
    # check before trusting. pyarrow may write an empty page whose first row is the next page's: rows only
    # never decrease. searchsorted(side="right") below then skips the empty page.
    if (np.any(counts == 0) or np.any(first[start[:-1]] != 0) or np.any(first > n_rows)
            or np.any(same & (first[1:] < first[:-1])) or np.any(offset < 4) or np.any(size <= 0)
            or np.any(offset + size > src.size)):
        raise IntegrityError(f"{src.name}: corrupt page index (page locations outside the file or out of order)")
    end = np.empty_like(first)
    end[:-1] = np.where(same, first[1:], n_rows[:-1])
    end[-1:] = n_rows[-1:]
    base = layout.rg_first[rg]
    first, end = first + base, end + base

    out = []
    for k, leaf in enumerate(leaves):
        a, b = start[k * len(rgs)], start[(k + 1) * len(rgs)]
        page = np.searchsorted(first[a:b], rows, side="right") - 1 + a
        keep = np.ones(len(page), dtype=bool)
        keep[1:] = page[1:] != page[:-1]  # rows are sorted: the rows of one page are adjacent
        sel = page[keep]
        out.append(_LeafPages(leaf, offset[sel], size[sel], first[sel], end[sel], rg[sel]))
    return out, offset[start[:-1]].reshape(len(leaves), len(rgs)).T


_WINDOW = 40  # a page header's fields 1-5 fit in 40 bytes (an i32 varint takes at most 5)


def _page_values(buf: Any, at: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """num_values and uncompressed size (header included) of data pages, from their headers.

    Vectorised for the layout Thrift writers produce — fields 1-3, an optional
    crc, then the v1 or v2 data page header whose field 1 is num_values; any
    other header is decoded in full.
    """
    n = len(at)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    raw = np.frombuffer(buf, dtype=np.uint8)
    width = _WINDOW + 1  # a zero byte after each window closes its last token
    col = np.arange(_WINDOW)
    win = np.zeros((n, width), dtype=np.uint8)
    win[:, :_WINDOW] = np.where(col < size[:, None], raw[np.minimum(at[:, None] + col, len(raw) - 1)], 0)
    values, ends = thrift.decode_varints(win.ravel())
    starts = np.concatenate(([0], ends[:-1]))
    row0 = np.arange(n) * width
    ti = np.minimum(np.searchsorted(starts, row0)[:, None] + np.arange(11), len(values) - 1)
    tok, one, stop = values[ti], (ends - starts)[ti] == 1, ends[ti] - row0[:, None]
    r = np.arange(n)
    ok = np.all(one[:, [0, 2, 4]] & (tok[:, [0, 2, 4]] == 0x15), axis=1)
    kind = thrift.zigzag(tok[:, 1])
    crc = one[:, 6] & (tok[:, 6] == 0x15)
    h = np.where(crc, 8, 6)
    # field 5 (v1 header) or 8 (v2), its delta counted from field 4 (crc) or 3
    expect = np.where(kind == 0, np.where(crc, 0x1C, 0x2C), np.where(crc, 0x4C, 0x5C))
    ok &= ((kind == 0) | (kind == 3)) & (tok[r, h] == expect) & one[r, h] & (tok[r, h + 1] == 0x15) & one[r, h + 1]
    ok &= stop[r, h + 2] <= np.minimum(size, _WINDOW)
    num_values = thrift.zigzag(tok[r, h + 2])
    body = thrift.zigzag(tok[:, 5])
    usize = thrift.zigzag(tok[:, 3]) + size - body
    ok &= (body <= size) & (num_values >= 0)
    for i in np.flatnonzero(~ok).tolist():
        num_values[i], usize[i] = _page_header(buf, int(at[i]), int(size[i]), data=True)
    return num_values, usize


def _page_header(buf: Any, at: int, size: int, *, data: bool) -> tuple[int, int]:
    """(num_values, uncompressed size with header) of one page, its header decoded in full."""
    header, length = thrift.decode_struct(bytes(buf[at:at + min(size, 1 << 16)]))
    kind, usize = header.value(1), header.value(2)
    sub = header.value({0: 5, 3: 8, 2: 7}.get(kind, -1))
    if not isinstance(sub, Struct) or not isinstance(usize, int) or (kind != 2) != data:
        raise IntegrityError(f"corrupt Parquet page header at byte {at}")
    return int(sub.value(1, 0)), usize + length


# --- in-memory Parquet files ------------------------------------------------------------

def _restricted_schema(layout: _Layout, leaves: list[int]) -> list[Struct]:
    """The schema elements of these leaves and their ancestors, child counts fixed."""
    schema = layout.footer.value(_FMD_SCHEMA).items
    children: dict[int, set[int]] = {0: set()}
    for leaf in leaves:
        chain = (0, *layout.chains[leaf])
        for parent, child in zip(chain, chain[1:], strict=False):
            children.setdefault(parent, set()).add(child)
            children.setdefault(child, set())
    out = []
    for p in sorted(children):
        el = Struct(schema[p])
        if _SE_CHILDREN in el:
            el.put(_SE_CHILDREN, I32, len(children[p]))
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


def _arrow_schema(layout: _Layout, leaves: tuple[int, ...]) -> bytes:
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


def _mini_file(layout: _Layout, group: list[_LeafPages], buf: Any,
               dicts: dict[tuple[int, int], tuple[int, int, int]]) -> bytes:
    """``PAR1`` + the pages of a group of leaves + a footer that describes them."""
    lead = group[0]
    leaves = [lp.leaf for lp in group]
    rgs = np.unique(lead.rg)
    codecs = np.array([[layout.meta[g][leaf].value(_CMD_CODEC) for leaf in leaves] for g in rgs.tolist()])
    # a dictionary page serves one column chunk, so its pages keep their row group; else one row group
    split = any((g, leaf) in dicts for g in rgs.tolist() for leaf in leaves) or bool(np.any(codecs != codecs[0]))
    cuts = [0, *(np.flatnonzero(np.diff(lead.rg)) + 1).tolist(), len(lead.rg)] if split else [0, len(lead.rg)]
    pieces: list[Any] = [_MAGIC]
    pos = len(_MAGIC)
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
                some = _need(layout.meta[gg][lp.leaf], _CMD_ENCODINGS, List, "column encodings").items
                encodings += [e for e in some if e not in encodings]
            meta = Struct()
            for fid in (_CMD_TYPE, _CMD_ENCODINGS, _CMD_PATH, _CMD_CODEC):  # kept as found, wire types too
                meta[fid] = original.get(fid, (I32, 0))
            meta.put(_CMD_ENCODINGS, LIST, List(I32, encodings))
            meta.put(_CMD_VALUES, I64, int(lp.values[a:b].sum()))
            meta.put(_CMD_USIZE, I64, usize + int(lp.usize[a:b].sum()))
            meta.put(_CMD_CSIZE, I64, pos - chunk_start)
            meta.put(_CMD_DATA_OFFSET, I64, data_off)
            if dict_off is not None:
                meta.put(_CMD_DICT_OFFSET, I64, dict_off)
            chunk = Struct()
            chunk.put(_CC_FILE_OFFSET, I64, 0)
            chunk.put(_CC_META, STRUCT, meta)
            columns.append(chunk)
        rg = Struct()
        rg.put(_RG_COLUMNS, LIST, List(STRUCT, columns))
        rg.put(_RG_BYTES, I64, pos)
        rg.put(_RG_ROWS, I64, int((lead.end[a:b] - lead.first[a:b]).sum()))
        row_groups.append(rg)

    md = Struct()
    md[_FMD_VERSION] = layout.footer.get(_FMD_VERSION, (I32, 1))
    md.put(_FMD_SCHEMA, LIST, List(STRUCT, _restricted_schema(layout, leaves)))
    md.put(_FMD_ROWS, I64, int((lead.end - lead.first).sum()))
    md.put(_FMD_ROW_GROUPS, LIST, List(STRUCT, row_groups))
    kv = Struct()
    kv.put(1, BINARY, b"ARROW:schema")
    kv.put(2, BINARY, layout.resolve(("arrow", *leaves), lambda: _arrow_schema(layout, tuple(leaves))))
    md.put(_FMD_KV, LIST, List(STRUCT, [kv]))
    if _FMD_CREATED_BY in layout.footer:  # Arrow chooses its work-arounds for old writers by it
        md[_FMD_CREATED_BY] = layout.footer[_FMD_CREATED_BY]
    orders = layout.footer.value(_FMD_ORDERS)
    if isinstance(orders, List) and len(orders.items) == len(layout.leaves):
        md.put(_FMD_ORDERS, LIST, List(orders.elem_type, [orders.items[i] for i in leaves]))
    footer = thrift.encode_struct(md)
    pieces += [footer, len(footer).to_bytes(4, "little"), _MAGIC]
    return b"".join(pieces)


def _decode(mini: bytes, rows: int, name: str) -> pa.Table:
    try:
        table = pq.ParquetFile(pa.BufferReader(mini), page_checksum_verification=True).read()
    except _PYARROW_ERRORS as exc:
        raise IntegrityError(f"{name}: corrupt data pages: {exc}") from exc
    if table.num_rows != rows:
        raise IntegrityError(f"{name}: the pages read hold {table.num_rows} rows, the page index says {rows}")
    return table


# --- reassembly -----------------------------------------------------------------------------

def _merge(t: pa.DataType, parts: list[pa.Array]) -> pa.Array:
    """One column from arrays holding different leaves of the same rows (same nesting, same nulls)."""
    first = parts[0]
    if len(parts) == 1:
        return first if first.type == t else first.cast(t)
    mask = first.is_null() if first.null_count else None
    if pa.types.is_struct(t):
        children = []
        for f in t:
            sub = [p.field(f.name) for p in parts if p.type.get_field_index(f.name) >= 0]
            children.append(_merge(f.type, sub))
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
    if pa.types.is_fixed_size_list(t):
        n = t.list_size
        values = _merge(t.value_type, [p.values.slice(p.offset * n, len(p) * n) for p in parts])
        return pa.FixedSizeListArray.from_arrays(values, type=t, mask=mask)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        inner = []
        for p in parts:
            lo, hi = p.offsets[0].as_py(), p.offsets[-1].as_py()
            inner.append(p.values.slice(lo, hi - lo))
        raw = np.asarray(first.offsets)
        offsets = pa.array(raw - raw[0] if raw[0] else raw)
        if pa.types.is_map(t):
            entries = _merge(pa.struct([t.key_field, t.item_field]), inner)
            return pa.MapArray.from_arrays(offsets, entries.field(0), entries.field(1), type=t, mask=mask)
        cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        return cls.from_arrays(offsets, _merge(t.value_type, inner), type=t, mask=mask)
    raise IntegrityError(f"cannot put together a column of type {t} from its leaves")


# --- the read ---------------------------------------------------------------------------------

def _target(layout: _Layout, columns: tuple[str, ...] | None) -> tuple[pa.Table, list[int]]:
    if columns is None:
        return layout.empty_read(None), list(range(len(layout.leaves)))
    leaves: set[int] = set()
    for name in columns:
        if name not in layout.prefixes:
            raise NotFound(f"no column {name!r} in the file (leaf columns: {', '.join(layout.leaves)})")
        leaves.update(layout.prefixes[name])
    return layout.empty_read(list(columns)), sorted(leaves)


def _rows(rows: Any) -> np.ndarray:
    arr = np.asarray(rows)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise DataError(f"rows must be a 1-D array of integers, not {arr.dtype} of shape {arr.shape}")
    return arr.astype(np.int64, copy=False)


def read_rows(source: str | os.PathLike[str] | BinaryIO, columns: Sequence[str] | None, rows: np.ndarray,
              *, metadata: pq.FileMetaData | None = None) -> pa.Table:
    """Read some rows of a Parquet file, fetching only the data pages that hold them.

    The result equals ``pq.ParquetFile(source).read(columns=columns).take(rows)``
    (values, types, column order). ``rows`` count over the whole file; sorted
    unique rows are the fast case, others are sorted here and put back in
    order. ``columns`` are top-level names or dotted Parquet paths (``"jets"``,
    ``"jets.list.element.pt"``). Pass the file's ``metadata`` when it is at
    hand: the footer is then not read, and its decoding is cached with it.

    Reads the footer, the OffsetIndex of the needed columns in the row groups
    that hold selected rows, and the selected data pages (with their
    dictionary pages). Raises :class:`~giod.errors.StorageError` when a needed
    column has no page index (read whole row groups instead),
    :class:`~giod.errors.IntegrityError` for a corrupt or truncated file, and
    :class:`~giod.errors.NotFound` for an unknown column or a row outside the file.
    """
    wanted = _rows(rows)
    src = _Source(source)
    try:
        layout = _layout(src, metadata)
        key = None if columns is None else tuple(columns)
        target, leaves = layout.resolve(("columns", key), lambda: _target(layout, key))
        uniq, inverse = wanted, None
        if len(wanted) > 1 and np.any(wanted[1:] <= wanted[:-1]):
            uniq, inverse = np.unique(wanted, return_inverse=True)
        total = int(layout.rg_rows.sum())
        if len(uniq) and (uniq[0] < 0 or uniq[-1] >= total):
            bad = int(uniq[0] if uniq[0] < 0 else uniq[-1])
            raise NotFound(f"row {bad} is outside {src.name}, which has {total} rows")
        if not leaves:  # like pyarrow: the rows, without columns
            return pa.table({"_": pa.nulls(len(wanted))}).drop_columns(["_"])
        if len(uniq) == 0:
            return target
        result = _read(src, layout, target, leaves, uniq, key, metadata)
    finally:
        src.close()
    return result if inverse is None else result.take(pa.array(inverse))


def _read_row_groups(src: _Source, layout: _Layout, rgs: np.ndarray, rows: np.ndarray,
                     columns: tuple[str, ...] | None, metadata: pq.FileMetaData | None) -> pa.Table:
    """The rows, decoded by pyarrow from whole row groups: cheaper once most of their pages are needed."""
    local_first = np.cumsum(layout.rg_rows[rgs]) - layout.rg_rows[rgs]
    rg_of = np.searchsorted(layout.rg_first, rows, side="right") - 1
    local = local_first[np.searchsorted(rgs, rg_of)] + rows - layout.rg_first[rg_of]
    try:
        pf = pq.ParquetFile(_Borrowed(src.file) if src.path is None else src.path, metadata=metadata,
                            page_checksum_verification=True)
        table = pf.read_row_groups(rgs.tolist(), columns=None if columns is None else list(columns))
        return table.take(pa.array(local))
    except _PYARROW_ERRORS as exc:
        raise IntegrityError(f"{src.name}: cannot read row groups: {exc}") from exc


def _read(src: _Source, layout: _Layout, target: pa.Table, leaves: list[int], rows: np.ndarray,
          columns: tuple[str, ...] | None, metadata: pq.FileMetaData | None) -> pa.Table:
    rg_of = np.searchsorted(layout.rg_first, rows, side="right") - 1
    rgs = rg_of[np.r_[True, rg_of[1:] != rg_of[:-1]]]
    pages, first_page = _select_pages(src, layout, rgs, leaves, rows)
    if sum(int(lp.size.sum()) for lp in pages) >= _DENSE * int(layout.index[rgs][:, leaves, 4].sum()):
        return _read_row_groups(src, layout, rgs, rows, columns, metadata)

    # a dictionary page sits between the chunk's start and its first data page (some writers point
    # data_page_offset at it instead of setting dictionary_page_offset)
    idx = layout.index[rgs][:, leaves]
    chunk_start = np.where((idx[..., 2] >= 4) & (idx[..., 2] < idx[..., 3]), idx[..., 2], idx[..., 3])
    gi, li = np.nonzero(chunk_start < first_page)
    dict_keys = [(int(rgs[g]), leaves[k]) for g, k in zip(gi.tolist(), li.tolist(), strict=True)]
    d_off, d_len = chunk_start[gi, li], first_page[gi, li] - chunk_start[gi, li]
    n_data = np.array([len(lp.offset) for lp in pages])
    buf, at = src.read_ranges(np.concatenate([*(lp.offset for lp in pages), d_off]),
                              np.concatenate([*(lp.size for lp in pages), d_len]), compact=False)
    n_all = int(n_data.sum())
    sizes = np.concatenate([lp.size for lp in pages])
    values, usize = _page_values(buf, at[:n_all], sizes)
    dicts = {k: (a, n, _page_header(buf, a, n, data=False)[1])
             for k, a, n in zip(dict_keys, at[n_all:].tolist(), d_len.tolist(), strict=True)}

    groups: dict[bytes, list[_LeafPages]] = {}
    cut = np.concatenate(([0], np.cumsum(n_data)))
    for k, lp in enumerate(pages):
        lp.at, lp.values, lp.usize = at[cut[k]:cut[k + 1]], values[cut[k]:cut[k + 1]], usize[cut[k]:cut[k + 1]]
        groups.setdefault(lp.first.tobytes() + lp.end.tobytes(), []).append(lp)

    taken = []
    for group in groups.values():
        lead = group[0]
        covered = lead.end - lead.first
        table = _decode(_mini_file(layout, group, buf, dicts), int(covered.sum()), src.name)
        page = np.searchsorted(lead.first, rows, side="right") - 1
        local = (np.cumsum(covered) - covered)[page] + rows - lead.first[page]
        taken.append(table.take(pa.array(local)))
    del buf  # a mapped file closes only once no view of it is left

    try:
        arrays = []
        for f in target.schema:
            parts = [t.column(f.name).combine_chunks() for t in taken if t.schema.get_field_index(f.name) >= 0]
            arrays.append(_merge(f.type, parts))
        return pa.Table.from_arrays(arrays, schema=target.schema)
    except (pa.ArrowException, ValueError) as exc:  # leaves that disagree on lists or nulls: damaged levels
        raise IntegrityError(f"{src.name}: the columns read do not fit together: {exc}") from exc
