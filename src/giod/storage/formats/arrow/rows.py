"""Reading a few events of a record batch: only the bytes that hold them, checked block by block.

An uncompressed record batch lays each buffer out whole in the message
body, so the events ``rows`` of a list column need the offsets at those rows
and then, for each member, the values between them. The reader walks the
columns asked for in waves (a list's children wait for its offsets), fetches
the checksummed blocks (``giod.storage.formats.arrow.blocks``) that cover each wave's
byte ranges in one call, checks them, and hands pyarrow a body in which
only those blocks are filled (a memory-mapped file needs no copy at all).
Unread bytes are never looked at: the arrays are projected and ``take``\\ n
before anything else reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from giod.errors import IntegrityError
from giod.storage.formats.arrow.blocks import BLOCK, Message, Node, crcs_at, table_bases
from giod.storage.formats.arrow.projection import project  # one projection rule for whole and partial reads
from giod.storage.formats.arrow.structure import check_layout
from giod.storage.numpyview import numpy_array
from giod.storage.validation import check_columns

__all__ = ["read_rows"]

Fetch = Callable[[Sequence[tuple[int, int]]], list[pa.Buffer]]


def _expand(first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Every integer of the closed intervals [first, last] (sorted, as the ranges of sorted rows are), once."""
    counts = last - first + 1
    keep = counts > 0
    first, counts = first[keep], counts[keep]
    if not len(first):
        return np.zeros(0, np.int64)
    ends = np.cumsum(counts)
    out = np.repeat(first, counts) + (np.arange(ends[-1]) - np.repeat(ends - counts, counts))
    return np.asarray(out[np.concatenate([[True], out[1:] != out[:-1]])])


