"""Which data pages hold the selected rows: OffsetIndexes and page headers, decoded in bulk."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from giod.errors import IntegrityError, StorageError
from giod.storage.formats.parquet import thrift
from giod.storage.formats.parquet.footer import Layout, need
from giod.storage.formats.parquet.source import Source
from giod.storage.formats.parquet.thrift import I32, I64, List, Struct


@dataclass
class LeafPages:
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


def _page_locations(src: Source, layout: Layout, rgs: np.ndarray, leaves: list[int]
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
        locations = need(oi, 1, List, "page locations").items
        counts.append(len(locations))
        rows += [tuple(need(loc, f, int, "page location", -1) for f in (1, 2, 3)) for loc in locations]
    return np.array(counts, dtype=np.int64), np.array(rows, dtype=np.int64).reshape(-1, 3)


def select_pages(src: Source, layout: Layout, rgs: np.ndarray, leaves: list[int],
                  rows: np.ndarray) -> tuple[list[LeafPages], np.ndarray]:
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
        out.append(LeafPages(leaf, offset[sel], size[sel], first[sel], end[sel], rg[sel]))
    return out, offset[start[:-1]].reshape(len(leaves), len(rgs)).T


_WINDOW = 40  # a page header's fields 1-5 fit in 40 bytes (an i32 varint takes at most 5)


def page_values(buf: Any, at: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
        num_values[i], usize[i] = page_header(buf, int(at[i]), int(size[i]), data=True)
    return num_values, usize


def page_header(buf: Any, at: int, size: int, *, data: bool) -> tuple[int, int]:
    """(num_values, uncompressed size with header) of one page, its header decoded in full."""
    header, length = thrift.decode_struct(bytes(buf[at:at + min(size, 1 << 16)]))
    kind, usize = header.value(1), header.value(2)
    sub = header.value({0: 5, 3: 8, 2: 7}.get(kind, -1))
    if not isinstance(sub, Struct) or not isinstance(usize, int) or (kind != 2) != data:
        raise IntegrityError(f"corrupt Parquet page header at byte {at}")
    return int(sub.value(1, 0)), usize + length
