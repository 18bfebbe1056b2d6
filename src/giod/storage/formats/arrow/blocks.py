"""Block checksums of Arrow record batches, and the layout of a record batch message.

A record batch of an Arrow container written with block checksums carries,
in its message's custom metadata, a table of CRC-32C values: for every
buffer (in the order of the IPC message: each array's validity, offsets and
values, then its children) the CRC-32C of the whole buffer, then one per
``block`` bytes of it. The catalog's checksum of the batch covers its
metadata message, which holds that table; so a whole-batch read checks each
buffer once, and a read of a few events checks only the blocks it touches,
and a flipped bit in anything either reads is caught before it is used
(docs/decisions.md §46). The CRCs are of the buffers' uncompressed bytes, so
a compressed buffer is checked after it is decompressed.

The schema metadata key :data:`SCHEMA_KEY` (the block size) marks such files;
the files read by ordinary tools as any Arrow IPC file.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass, field

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from giod.errors import IntegrityError
from giod.storage.checksum import extend

__all__ = ["BLOCK", "CRC_KEY", "SCHEMA_KEY", "Message", "Node", "block_crcs", "block_table", "canonical", "check_batch",
           "checksummed", "crcs_at", "has_block_layout", "layout", "parse_message"]

#: bytes per checksummed block: small enough that one event's members cost a block each
BLOCK = 1024
SCHEMA_KEY = b"giod.block_checksums"
CRC_KEY = b"giod.crc"
_HEADER_RECORD_BATCH = 3


def _crc(data: np.ndarray) -> int:
    return extend(0, data)  # a whole buffer: a large one without holding Python's lock


def has_block_layout(schema: pa.Schema) -> bool:
    """Whether every field's IPC layout is one giod reads event by event (buffers as Array.buffers() lists)."""
    # asked by every container writer and reader; each file's schema carries its own footer metadata, so the
    # answer is kept by the fields' types alone (a schema as key missed every time)
    return _block_layout(tuple(f.type for f in schema))


@functools.lru_cache(maxsize=256)  # of the few schemas a process writes and reads
def _block_layout(types: tuple[pa.DataType, ...]) -> bool:

    def ok(t: pa.DataType) -> bool:
        if pa.types.is_struct(t):
            return all(ok(f.type) for f in t)
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return ok(t.value_type)
        return bool(pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t)
                or pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_temporal(t))

    return all(ok(t) for t in types)