class _Body:
    """The body of one record batch: fetched block by block, each block checked once."""

    def __init__(self, msg: Message, meta: pa.Buffer, start: int, mapped: pa.Buffer | None, fetch: Fetch,
                 where: str):
        self.msg, self.where, self.fetch = msg, where, fetch
        self.start = start + len(meta)  # where the body starts in the file
        self.bases = table_bases(msg.buffers[:, 1], BLOCK)
        if msg.table is None or len(msg.table) != self.bases[-1]:
            raise IntegrityError(f"{where}: the block checksum table does not match the batch's buffers")
        if len(msg.buffers) and (int(msg.buffers.min()) < 0
                                 or int((msg.buffers[:, 0] + msg.buffers[:, 1]).max()) > msg.body_length):
            raise IntegrityError(f"{where}: buffers lie outside the record batch")
        if mapped is not None:
            self.data = np.frombuffer(mapped, dtype=np.uint8)
            self.message = mapped
        else:  # only the fetched blocks are filled; the zeros of the rest are never read
            self.data = np.zeros(len(meta) + msg.body_length, dtype=np.uint8)
            self.data[:len(meta)] = np.frombuffer(meta, dtype=np.uint8)
            self.message = pa.py_buffer(self.data)
        self.remote = mapped is None
        self.data = self.data[len(meta):]
        self._checked: dict[int, np.ndarray] = {}  # buffer -> which of its blocks were checked

    def load(self, wanted: dict[int, list[np.ndarray]]) -> None:
        """Fetch and check the blocks covering the byte ranges ``wanted[buffer]`` (arrays of [a, b))."""
        checks = []
        for b, parts in wanted.items():
            ranges = np.concatenate(parts) if len(parts) > 1 else parts[0]
            ranges = ranges[ranges[:, 1] > ranges[:, 0]]
            off, length = (int(x) for x in self.msg.buffers[b])
            if not len(ranges) or not length:
                continue
            if int(ranges[:, 1].max()) > length:
                raise IntegrityError(f"{self.where}: an offset points past the end of buffer {b}")
            blocks = _expand(ranges[:, 0] // BLOCK, (ranges[:, 1] - 1) // BLOCK)
            if len(parts) > 1:
                blocks = np.unique(blocks)
            done = self._checked.setdefault(b, np.zeros(-(-length // BLOCK), dtype=bool))
            blocks = blocks[~done[blocks]]
            done[blocks] = True
            if len(blocks):
                checks.append((b, off, length, blocks))
        if not checks:
            return
        if self.remote:
            a = np.concatenate([off + blocks * BLOCK for _, off, _, blocks in checks])
            n = np.concatenate([np.minimum(BLOCK, length - blocks * BLOCK) for _, _, length, blocks in checks])
            order = np.argsort(a, kind="stable")
            a_s, e_s = a[order], a[order] + n[order]
            cut = np.flatnonzero(a_s[1:] != e_s[:-1]) + 1  # neighbouring blocks travel together
            lo, hi = a_s[np.concatenate([[0], cut])], e_s[np.concatenate([cut - 1, [len(a_s) - 1]])]
            got = self.fetch([(self.start + int(x), self.start + int(y)) for x, y in zip(lo, hi, strict=True)])
            for x, y, data in zip(lo.tolist(), hi.tolist(), got, strict=True):
                if len(data) != y - x:
                    raise IntegrityError(f"{self.where}: short read")
                self.data[x:y] = np.frombuffer(data, dtype=np.uint8)
        table = self.msg.table
        assert table is not None  # checked in __init__
        for b, off, length, blocks in checks:  # a buffer's blocks in one pass, each against its own CRC
            bad = crcs_at(self.data[off:off + length], blocks) != table[self.bases[b] + 1 + blocks]
            if bad.any():
                raise IntegrityError(f"{self.where}: CRC-32C mismatch in block {int(blocks[int(np.argmax(bad))])} "
                                     f"of buffer {b} (the bytes changed since they were written)")

    def offsets(self, b: int, dtype: str, at: np.ndarray) -> np.ndarray:
        off, length = (int(x) for x in self.msg.buffers[b])
        values = np.frombuffer(self.data[off:off + length].data, dtype=dtype)
        if len(at) and int(at.max()) >= len(values):
            raise IntegrityError(f"{self.where}: buffer {b} is shorter than its array")
        return np.asarray(values[at], dtype=np.int64)


Later = list[tuple[Node, np.ndarray, "set[str] | None"]]


def _plan(node: Node, ranges: np.ndarray, msg: Message, wanted: dict[int, list[np.ndarray]], later: Later,
          members: set[str] | None = None) -> None:
    """Note the byte ranges that element ``ranges`` (k, 2) of ``node`` need; lists wait in ``later``."""
    t = node.type
    if msg.buffers[node.buffers[0], 1]:  # a validity bitmap
        wanted.setdefault(node.buffers[0], []).append(np.stack([ranges[:, 0] // 8, (ranges[:, 1] + 7) // 8], 1))
    if pa.types.is_struct(t):
        for child in node.children:
            if members is None or child.name in members:
                _plan(child, ranges, msg, wanted, later)
    elif pa.types.is_fixed_size_list(t):
        _plan(node.children[0], ranges * t.list_size, msg, wanted, later)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_string(t) or pa.types.is_binary(t):
        w = 8 if pa.types.is_large_list(t) else 4
        wanted.setdefault(node.buffers[1], []).append(np.stack([ranges[:, 0] * w, (ranges[:, 1] + 1) * w], 1))
        later.append((node, ranges, members))
    elif pa.types.is_boolean(t):
        wanted.setdefault(node.buffers[1], []).append(np.stack([ranges[:, 0] // 8, (ranges[:, 1] + 7) // 8], 1))
    else:
        w = t.bit_width // 8
        wanted.setdefault(node.buffers[1], []).append(ranges * w)


def _bounds(node: Node, msg: Message) -> int:
    """How far the offsets of a list or string node may reach: its child's length, or its values' bytes."""
    if pa.types.is_string(node.type) or pa.types.is_binary(node.type):
        return int(msg.buffers[node.buffers[2], 1])
    return int(msg.nodes[node.children[0].index, 0])


def _offsets(body: _Body, node: Node, ranges: np.ndarray, msg: Message, where: str) -> np.ndarray:
    """The children's ranges of element ``ranges`` (k, 2) of a list or string ``node``, once every offset
    they span is known to be in order and within the child (nothing is built from the others)."""
    w = "<i8" if pa.types.is_large_list(node.type) else "<i4"
    at = _expand(ranges[:, 0], ranges[:, 1])
    values = body.offsets(node.buffers[1], w, at)
    order = np.argsort(at, kind="stable")
    if len(values) and (int(values.min()) < 0 or int(values.max()) > _bounds(node, msg)
                        or (np.diff(values[order]) < 0).any()):
        raise IntegrityError(f"{where}, column {node.name or node.type}: list offsets out of order or outside "
                             f"their {_bounds(node, msg):,} values")
    return np.stack([body.offsets(node.buffers[1], w, ranges[:, 0]), body.offsets(node.buffers[1], w, ranges[:, 1])],
                    1)


def read_rows(schema: pa.Schema, msg: Message, meta: pa.Buffer, start: int, mapped: pa.Buffer | None,
              fetch: Fetch, rows: np.ndarray, columns: dict[str, set[str] | None], where: str,
              key: Hashable | None = None) -> pa.Table:
    """Rows ``rows`` (sorted, in the batch) of ``columns`` (name -> struct members of its items, None: all).

    ``mapped`` is the whole message (metadata and body) when the file is memory-mapped; otherwise
    ``fetch`` gets the byte ranges (of the file) of the blocks needed. The metadata is checked first,
    then every offset the rows use (``giod.storage.validation``), and the rows read last.
    """
    body = _Body(msg, meta, start, mapped, fetch, where)
    roots = {n.name: n for n in check_layout(schema, msg, np.asarray(msg.buffers[:, 1]), where, key)}
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) and (rows[0] < 0 or rows[-1] >= msg.length):
        raise IntegrityError(f"{where} holds {msg.length} events, not event {rows[-1]}")
    # runs of neighbouring rows are one range
    cut = np.flatnonzero(np.diff(rows) != 1) + 1
    top = np.stack([rows[np.concatenate([[0], cut])], rows[np.concatenate([cut - 1, [len(rows) - 1]])] + 1], 1) \
        if len(rows) else np.zeros((0, 2), np.int64)
    work: Later = [(roots[c], top, m) for c, m in columns.items()]
    while work:
        wanted: dict[int, list[np.ndarray]] = {}
        later: Later = []
        for node, ranges, members in work:
            _plan(node, ranges, msg, wanted, later, members)
        body.load(wanted)
        work = []
        strings: dict[int, list[np.ndarray]] = {}
        for node, ranges, members in later:  # the offsets are in: the children's ranges are known
            child = _offsets(body, node, ranges, msg, where)
            if pa.types.is_string(node.type) or pa.types.is_binary(node.type):
                strings.setdefault(node.buffers[2], []).append(child)
            else:
                work.append((node.children[0], child, members))
        if strings:
            body.load(strings)
    batch = ipc.read_record_batch(ipc.read_message(body.message), schema)
    paths = [c if m is None else f"{c}.list.element.{x}" for c, m in columns.items() for x in (m or [None])]
    table = project(pa.Table.from_batches([batch]), [p for p in paths if p is not None]).take(numpy_array(rows))
    check_columns(zip(table.column_names, table.columns, strict=True), where)  # the few rows, as they came out
    return table
