"""Some columns of a record batch: only their buffers fetched, decompressed and checked.

pyarrow decodes a record batch message whole, decompressing every buffer of
every column. A read that needs one collection of a container, or one event,
needs only that collection's buffers: the batch's metadata gives every
buffer's offset and length in the body, so :func:`plan_columns` names the
buffers a projection needs and :func:`body_ranges` their byte ranges, which a
remote read fetches and nothing else (a compressed buffer cannot be sliced,
so it is fetched whole). :func:`decode_columns` then decompresses them with
the batch's codec, checks each against its CRC-32C in the batch's checksum
table and builds the arrays from them directly.

The checksum table's layout follows the buffers' uncompressed lengths, and
every buffer of a compressed IPC body starts with its uncompressed length
(-1: stored raw): so the entry of a wanted buffer is found from the 8-byte
length prefixes of the buffers before it, fetched beside the wanted ones in
the same requests (never those after the last wanted buffer). A memory map
reads every prefix, which also checks the whole table's length.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from giod.errors import IntegrityError
from giod.storage.checksum import extend
from giod.storage.formats.arrow.blocks import BLOCK, Message, Node, layout, table_bases
from giod.storage.formats.arrow.structure import buffer_prefixes, check_layout
from giod.storage.validation import check_columns

__all__ = ["ColumnPlan", "body_ranges", "decode_columns", "plan_columns", "read_columns"]

Fetch = Callable[[Sequence[tuple[int, int]]], list[pa.Buffer]]

#: bytes of the uncompressed length that starts every buffer of a compressed body
PREFIX = 8


def _subtree(node: Node) -> list[Node]:
    return [node, *(n for c in node.children for n in _subtree(c))]


@dataclass(frozen=True)
class ColumnPlan:
    """The buffers a projection of one batch needs: ``wanted`` whole, of ``heads`` only the length prefix."""

    names: tuple[str, ...]
    wanted: tuple[int, ...]
    heads: tuple[int, ...]
    every_head: bool  # every buffer's length is known once fetched: the whole table can be checked


def plan_columns(msg: Message, schema: pa.Schema, names: Sequence[str], where: str, *,
                 every_head: bool = False) -> ColumnPlan:
    """The buffers of columns ``names`` (whole) of the batch ``msg`` describes, checked to lie in its body.

    ``every_head``: the length prefixes of all other buffers too (cheap from a memory map), so that the
    whole batch's layout is checked and remembered; otherwise only those before the last wanted buffer.
    """
    roots = {n.name: n for n in layout(schema, len(msg.nodes), len(msg.buffers))}
    spans = msg.buffers
    if len(spans) and (int(spans.min()) < 0 or int((spans[:, 0] + spans[:, 1]).max()) > msg.body_length):
        raise IntegrityError(f"{where}: buffers lie outside the record batch")
    missing = [n for n in names if n not in roots]
    if missing:
        raise IntegrityError(f"{where}: no column {missing[0]!r} in the batch")
    wanted = sorted({b for name in names for node in _subtree(roots[name]) for b in node.buffers if spans[b, 1]})
    heads: list[int] = []
    if msg.codec is not None:
        present = np.flatnonzero(spans[:, 1])
        if (spans[present, 1] < PREFIX).any():
            raise IntegrityError(f"{where}: a compressed buffer shorter than its length prefix")
        last = len(spans) if every_head else (wanted[-1] if wanted else -1)
        chosen = set(wanted)
        heads = [int(b) for b in present if b < last and int(b) not in chosen]
    return ColumnPlan(tuple(names), tuple(wanted), tuple(heads), every_head or msg.codec is None)


def body_ranges(plan: ColumnPlan, msg: Message) -> list[tuple[int, int]]:
    """``[start, stop)`` in the batch's body of what ``plan`` needs: its wanted buffers, then its heads."""
    spans = msg.buffers
    return ([(int(spans[b, 0]), int(spans[b, 0] + spans[b, 1])) for b in plan.wanted]
            + [(int(spans[b, 0]), int(spans[b, 0]) + PREFIX) for b in plan.heads])


