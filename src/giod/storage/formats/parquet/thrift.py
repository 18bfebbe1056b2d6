"""The Thrift compact protocol, generically: decode to a tree that re-encodes.

Parquet's footer, page headers and page indexes are Thrift structs in the
compact protocol. Decoding here keeps every field's id and wire type, so a
struct can be edited (fields set or dropped) and encoded back without a
schema; fields the code does not know about survive the round trip.

A decoded struct is a :class:`Struct`: a dict from field id to
``(wire type, value)`` in wire order. Values are ``int`` (i8/i16/i32/i64),
``bool``, ``float``, ``bytes`` (binary and string), :class:`Struct`,
:class:`List` (lists and sets) or :class:`Map`.

:func:`decode_varints` and :func:`decode_int_struct_lists` decode with
numpy the long, regular lists (page locations) where a per-field Python
loop would dominate the read.
"""

from __future__ import annotations

import struct as _struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from giod.errors import IntegrityError

__all__ = [
    "BINARY", "BOOL", "BYTE", "DOUBLE", "I16", "I32", "I64", "LIST", "MAP", "SET", "STRUCT", "UUID",
    "List", "Map", "Struct", "decode_int_struct_lists", "decode_struct", "decode_varints", "encode_struct",
    "read_varint", "zigzag",
]

# compact-protocol wire types (BOOL is "true" in a field header; 2 is "false")
BOOL, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT, UUID = 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13
_FALSE = 2
_INTS = (I16, I32, I64)
_MAX_DEPTH = 64  # Parquet nests a few levels; deeper input is corrupt or hostile


class Struct(dict[int, tuple[int, Any]]):
    """A Thrift struct: field id → (wire type, value), in wire order."""

    def value(self, fid: int, default: Any = None) -> Any:
        """The value of field ``fid``, or ``default`` when it is absent."""
        item = self.get(fid)
        return default if item is None else item[1]

    def put(self, fid: int, ttype: int, value: Any) -> None:
        """Set field ``fid`` (replaces it in place, or appends it)."""
        self[fid] = (ttype, value)


@dataclass(slots=True)
class List:
    """A Thrift list (or set, when ``is_set``) of elements of one wire type."""

    elem_type: int
    items: list[Any] = field(default_factory=list)
    is_set: bool = False


@dataclass(slots=True)
class Map:
    """A Thrift map: the key and value wire types and the (key, value) pairs."""

    key_type: int
    value_type: int
    items: list[tuple[Any, Any]] = field(default_factory=list)