def canonical(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with each buffer exactly as an IPC message stores it (offset 0, zero-based offsets).

    The checksums are taken of these buffers, which the IPC writer then writes unchanged.
    """
    return ipc.read_record_batch(batch.serialize(), batch.schema)


def _buffers(batch: pa.RecordBatch) -> list[pa.Buffer | None]:
    return [b for col in batch.columns for b in col.buffers()]


def _size(buf: pa.Buffer | None) -> int:
    return 0 if buf is None else buf.size


def _own_buffers(arr: pa.Array) -> list[pa.Buffer | None] | None:
    """The buffers of ``arr`` and its children in IPC order, if the IPC writer stores them unchanged.

    None when it would cut, shift or drop any of them (an offset, a list whose offsets do not start
    at 0, a buffer longer than its values, a validity bitmap with no null): then only
    :func:`canonical` knows what it stores. Every test here asks for exact sizes, so a None is
    never wrong, only slower.
    """
    t, n = arr.type, len(arr)
    if arr.offset != 0 or n == 0:
        return None
    own = arr.buffers()
    if arr.null_count == 0:
        if own[0] is not None:
            return None  # written as an empty buffer, read back as none: canonical knows
        out: list[pa.Buffer | None] = [None]
    elif _size(own[0]) != -(-n // 8):
        return None
    else:
        out = [own[0]]
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            child = arr.field(i)
            sub = _own_buffers(child) if len(child) == n else None
            if sub is None:
                return None
            out += sub
        return out
    if pa.types.is_fixed_size_list(t):
        values = arr.values
        sub = _own_buffers(values) if len(values) == n * t.list_size else None
        return None if sub is None else out + sub
    variable = (pa.types.is_list(t), pa.types.is_large_list(t), pa.types.is_string(t), pa.types.is_binary(t),
                pa.types.is_large_string(t), pa.types.is_large_binary(t))
    if any(variable):
        width = 8 if (variable[1] or variable[4] or variable[5]) else 4
        if _size(own[1]) != (n + 1) * width:
            return None
        offsets = np.frombuffer(own[1], dtype=f"<i{width}")
        if offsets[0] != 0:
            return None
        end = int(offsets[-1])
        if variable[0] or variable[1]:
            values = arr.values
            sub = _own_buffers(values) if len(values) == end and end > 0 else None
            return None if sub is None else [*out, own[1], *sub]
        return [*out, own[1], own[2]] if _size(own[2]) == end else None
    if not t.bit_width or _size(own[1]) != -(-n * t.bit_width // 8):
        return None
    return [*out, own[1]]


def block_crcs(data: np.ndarray, block: int = BLOCK) -> list[int]:
    """The CRC-32C of each ``block`` bytes of ``data`` (the last block may be short).

    The whole blocks are rows of one 2-D view handed to the C function by ``map``: a Python loop
    with a slice per block cost 4× more than the checksums themselves (docs/decisions.md).
    """
    whole = len(data) // block
    out = list(map(google_crc32c.value, data[:whole * block].reshape(whole, block)))
    if len(data) > whole * block:
        out.append(_crc(data[whole * block:]))
    return out


def crcs_at(data: np.ndarray, blocks: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """The CRC-32C of blocks ``blocks`` (numbers of ``block`` bytes, any order) of one buffer ``data``.

    The same values as a call a block (the last block may be short), made without a Python step a block:
    whole blocks are rows of the buffer's 2-D view, taken and handed to the C function by ``map`` (a
    process's first narrow read checks ~600 blocks a database, each a slice and a call in a loop before:
    docs/decisions.md). Only the blocks asked are read.
    """
    blocks = np.asarray(blocks, dtype=np.int64)
    out = np.empty(len(blocks), dtype=np.uint32)
    if not len(blocks):
        return out
    whole = len(data) // block
    if int(blocks.min()) < 0 or int(blocks.max()) >= -(-len(data) // block):
        raise IndexError(f"a block past the {len(data)} bytes of the buffer")
    full = blocks < whole
    n = int(np.count_nonzero(full))
    if n:
        # each row a view of the buffer (a copy of the rows first would touch as many new pages again)
        rows = map(data[:whole * block].reshape(whole, block).__getitem__,
                   (blocks[full] if n < len(blocks) else blocks).tolist())
        crcs = np.fromiter(map(google_crc32c.value, rows), dtype=np.uint32, count=n)
        if n == len(blocks):
            return crcs
        out[full] = crcs
    out[~full] = _crc(data[whole * block:])  # the short last block, asked once or more
    return out


def checksummed(batch: pa.RecordBatch, block: int = BLOCK) -> tuple[pa.RecordBatch, bytes]:
    """The batch to hand the IPC writer and its checksum table (:func:`block_table`).

    A batch whose buffers the writer stores unchanged is itself (the common case: a cluster
    concatenated from whole tables); any other is made :func:`canonical` first, a copy of it.
    """
    buffers: list[pa.Buffer | None] = []
    for col in batch.columns:
        own = _own_buffers(col)
        if own is None:
            batch = canonical(batch)
            buffers = _buffers(batch)
            break
        buffers += own
    return batch, _table(buffers, block)


def block_table(batch: pa.RecordBatch, block: int = BLOCK) -> bytes:
    """The checksum table of a canonical batch: per buffer, its CRC-32C then one per block."""
    return _table(_buffers(batch), block)


def _table(buffers: list[pa.Buffer | None], block: int) -> bytes:
    out: list[int] = []
    for buf in buffers:
        if buf is None or buf.size == 0:
            out.append(0)  # the CRC-32C of nothing, and no block
        elif buf.size <= block:
            crc = google_crc32c.value(buf)  # one block: its CRC is the buffer's (small commits have mostly these)
            out += (crc, crc)
        else:
            data = np.frombuffer(buf, dtype=np.uint8)
            out.append(_crc(data))
            out.extend(block_crcs(data, block))
    return np.asarray(out, dtype="<u4").tobytes()


def table_bases(lengths: np.ndarray, block: int) -> np.ndarray:
    """Where each buffer's entries start in the checksum table, and the table's length last."""
    sizes = 1 + -(-np.asarray(lengths, dtype=np.int64) // block)
    return np.concatenate([[0], np.cumsum(sizes)])


def check_batch(batch: pa.RecordBatch, table: np.ndarray, where: str) -> None:
    """Check every buffer of a decoded batch against its whole-buffer CRC-32C."""
    buffers = _buffers(batch)
    lengths = np.array([0 if b is None else b.size for b in buffers], dtype=np.int64)
    bases = table_bases(lengths, BLOCK)
    if len(table) != bases[-1]:
        raise IntegrityError(f"{where}: the checksum table has {len(table)} entries, the batch needs {bases[-1]}")
    for i, buf in enumerate(buffers):
        data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
        if _crc(data) != table[bases[i]]:
            raise IntegrityError(f"{where}: CRC-32C mismatch in buffer {i} (the bytes changed since they "
                                 "were written)")


@dataclass(frozen=True)
class Message:
    """What giod needs of a record batch message: rows, field nodes, buffers, compression, checksums."""

    length: int
    nodes: np.ndarray  # (n, 2): length, null count
    buffers: np.ndarray  # (n, 2): offset in the body, length
    compressed: bool
    body_length: int
    codec: str | None  # the codec of compressed buffers (lz4 or zstd), None when none is
    table: np.ndarray | None  # the block checksum table, if the writer left one


class _Flat:
    """Just enough of a flatbuffer reader for Arrow's Message tables."""

    def __init__(self, buf: bytes):
        self.buf = buf

    def u32(self, p: int) -> int:
        return int.from_bytes(self.buf[p:p + 4], "little")

    def field(self, table: int, i: int) -> int | None:
        """Absolute position of field ``i`` of the table at ``table``, None if absent."""
        vt = table - int.from_bytes(self.buf[table:table + 4], "little", signed=True)
        if not 0 <= vt < len(self.buf) - 4:
            raise IntegrityError("the record batch metadata is malformed")
        vsize = int.from_bytes(self.buf[vt:vt + 2], "little")
        if 4 + 2 * i + 2 > vsize:
            return None
        slot = int.from_bytes(self.buf[vt + 4 + 2 * i:vt + 6 + 2 * i], "little")
        return table + slot if slot else None

    def deref(self, p: int) -> int:
        q = p + self.u32(p)
        if not 0 <= q < len(self.buf):
            raise IntegrityError("the record batch metadata points outside itself")
        return q

    def vector(self, p: int) -> tuple[int, int]:
        v = self.deref(p)
        return v + 4, self.u32(v)

    def i64(self, p: int | None) -> int:
        return 0 if p is None else int.from_bytes(self.buf[p:p + 8], "little", signed=True)

    def structs(self, p: int | None) -> np.ndarray:
        if p is None:
            return np.zeros((0, 2), np.int64)
        start, n = self.vector(p)
        if start + 16 * n > len(self.buf):
            raise IntegrityError("the record batch metadata runs past its end")
        return np.frombuffer(self.buf, dtype="<i8", count=2 * n, offset=start).reshape(n, 2)

    def bytes_of(self, p: int) -> bytes:
        start, n = self.vector(p)
        return self.buf[start:start + n]