def decode_columns(plan: ColumnPlan, msg: Message, schema: pa.Schema, parts: Sequence[pa.Buffer], where: str,
                   key: Hashable | None = None, body: pa.Buffer | None = None) -> pa.Table:
    """The columns of ``plan`` from ``parts`` (the bytes of :func:`body_ranges`), each buffer checked
    against the batch's checksum table before it is used (``key``: what names the batch among those
    checked already, ``giod.storage.validation``; ``body``: the whole body, from a memory map, whose
    length prefixes are then read at once)."""
    assert msg.table is not None
    spans = msg.buffers
    n_want = len(plan.wanted)
    if len(parts) != n_want + len(plan.heads):
        raise IntegrityError(f"{where}: {len(parts)} buffers received for {n_want + len(plan.heads)} asked")
    raw = dict(zip(plan.wanted, parts[:n_want], strict=True))
    if msg.codec is None:
        sizes = np.asarray(spans[:, 1], dtype=np.int64)
        stored_raw = set(plan.wanted)
    elif body is not None and plan.every_head:  # every prefix at hand: one numpy pass, not one call a buffer
        sizes, raw_mask = buffer_prefixes(msg, body, where)
        stored_raw = {b for b in plan.wanted if raw_mask[b]}
    else:
        sizes = np.full(len(spans), -1, dtype=np.int64)
        sizes[spans[:, 1] == 0] = 0
        stored_raw = set()  # buffers the writer left uncompressed (prefix -1: no gain)
        for b, head in [*raw.items(), *zip(plan.heads, parts[n_want:], strict=True)]:
            if len(head) < PREFIX:
                raise IntegrityError(f"{where}: short read of buffer {b}")
            n = int.from_bytes(head.slice(0, PREFIX).to_pybytes(), "little", signed=True)
            if n < -1:
                raise IntegrityError(f"{where}: a compressed buffer claims a negative length")
            if n == -1:
                stored_raw.add(b)
            sizes[b] = int(spans[b, 1]) - PREFIX if n == -1 else n
    # where each buffer's checksums begin: known up to the last buffer whose length is
    known = len(spans) if plan.every_head else (max(plan.wanted) + 1 if plan.wanted else 0)
    if (sizes[:known] < 0).any():
        raise IntegrityError(f"{where}: the length of a buffer before the wanted ones is missing")
    bases = table_bases(sizes[:known], BLOCK)
    if (len(msg.table) != bases[-1]) if plan.every_head else (len(msg.table) < bases[-1]):
        raise IntegrityError(f"{where}: the block checksum table does not match the batch's buffers")
    # lengths and sizes make sense before anything is decompressed (a partial check is not remembered)
    roots = {n.name: n for n in check_layout(schema, msg, sizes, where, key if plan.every_head else None)}
    codec = pa.Codec(msg.codec) if msg.codec is not None else None
    data: dict[int, pa.Buffer | None] = {}
    for b, got in raw.items():
        if len(got) != int(spans[b, 1]):
            raise IntegrityError(f"{where}: short read of buffer {b}")
        if codec is None:
            plain = got
        elif b in stored_raw:
            plain = got.slice(PREFIX)
        else:
            try:
                plain = codec.decompress(got.slice(PREFIX), decompressed_size=int(sizes[b]))
            except (pa.ArrowException, ValueError, OSError) as exc:  # a garbled zstd frame is an OSError
                raise IntegrityError(f"{where}: buffer {b} does not decompress: {exc}") from exc
        if extend(0, np.frombuffer(plain, dtype=np.uint8)) != msg.table[bases[b]]:
            raise IntegrityError(f"{where}: CRC-32C mismatch in buffer {b} (the bytes changed since they were "
                                 "written)")
        data[b] = plain

    def build(node: Node) -> pa.Array:
        length, nulls = (int(x) for x in msg.nodes[node.index])
        # no validity bitmap is None; an empty values or offsets buffer is still a buffer
        buffers = [data.get(node.buffers[0])] + [data.get(b) or pa.py_buffer(b"") for b in node.buffers[1:]]
        return pa.Array.from_buffers(node.type, length, buffers, null_count=nulls,
                                     children=[build(c) for c in node.children] or None)

    names = list(plan.names)
    try:
        arrays = [build(roots[n]) for n in names]
    except (pa.ArrowException, ValueError) as exc:
        raise IntegrityError(f"{where} is corrupt: {exc}") from exc
    check_columns(zip(names, arrays, strict=True), where, key)
    return pa.Table.from_arrays(arrays, schema=pa.schema([schema.field(n) for n in names], metadata=schema.metadata))


def read_columns(schema: pa.Schema, msg: Message, body_start: int, mapped: pa.Buffer | None, fetch: Fetch,
                 names: Sequence[str], where: str, key: Hashable | None = None) -> pa.Table:
    """Columns ``names`` (whole) of the batch whose body starts at ``body_start`` in the file, checked
    (``giod.storage.validation``; ``key`` names the batch among those checked already). From a memory map
    (``mapped``: the body) or, without one, in one call of ``fetch`` (absolute ranges)."""
    assert msg.table is not None
    plan = plan_columns(msg, schema, names, where, every_head=mapped is not None)
    ranges = body_ranges(plan, msg)
    if mapped is not None:
        parts = [mapped.slice(a, b - a) for a, b in ranges]
    else:
        parts = fetch([(body_start + a, body_start + b) for a, b in ranges])
    return decode_columns(plan, msg, schema, parts, where, key, mapped)