def zigzag(n: Any) -> Any:
    """Decode zigzag-encoded integers: a Python int, or a uint64 numpy array (→ int64)."""
    if isinstance(n, np.ndarray):
        return ((n >> np.uint64(1)) ^ (np.uint64(0) - (n & np.uint64(1)))).view(np.int64)
    return (n >> 1) ^ -(n & 1)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``buf[pos]`` and the position after it."""
    try:
        return _varint(buf, pos)
    except IndexError as exc:
        raise IntegrityError("corrupt Thrift data: truncated varint") from exc


# --- decoding -----------------------------------------------------------------

def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 63:
            raise IntegrityError("corrupt Thrift data: varint longer than 10 bytes")


def _value(buf: bytes, pos: int, ttype: int, depth: int) -> tuple[Any, int]:
    if ttype in _INTS:
        n, pos = _varint(buf, pos)
        return (n >> 1) ^ -(n & 1), pos
    if ttype == STRUCT:
        return _struct_at(buf, pos, depth + 1)
    if ttype == BINARY:
        n, pos = _varint(buf, pos)
        end = pos + n
        if end > len(buf):
            raise IndexError
        return buf[pos:end], end
    if ttype in (LIST, SET):
        return _list_at(buf, pos, ttype, depth)
    if ttype == BYTE:
        b = buf[pos]
        return b - 256 if b > 127 else b, pos + 1
    if ttype == DOUBLE:
        if pos + 8 > len(buf):
            raise IndexError
        return _struct.unpack_from("<d", buf, pos)[0], pos + 8
    if ttype == MAP:
        size, pos = _varint(buf, pos)
        if size == 0:
            return Map(0, 0, []), pos
        kv = buf[pos]
        pos += 1
        kt, vt = kv >> 4, kv & 0x0F
        if size > len(buf) - pos:
            raise IntegrityError(f"corrupt Thrift data: map of {size} entries in {len(buf) - pos} bytes")
        pairs = []
        for _ in range(size):
            if kt in (BOOL, _FALSE):
                k, pos = buf[pos] == BOOL, pos + 1
            else:
                k, pos = _value(buf, pos, kt, depth)
            if vt in (BOOL, _FALSE):
                v, pos = buf[pos] == BOOL, pos + 1
            else:
                v, pos = _value(buf, pos, vt, depth)
            pairs.append((k, v))
        return Map(BOOL if kt == _FALSE else kt, BOOL if vt == _FALSE else vt, pairs), pos
    if ttype == UUID:
        if pos + 16 > len(buf):
            raise IndexError
        return buf[pos:pos + 16], pos + 16
    raise IntegrityError(f"corrupt Thrift data: unknown wire type {ttype}")


def _list_at(buf: bytes, pos: int, ttype: int, depth: int) -> tuple[List, int]:
    if depth > _MAX_DEPTH:
        raise IntegrityError("corrupt Thrift data: values nested too deeply")
    header = buf[pos]
    pos += 1
    size = header >> 4
    elem = header & 0x0F
    if size == 15:
        size, pos = _varint(buf, pos)
    if size > len(buf) - pos:  # every element takes at least one byte
        raise IntegrityError(f"corrupt Thrift data: list of {size} elements in {len(buf) - pos} bytes")
    items: list[Any] = []
    append = items.append
    if elem == STRUCT:
        for _ in range(size):
            v, pos = _struct_at(buf, pos, depth + 1)
            append(v)
    elif elem in _INTS:
        for _ in range(size):
            n, pos = _varint(buf, pos)
            append((n >> 1) ^ -(n & 1))
    elif elem == BINARY:
        for _ in range(size):
            n, pos = _varint(buf, pos)
            if pos + n > len(buf):
                raise IndexError
            append(buf[pos:pos + n])
            pos += n
    elif elem in (BOOL, _FALSE):
        for _ in range(size):
            append(buf[pos] == BOOL)
            pos += 1
        elem = BOOL
    else:
        for _ in range(size):
            v, pos = _value(buf, pos, elem, depth + 1)
            append(v)
    return List(elem, items, ttype == SET), pos


def _struct_at(buf: bytes, pos: int, depth: int) -> tuple[Struct, int]:
    if depth > _MAX_DEPTH:
        raise IntegrityError("corrupt Thrift data: structs nested too deeply")
    out = Struct()
    fid = 0
    while True:
        header = buf[pos]
        pos += 1
        if header == 0:
            return out, pos
        ttype = header & 0x0F
        delta = header >> 4
        if delta:
            fid += delta
        else:
            n, pos = _varint(buf, pos)
            fid = (n >> 1) ^ -(n & 1)
        if ttype == BOOL or ttype == _FALSE:
            out[fid] = (BOOL, ttype == BOOL)
        elif ttype in _INTS:  # inlined: most fields are integers
            b = buf[pos]
            if b < 0x80:
                pos += 1
                out[fid] = (ttype, (b >> 1) ^ -(b & 1))
            else:
                n, pos = _varint(buf, pos)
                out[fid] = (ttype, (n >> 1) ^ -(n & 1))
        elif ttype == STRUCT:
            child, pos = _struct_at(buf, pos, depth + 1)
            out[fid] = (ttype, child)
        elif ttype == LIST:
            items, pos = _list_at(buf, pos, ttype, depth)
            out[fid] = (ttype, items)
        else:
            v, pos = _value(buf, pos, ttype, depth)
            out[fid] = (ttype, v)


def decode_struct(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[Struct, int]:
    """Decode the struct that starts at ``buf[pos]``; return it and the position after it.

    Raises :class:`~giod.errors.IntegrityError` when the bytes are truncated or
    are not a compact-protocol struct.
    """
    data = bytes(buf) if not isinstance(buf, bytes) else buf
    try:
        return _struct_at(data, pos, 0)
    except (IndexError, RecursionError) as exc:
        raise IntegrityError("corrupt Thrift data: truncated struct") from exc


# --- encoding -----------------------------------------------------------------

def _put_varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _put_value(out: bytearray, ttype: int, v: Any) -> None:
    if ttype in _INTS:
        _put_varint(out, (v << 1) ^ (v >> 63))
    elif ttype == STRUCT:
        _put_struct(out, v)
    elif ttype == BINARY:
        _put_varint(out, len(v))
        out += v
    elif ttype in (LIST, SET):
        size = len(v.items)
        elem = v.elem_type
        if size < 15:
            out.append(size << 4 | elem)
        else:
            out.append(0xF0 | elem)
            _put_varint(out, size)
        if elem == BOOL:
            out += bytes(BOOL if x else _FALSE for x in v.items)
        else:
            for x in v.items:
                _put_value(out, elem, x)
    elif ttype == BYTE:
        out.append(v & 0xFF)
    elif ttype == DOUBLE:
        out += _struct.pack("<d", v)
    elif ttype == MAP:
        _put_varint(out, len(v.items))
        if v.items:
            out.append(v.key_type << 4 | v.value_type)
            for k, x in v.items:
                if v.key_type == BOOL:
                    out.append(BOOL if k else _FALSE)
                else:
                    _put_value(out, v.key_type, k)
                if v.value_type == BOOL:
                    out.append(BOOL if x else _FALSE)
                else:
                    _put_value(out, v.value_type, x)
    elif ttype == UUID:
        out += v
    else:
        raise ValueError(f"unknown Thrift wire type {ttype}")


def _put_struct(out: bytearray, s: Struct) -> None:
    last = 0
    for fid, (ttype, v) in s.items():
        wire = (BOOL if v else _FALSE) if ttype == BOOL else ttype
        delta = fid - last
        if 0 < delta <= 15:
            out.append(delta << 4 | wire)
        else:
            out.append(wire)
            _put_varint(out, (fid << 1) ^ (fid >> 63))
        last = fid
        if ttype != BOOL:
            _put_value(out, ttype, v)
    out.append(0)


def encode_struct(s: Struct) -> bytes:
    """Encode a struct (as :func:`decode_struct` returns it) in the compact protocol."""
    out = bytearray()
    _put_struct(out, s)
    return bytes(out)


# --- vectorised varints -------------------------------------------------------

def decode_varints(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split a uint8 buffer into consecutive unsigned varints.

    Returns ``(values, ends)``: each varint's value (uint64) and the index one
    past its last byte. Single-byte field and list headers below 0x80 come out
    as one-byte "varints" too, which lets callers check a struct's layout
    token by token. A trailing incomplete varint is dropped; a run of more
    than 10 bytes (not a varint) gets a meaningless value.
    """
    buf = np.asarray(buf, dtype=np.uint8)
    ends = np.flatnonzero(buf < 0x80) + 1
    if len(ends) == 0:
        return np.zeros(0, np.uint64), ends
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1]
    lengths = ends - starts
    values = (buf[starts] & 0x7F).astype(np.uint64)
    more = np.flatnonzero(lengths > 1)
    k = 1  # add byte k of every varint that has one: most varints are short, so few passes touch few
    while len(more) and k < 10:
        values[more] |= (buf[starts[more] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        k += 1
        more = more[lengths[more] > k]
    return values, ends


def decode_int_struct_lists(buf: Any, starts: np.ndarray, types: tuple[int, ...]
                            ) -> tuple[np.ndarray, np.ndarray] | None:
    """Decode many ``list<struct>`` values whose structs hold integer fields ``1..len(types)``.

    ``starts`` are the positions of the list headers in ``buf``. Returns the
    element count of each list and one row of (zigzag-decoded) field values
    per element, all lists concatenated — or ``None`` when any struct does not
    have exactly that short-form layout (optional fields present, other field
    order), in which case the caller decodes with :func:`decode_struct`.
    """
    raw = np.frombuffer(buf, dtype=np.uint8)
    starts = np.asarray(starts, dtype=np.int64)
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, len(types)), dtype=np.int64)
    if starts.max() >= len(raw):
        return None
    header = raw[starts].astype(np.int64)
    if np.any(header & 0x0F != STRUCT):
        return None
    counts, first = header >> 4, starts + 1
    big = np.flatnonzero(counts == 15)  # 15 or more elements: the count follows as a varint
    if len(big):
        five = np.arange(5)
        win = raw[np.minimum(starts[big, None] + 1 + five, len(raw) - 1)].astype(np.int64)
        more = win >= 0x80
        if np.any(more.all(axis=1)):
            return None
        nbytes = np.argmin(more, axis=1) + 1
        counts[big] = (((win & 0x7F) << (7 * five)) * (five < nbytes[:, None])).sum(axis=1)
        first[big] += nbytes
    masked = raw.copy()
    span = first - starts
    masked[np.repeat(first - np.cumsum(span), span) + np.arange(int(span.sum()))] = 0  # list headers are
    # not varints: zeroed, they cannot join the first element's token
    values, ends = decode_varints(masked)
    tok_start = np.empty_like(ends)
    tok_start[:1] = 0
    tok_start[1:] = ends[:-1]
    per = 2 * len(types) + 1  # per struct: header and value per field, then the stop byte
    t0 = np.searchsorted(tok_start, first)
    nz = counts > 0
    if np.any(t0[nz] >= len(tok_start)) or np.any(tok_start[t0[nz]] != first[nz]):
        return None
    spans = per * counts
    if np.any(t0[nz] + spans[nz] > len(values)):  # a count larger than the bytes that follow: not this layout
        return None
    total = int(counts.sum())
    idx = np.repeat(t0 - (np.cumsum(spans) - spans), spans) + np.arange(int(spans.sum()), dtype=np.int64)
    tok = values[idx].reshape(total, per)
    single = (ends - tok_start)[idx].reshape(total, per) == 1
    expect = np.array([*(0x10 | t for t in types), 0], dtype=np.uint64)
    marks = [*range(0, per - 1, 2), per - 1]
    if not (np.all(tok[:, marks] == expect) and np.all(single[:, marks])):
        return None
    return counts, zigzag(np.ascontiguousarray(tok[:, 1:per - 1:2]))