def parse_message(meta: bytes) -> Message:
    """Parse an encapsulated record batch message's metadata (continuation, length, flatbuffer).

    Metadata that does not parse is an IntegrityError, whatever is wrong with it."""
    try:
        return _parse_message(meta)
    except (IndexError, ValueError, OverflowError) as exc:
        raise IntegrityError(f"the record batch metadata is malformed: {exc}") from exc


def _parse_message(meta: bytes) -> Message:
    if len(meta) < 16 or meta[:4] != b"\xff\xff\xff\xff":
        raise IntegrityError("not a record batch message")
    fb = _Flat(bytes(meta[8:8 + int.from_bytes(meta[4:8], "little", signed=True)]))
    root = fb.u32(0)
    kind = fb.field(root, 1)
    if kind is None or fb.buf[kind] != _HEADER_RECORD_BATCH or (head := fb.field(root, 2)) is None:
        raise IntegrityError("the message is not a record batch")
    rb = fb.deref(head)
    table = None
    custom = fb.field(root, 4)
    if custom is not None:
        start, n = fb.vector(custom)
        for k in range(n):
            kv = fb.deref(start + 4 * k)
            key, value = fb.field(kv, 0), fb.field(kv, 1)
            if key is not None and value is not None and fb.bytes_of(key) == CRC_KEY:
                raw = fb.bytes_of(value)
                table = np.frombuffer(raw, dtype="<u4", count=len(raw) // 4)
    codec = None
    if (compression := fb.field(rb, 3)) is not None:
        kind = fb.field(fb.deref(compression), 0)  # BodyCompression.codec: LZ4_FRAME (0, the default), ZSTD (1)
        codec = "zstd" if kind is not None and fb.buf[kind] == 1 else "lz4"
    return Message(length=fb.i64(fb.field(rb, 0)), nodes=fb.structs(fb.field(rb, 1)),
                   buffers=fb.structs(fb.field(rb, 2)), compressed=codec is not None,
                   body_length=fb.i64(fb.field(root, 3)), table=table, codec=codec)


@dataclass
class Node:
    """One array of the batch: its IPC field node, its buffers and its children."""

    type: pa.DataType
    buffers: list[int]
    children: list[Node] = field(default_factory=list)
    name: str = ""
    index: int = 0  # its field node in the message


# the node trees of live schemas: readers ask once per record batch and a tree cost ~0.3 ms to build (a tag
# index of 100,000 events has 25 batches); a tree dies with its schema object
_LAYOUTS: dict[int, tuple[weakref.ref[pa.Schema], dict[tuple[int, int], tuple[Node, ...]]]] = {}


def layout(schema: pa.Schema, n_nodes: int, n_buffers: int) -> list[Node]:
    """The node tree of a record batch of ``schema``, buffers numbered as in the message.

    The nodes are shared by every batch of the same schema object: read them, never change them.
    """
    kept = _LAYOUTS.get(id(schema))
    if kept is not None and kept[0]() is schema:
        roots = kept[1].get((n_nodes, n_buffers))
        if roots is not None:
            return list(roots)
    built = _layout(schema, n_nodes, n_buffers)
    if kept is None or kept[0]() is not schema:
        key = id(schema)

        def gone(ref: weakref.ref[pa.Schema], key: int = key) -> None:
            if _LAYOUTS.get(key, (None,))[0] is ref:
                _LAYOUTS.pop(key, None)

        kept = _LAYOUTS[key] = (weakref.ref(schema, gone), {})
    kept[1][(n_nodes, n_buffers)] = tuple(built)
    return built


def _layout(schema: pa.Schema, n_nodes: int, n_buffers: int) -> list[Node]:
    counters = [0, 0]

    def visit(name: str, t: pa.DataType) -> Node:
        counters[0] += 1
        if pa.types.is_struct(t) or pa.types.is_fixed_size_list(t):
            nb = 1
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            nb = 2
        elif pa.types.is_string(t) or pa.types.is_binary(t):
            nb = 3
        else:
            nb = 2
        node = Node(t, list(range(counters[1], counters[1] + nb)), name=name, index=counters[0] - 1)
        counters[1] += nb
        if pa.types.is_struct(t):
            node.children = [visit(f.name, f.type) for f in t]
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            node.children = [visit("", t.value_type)]
        return node

    roots = [visit(f.name, f.type) for f in schema]
    if counters != [n_nodes, n_buffers]:
        raise IntegrityError(f"the record batch has {n_nodes} field nodes and {n_buffers} buffers, "
                             f"its schema {counters[0]} and {counters[1]}")
    return roots
