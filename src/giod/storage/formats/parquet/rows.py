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

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from giod.errors import DataError, IntegrityError, NotFound
from giod.storage.formats.parquet.footer import PYARROW_ERRORS, Layout, parse_layout
from giod.storage.formats.parquet.minifile import decode, mini_file
from giod.storage.formats.parquet.pageindex import LeafPages, page_header, page_values, select_pages
from giod.storage.formats.parquet.source import Borrowed, Source
from giod.storage.numpyview import numpy_array

__all__ = ["read_rows"]

_DENSE = 0.5  # when the pages to read hold this share of their row groups' bytes, pyarrow reads the row groups
_CACHED_FILES = 32


# A layout takes milliseconds to decode: cache it per file version and per pyarrow metadata object. By the
# object, not by its value: pyarrow's metadata compare equal by content, and two files with equal footers
# (a file and a crafted twin whose page index differs) must not share what was read of either.
_by_file: OrderedDict[tuple[Any, ...], Layout] = OrderedDict()
_by_metadata: dict[int, tuple[weakref.ref[pq.FileMetaData], Layout]] = {}
_cache_lock = threading.RLock()  # a metadata object may die, and be forgotten, while it is held


def _forget(key: int) -> None:
    with _cache_lock:
        _by_metadata.pop(key, None)


def _layout(src: Source, metadata: pq.FileMetaData | None) -> Layout:
    if metadata is not None:
        with _cache_lock:
            entry = _by_metadata.get(id(metadata))
        if entry is not None and entry[0]() is metadata:
            return entry[1]
        sink = pa.BufferOutputStream()
        metadata.write_metadata_file(sink)  # the footer's own Thrift bytes, framed as a file
        parsed = parse_layout(sink.getvalue().to_pybytes()[4:-8])
        key_id = id(metadata)

        def gone(_ref: weakref.ref[pq.FileMetaData]) -> None:
            _forget(key_id)

        with _cache_lock:
            _by_metadata[key_id] = (weakref.ref(metadata, gone), parsed)
        return parsed
    key = src.identity()
    if key is not None:
        with _cache_lock:
            hit = _by_file.get(key)
            if hit is not None:
                _by_file.move_to_end(key)
                return hit
    layout = parse_layout(src.footer())
    if key is not None:
        with _cache_lock:
            _by_file[key] = layout
            while len(_by_file) > _CACHED_FILES:
                _by_file.popitem(last=False)
    return layout


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
        offsets = numpy_array(raw - raw[0] if raw[0] else raw)
        if pa.types.is_map(t):
            entries = _merge(pa.struct([t.key_field, t.item_field]), inner)
            return pa.MapArray.from_arrays(offsets, entries.field(0), entries.field(1), type=t, mask=mask)
        cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        return cls.from_arrays(offsets, _merge(t.value_type, inner), type=t, mask=mask)
    raise IntegrityError(f"cannot put together a column of type {t} from its leaves")


# --- the read ---------------------------------------------------------------------------------

def _target(layout: Layout, columns: tuple[str, ...] | None) -> tuple[pa.Table, list[int]]:
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
    src = Source(source)
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
    return result if inverse is None else result.take(numpy_array(inverse))


def _read_row_groups(src: Source, layout: Layout, rgs: np.ndarray, rows: np.ndarray,
                     columns: tuple[str, ...] | None, metadata: pq.FileMetaData | None) -> pa.Table:
    """The rows, decoded by pyarrow from whole row groups: cheaper once most of their pages are needed."""
    local_first = np.cumsum(layout.rg_rows[rgs]) - layout.rg_rows[rgs]
    rg_of = np.searchsorted(layout.rg_first, rows, side="right") - 1
    local = local_first[np.searchsorted(rgs, rg_of)] + rows - layout.rg_first[rg_of]
    try:
        pf = pq.ParquetFile(Borrowed(src.file) if src.path is None else src.path, metadata=metadata,
                            page_checksum_verification=True)
        table = pf.read_row_groups(rgs.tolist(), columns=None if columns is None else list(columns))
        return table.take(numpy_array(local))
    except PYARROW_ERRORS as exc:
        raise IntegrityError(f"{src.name}: cannot read row groups: {exc}") from exc


def _read(src: Source, layout: Layout, target: pa.Table, leaves: list[int], rows: np.ndarray,
          columns: tuple[str, ...] | None, metadata: pq.FileMetaData | None) -> pa.Table:
    rg_of = np.searchsorted(layout.rg_first, rows, side="right") - 1
    rgs = rg_of[np.r_[True, rg_of[1:] != rg_of[:-1]]]
    pages, first_page = select_pages(src, layout, rgs, leaves, rows)
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
    values, usize = page_values(buf, at[:n_all], sizes)
    dicts = {k: (a, n, page_header(buf, a, n, data=False)[1])
             for k, a, n in zip(dict_keys, at[n_all:].tolist(), d_len.tolist(), strict=True)}

    groups: dict[bytes, list[LeafPages]] = {}
    cut = np.concatenate(([0], np.cumsum(n_data)))
    for k, lp in enumerate(pages):
        lp.at, lp.values, lp.usize = at[cut[k]:cut[k + 1]], values[cut[k]:cut[k + 1]], usize[cut[k]:cut[k + 1]]
        groups.setdefault(lp.first.tobytes() + lp.end.tobytes(), []).append(lp)

    taken = []
    for group in groups.values():
        lead = group[0]
        covered = lead.end - lead.first
        table = decode(mini_file(layout, group, buf, dicts), int(covered.sum()), src.name)
        page = np.searchsorted(lead.first, rows, side="right") - 1
        local = (np.cumsum(covered) - covered)[page] + rows - lead.first[page]
        taken.append(table.take(numpy_array(local)))
    del buf  # a mapped file closes only once no view of it is left

    try:
        arrays = []
        for f in target.schema:
            parts = [t.column(f.name).combine_chunks() for t in taken if t.schema.get_field_index(f.name) >= 0]
            arrays.append(_merge(f.type, parts))
        return pa.Table.from_arrays(arrays, schema=target.schema)
    except (pa.ArrowException, ValueError) as exc:  # leaves that disagree on lists or nulls: damaged levels
        raise IntegrityError(f"{src.name}: the columns read do not fit together: {exc}") from exc
