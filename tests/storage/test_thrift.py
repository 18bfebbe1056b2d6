"""The Thrift compact codec: real Parquet footers and page headers round-trip, any tree round-trips."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.errors import IntegrityError
from giod.storage.formats.parquet import thrift
from giod.storage.formats.parquet.thrift import (
    BINARY,
    BOOL,
    BYTE,
    DOUBLE,
    I16,
    I32,
    I64,
    LIST,
    MAP,
    SET,
    STRUCT,
    List,
    Map,
    Struct,
)
from tests.storage import parquet_samples as samples

WRITER_OPTIONS = [
    dict(compression="zstd", use_dictionary=False, write_statistics=False, write_page_checksum=True),
    dict(compression="none", use_dictionary=True, write_statistics=True, data_page_version="2.0"),
    dict(compression="snappy", sorting_columns=[pq.SortingColumn(0)], data_page_size=256,
         bloom_filter_options={"event": {"ndv": 100}}),
]


def _footer(content: bytes) -> bytes:
    n = int.from_bytes(content[-8:-4], "little")
    return content[-8 - n:-8]


def _page_headers(content: bytes, md: Struct) -> list[bytes]:
    """The raw bytes of every page header: dictionary pages and all data pages (via the OffsetIndex)."""
    out = []
    for rg in md.value(4).items:
        for cc in rg.value(1).items:
            meta = cc.value(3)
            starts = [meta.value(11)] if meta.value(11) is not None else []
            oi, _ = thrift.decode_struct(content[cc.value(4):cc.value(4) + cc.value(5)])
            starts += [loc.value(1) for loc in oi.value(1).items]
            for at in starts:
                _, end = thrift.decode_struct(content, at)
                out.append(content[at:end])
    return out


@pytest.mark.parametrize("options", WRITER_OPTIONS, ids=["plain", "dictionary-v2-stats", "bloom-sorted"])
def test_real_footers_and_page_headers_round_trip(options: dict[str, Any]) -> None:
    content = samples.write(samples.table(500, 6, nulls=0.1), row_group_size=200, **options)
    footer = _footer(content)
    md, end = thrift.decode_struct(footer)
    assert end == len(footer)
    assert thrift.encode_struct(md) == footer  # byte for byte: field order, short/long forms, bools
    assert thrift.decode_struct(thrift.encode_struct(md))[0] == md
    assert md.value(3) == 500 and len(md.value(4).items) == 3
    headers = _page_headers(content, md)
    assert len(headers) > 30
    for raw in headers:
        header, _ = thrift.decode_struct(raw)
        assert thrift.encode_struct(header) == raw
        assert thrift.decode_struct(thrift.encode_struct(header))[0] == header


def test_an_edited_footer_is_still_read_by_pyarrow() -> None:
    content = samples.write(samples.table(100, 2))
    md, _ = thrift.decode_struct(_footer(content))
    md.put(6, BINARY, b"edited by a test")
    footer = thrift.encode_struct(md)
    edited = content[:-8 - len(_footer(content))] + footer + len(footer).to_bytes(4, "little") + b"PAR1"
    f = pq.ParquetFile(io.BytesIO(edited))
    assert f.metadata.created_by == "edited by a test"
    assert f.read().equals(pq.read_table(io.BytesIO(content)))


# --- any tree ---------------------------------------------------------------------------------

_INT_RANGE = {BYTE: 7, I16: 15, I32: 31, I64: 63}


def _scalar(ttype: int) -> st.SearchStrategy[Any]:
    if ttype in _INT_RANGE:
        bits = _INT_RANGE[ttype]
        return st.integers(-(2**bits), 2**bits - 1)
    if ttype == BOOL:
        return st.booleans()
    if ttype == DOUBLE:
        return st.floats(allow_nan=False)
    return st.binary(max_size=20)


_SCALARS = [BOOL, BYTE, I16, I32, I64, DOUBLE, BINARY]


def _values(ttype: int, depth: int) -> st.SearchStrategy[Any]:
    if ttype == STRUCT:
        return structs(depth + 1)
    if ttype in (LIST, SET):
        return st.sampled_from(_SCALARS + ([STRUCT] if depth < 3 else [])).flatmap(
            lambda e: st.lists(_values(e, depth + 1), max_size=20).map(lambda xs: List(e, xs, ttype == SET)))
    if ttype == MAP:
        return st.tuples(st.sampled_from(_SCALARS), st.sampled_from(_SCALARS)).flatmap(
            lambda kv: st.lists(st.tuples(_scalar(kv[0]), _scalar(kv[1])), max_size=5).map(
                lambda items: Map(kv[0], kv[1], items) if items else Map(0, 0, [])))
    return _scalar(ttype)


def structs(depth: int = 0) -> st.SearchStrategy[Struct]:
    kinds = _SCALARS + ([STRUCT, LIST, SET, MAP] if depth < 3 else [])
    field = st.tuples(st.integers(-40, 400), st.sampled_from(kinds)).flatmap(
        lambda f: _values(f[1], depth).map(lambda v: (f[0], f[1], v)))

    def build(fields: list[tuple[int, int, Any]]) -> Struct:
        s = Struct()
        for fid, ttype, v in fields:
            s[fid] = (ttype, v)  # any order, any ids: deltas, long-form ids and negative ids
        return s

    return st.lists(field, max_size=8).map(build)


@settings(max_examples=200, deadline=None)
@given(s=structs())
def test_any_struct_round_trips(s: Struct) -> None:
    data = thrift.encode_struct(s)
    back, end = thrift.decode_struct(data)
    assert end == len(data)
    assert back == s
    assert thrift.encode_struct(back) == data


@settings(max_examples=100, deadline=None)
@given(s=structs(), cut=st.integers(0, 10**6))
def test_truncated_struct_is_an_integrity_error(s: Struct, cut: int) -> None:
    data = thrift.encode_struct(s)
    with pytest.raises(IntegrityError):
        thrift.decode_struct(data[:cut % len(data)])


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200))
def test_garbage_decodes_or_raises_integrity_error(data: bytes) -> None:
    try:
        s, end = thrift.decode_struct(data)
    except IntegrityError:
        return
    assert end <= len(data)
    assert thrift.decode_struct(thrift.encode_struct(s))[0] == s


# --- vectorised decoding ---------------------------------------------------------------------

def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.integers(0, 2**64 - 1), max_size=50))
def test_decode_varints(values: list[int]) -> None:
    buf = b"".join(_varint(v) for v in values)
    got, ends = thrift.decode_varints(np.frombuffer(buf, dtype=np.uint8))
    assert got.tolist() == values
    assert ends.tolist() == np.cumsum([len(_varint(v)) for v in values]).tolist()


def _offset_index(locations: list[tuple[int, int, int]], extra: bool = False) -> bytes:
    items = []
    for off, size, first in locations:
        loc = Struct()
        loc.put(1, I64, off)
        loc.put(2, I32, size)
        loc.put(3, I64, first)
        items.append(loc)
    oi = Struct()
    oi.put(1, LIST, List(STRUCT, items))
    if extra:
        oi.put(2, LIST, List(I64, [len(locations)]))
    return thrift.encode_struct(oi)


location_lists = st.lists(st.lists(st.tuples(st.integers(0, 2**40), st.integers(1, 2**31 - 1),
                                             st.integers(0, 2**40)), max_size=40), min_size=1, max_size=6)


@settings(max_examples=100, deadline=None)
@given(lists=location_lists, extra=st.booleans())
def test_decode_int_struct_lists_matches_the_generic_decoder(lists: list[list[tuple[int, int, int]]],
                                                             extra: bool) -> None:
    blobs = [_offset_index(locs, extra) for locs in lists]
    buf = b"".join(blobs)
    starts = np.cumsum([0] + [len(b) for b in blobs[:-1]]) + 1  # skip each struct's field header
    counts, rows = thrift.decode_int_struct_lists(buf, starts, (I64, I32, I64))
    assert counts.tolist() == [len(locs) for locs in lists]
    assert rows.tolist() == [list(loc) for locs in lists for loc in locs]


def test_decode_int_struct_lists_refuses_other_layouts() -> None:
    loc = Struct()
    loc.put(1, I64, 5)
    loc.put(3, I64, 0)  # field 2 missing
    oi = Struct()
    oi.put(1, LIST, List(STRUCT, [loc]))
    assert thrift.decode_int_struct_lists(thrift.encode_struct(oi), np.array([1]), (I64, I32, I64)) is None


@pytest.mark.parametrize("hostile", [b"\x1c" * 5000, b"\x19" + b"\x19" * 5000, b"\x19\xfc\xff\xff\xff\xff\x0f"],
                         ids=["deep structs", "deep lists", "huge list"])
def test_hostile_input_is_an_integrity_error(hostile: bytes) -> None:
    with pytest.raises(IntegrityError):
        thrift.decode_struct(hostile)
