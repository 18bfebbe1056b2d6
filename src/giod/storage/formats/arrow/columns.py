"""Some columns of a compressed record batch: only their buffers fetched, decompressed and checked.

pyarrow decodes a record batch message whole, decompressing every buffer of
every column. A read that needs one collection of a container, or one event,
needs only that collection's buffers: each is fetched whole (a compressed
buffer cannot be sliced), decompressed with the batch's codec, checked
against its CRC-32C in the batch's checksum table, and the arrays are built
from them directly. Every buffer of a compressed IPC body starts with its
uncompressed length (-1: stored raw); the table's layout follows those
lengths, so the 8-byte prefixes of all buffers are read first.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import google_crc32c
import numpy as np
import pyarrow as pa

from giod.errors import IntegrityError
from giod.storage.formats.arrow.blocks import BLOCK, Message, Node, layout, table_bases
from giod.storage.formats.arrow.structure import check_layout
from giod.storage.validation import check_columns

__all__ = ["read_columns"]

Fetch = Callable[[Sequence[tuple[int, int]]], list[pa.Buffer]]


def _subtree(node: Node) -> list[Node]:
    return [node, *(n for c in node.children for n in _subtree(c))]


def read_columns(schema: pa.Schema, msg: Message, body_start: int, mapped: pa.Buffer | None, fetch: Fetch,
                 names: Sequence[str], where: str, key: Hashable | None = None) -> pa.Table:
    """Columns ``names`` (whole) of the batch whose body starts at ``body_start`` in the file, checked
    (``giod.storage.validation``; ``key`` names the batch among those checked already)."""
    assert msg.codec is not None and msg.table is not None
    layout(schema, len(msg.nodes), len(msg.buffers))
    spans = msg.buffers
    # before the prefixes are fetched: check_layout, which says the same, needs their sizes
    if len(spans) and (int(spans.min()) < 0 or int((spans[:, 0] + spans[:, 1]).max()) > msg.body_length):
        raise IntegrityError(f"{where}: buffers lie outside the record batch")

    def get(ranges: list[tuple[int, int]]) -> list[pa.Buffer]:
        if mapped is not None:
            return [mapped.slice(a, b - a) for a, b in ranges]
        return fetch([(body_start + a, body_start + b) for a, b in ranges])

    present = [int(b) for b in np.flatnonzero(spans[:, 1] >= 8)]
    if len(present) != int(np.count_nonzero(spans[:, 1])):
        raise IntegrityError(f"{where}: a compressed buffer shorter than its length prefix")
    sizes = np.zeros(len(spans), dtype=np.int64)
    stored_raw: set[int] = set()  # buffers the writer left uncompressed (prefix -1: no gain)
    for b, head in zip(present, get([(int(spans[b, 0]), int(spans[b, 0]) + 8) for b in present]), strict=True):
        n = int.from_bytes(head.to_pybytes(), "little", signed=True)
        if n == -1:
            stored_raw.add(b)
        sizes[b] = int(spans[b, 1]) - 8 if n == -1 else n
    bases = table_bases(sizes, BLOCK)
    if len(msg.table) != bases[-1] or (sizes < 0).any():
        raise IntegrityError(f"{where}: the block checksum table does not match the batch's buffers")
    # lengths and sizes make sense before anything is decompressed
    roots = {n.name: n for n in check_layout(schema, msg, sizes, where, key)}
    nodes = [n for name in names for n in _subtree(roots[name])]
    wanted = sorted({b for n in nodes for b in n.buffers if spans[b, 1]})
    codec = pa.Codec(msg.codec)
    data: dict[int, pa.Buffer | None] = {}
    for b, raw in zip(wanted, get([(int(spans[b, 0]), int(spans[b, 0] + spans[b, 1])) for b in wanted]),
                      strict=True):
        try:
            plain = raw.slice(8) if b in stored_raw else codec.decompress(raw.slice(8),
                                                                          decompressed_size=int(sizes[b]))
        except (pa.ArrowException, ValueError) as exc:
            raise IntegrityError(f"{where}: buffer {b} does not decompress: {exc}") from exc
        if google_crc32c.extend(0, np.frombuffer(plain, dtype=np.uint8)) != msg.table[bases[b]]:
            raise IntegrityError(f"{where}: CRC-32C mismatch in buffer {b} (the bytes changed since they were "
                                 "written)")
        data[b] = plain

    def build(node: Node) -> pa.Array:
        length, nulls = (int(x) for x in msg.nodes[node.index])
        # no validity bitmap is None; an empty values or offsets buffer is still a buffer
        buffers = [data.get(node.buffers[0])] + [data.get(b) or pa.py_buffer(b"") for b in node.buffers[1:]]
        return pa.Array.from_buffers(node.type, length, buffers, null_count=nulls,
                                     children=[build(c) for c in node.children] or None)

    try:
        arrays = [build(roots[n]) for n in names]
    except (pa.ArrowException, ValueError) as exc:
        raise IntegrityError(f"{where} is corrupt: {exc}") from exc
    check_columns(zip(names, arrays, strict=True), where, key)
    return pa.Table.from_arrays(arrays, schema=pa.schema([schema.field(n) for n in names], metadata=schema.metadata))
