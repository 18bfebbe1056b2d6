"""Columns of many Arrow containers received straight into their joined arrays: one copy fewer.

A dense read of a collection from a far site joins one array per file into one
array per collection: each file's buffers are received into memory of their
own, then copied once more into the joined array, after the last byte has
arrived (fresh pages twice, and a copy the network cannot hide). When the
files' layout is known before their bodies travel (their footers and batch
metadata come first, in one round trip), so is each buffer's place in the
joined array: :func:`gather` allocates the joined arrays once and has the site
write every buffer's bytes straight there (one scatter list per request). List
offsets, a few bytes per event, are received apart and rebased.

Only plain layouts are gathered: uncompressed batches without nulls, of
fixed-width numbers, lists and structs of them (what giod writes for
collections of numbers that do not compress); for anything else :func:`plan`
says None and the files are read the ordinary way. Nothing is trusted: each
batch's metadata was checked against the catalog's CRC-32C by the reader
(:meth:`ArrowContainerReader.layout`), its layout before any length in it is
believed, every buffer's CRC-32C once it has arrived, and each batch's arrays
are validated as the ordinary read validates them, before the joined arrays
are built over the same memory.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from giod.errors import IntegrityError
from giod.storage.checksum import extend
from giod.storage.formats.arrow.blocks import BLOCK, Message, Node, table_bases
from giod.storage.formats.arrow.structure import check_layout
from giod.storage.validation import check_columns

__all__ = ["BatchLayout", "FileLayout", "Gather", "plan"]

#: bytes between two wanted buffers of a file up to which they travel in one request (the gap is received
#: into scratch memory): the padding between one column's buffers, never a buffer of a column not read
GAP = 64
#: ... and when every column of the file is read, where a gap holds only padding and the next batch's metadata
WHOLE_GAP = 256 << 10

#: landed(i, start, stop): bytes [start, stop) of the i-th view of a receive have landed, told in order
Landed = Callable[[int, int, int], None]
#: receive(start, stop, views, landed): the bytes [start, stop) of the file, written into ``views`` in order,
#: ``landed`` told of them as they arrive (in the receiving thread, while they are in the processor's cache)
Receive = Callable[[int, int, list[memoryview], Landed | None], None]


@dataclass(frozen=True)
class BatchLayout:
    """One record batch of a file: its metadata (checked) and where its body starts in the file."""

    msg: Message
    body: int
    where: str
    key: Hashable | None


@dataclass(frozen=True)
class FileLayout:
    """One container file as :func:`plan` needs it: its schema, its batches and how to receive its bytes."""

    schema: pa.Schema
    batches: tuple[BatchLayout, ...]
    receive: Receive
    where: str
    held: int  # the reader holds the file's bytes from here to its end (the tail it opened the file with)
    read_held: Callable[[int, int], bytes | memoryview]  # ... and gives them: copied into place, never asked again


@dataclass
class _Slot:
    """One node of one column across every file: the joined array's length and memory."""

    type: pa.DataType
    width: int  # bytes a value (numbers), of an offset (lists), 0 (structs)
    children: list[_Slot] = field(default_factory=list)
    length: int = 0  # values of all batches so far, then in all
    memory: pa.Buffer | None = None  # the numbers, or the rebased offsets


@dataclass
class _Part:
    """One wanted buffer of one batch: where it lies in the file and where its bytes go."""

    slot: _Slot
    start: int  # in the file
    stop: int
    at: int  # first value in the joined array
    count: int  # values
    buffer: int  # its number in the batch (its checksums)
    values: int = 0  # lists: the values of the batch's child array (its offsets must run from 0 to them)
    landing: memoryview | None = None  # offsets: received apart, rebased once checked
    extra: bytearray | None = None  # buffer bytes beyond the values (their checksum covers them)
    whole: bool = False  # all its bytes come in one request: their CRC-32C is taken as they land
    sums: list[int] = field(default_factory=lambda: [0, 0])  # ... its CRC-32C to the end of each piece so far


def _width(t: pa.DataType) -> int | None:
    """Bytes a value of ``t`` takes, for the types gathered (None: not gathered)."""
    if pa.types.is_struct(t):
        return 0
    if pa.types.is_list(t):
        return 4
    if pa.types.is_large_list(t):
        return 8
    if (pa.types.is_integer(t) or pa.types.is_floating(t)) and t.bit_width % 8 == 0:
        return int(t.bit_width) // 8
    return None


def _slot(t: pa.DataType) -> _Slot | None:
    width = _width(t)
    if width is None:
        return None
    kids = [t.field(i).type for i in range(t.num_fields)] if pa.types.is_struct(t) else (
        [t.value_type] if width and (pa.types.is_list(t) or pa.types.is_large_list(t)) else [])
    children = [_slot(k) for k in kids]
    if any(c is None for c in children):
        return None
    return _Slot(t, width, [c for c in children if c is not None])


def _is_list(slot: _Slot) -> bool:
    return bool(pa.types.is_list(slot.type) or pa.types.is_large_list(slot.type))


class Gather:
    """A planned gather of columns ``names`` from ``files`` (in reading order): :meth:`run` receives and
    returns the joined table."""

    def __init__(self, files: Sequence[FileLayout], names: Sequence[str], schema: pa.Schema):
        self.files = files
        self.names = list(names)
        self.schema = pa.schema([schema.field(n) for n in names], metadata=schema.metadata)
        self.slots: dict[str, _Slot] = {}
        self.rows = 0
        self._parts: list[list[_Part]] = []  # per file, in file order
        self._batches: list[tuple[BatchLayout, dict[str, Node], list[_Part]]] = []

    def _plan(self) -> bool:
        for f in self.names:
            slot = _slot(self.schema.field(f).type)
            if slot is None:
                return False
            self.slots[f] = slot
        for file in self.files:
            parts: list[_Part] = []
            for batch in file.batches:
                msg = batch.msg
                if msg.codec is not None:
                    return False
                sizes = np.asarray(msg.buffers[:, 1], dtype=np.int64)
                # lengths and sizes make sense before any is believed (a crafted length allocates nothing)
                roots = {n.name: n for n in check_layout(file.schema, msg, sizes, batch.where, batch.key)}
                if msg.table is None or len(msg.table) != table_bases(sizes, BLOCK)[-1]:
                    raise IntegrityError(f"{batch.where}: the block checksum table does not match the batch's "
                                         "buffers")
                mine: list[_Part] = []
                nodes: dict[str, Node] = {}
                for name in self.names:
                    node = roots.get(name)
                    if node is None or node.type != self.schema.field(name).type:
                        return False
                    nodes[name] = node
                    if not self._walk(node, self.slots[name], msg, batch, mine):
                        return False
                self.rows += msg.length
                self._batches.append((batch, nodes, mine))
                parts += mine
            self._parts.append(sorted(parts, key=lambda p: p.start))
        return True

    def _walk(self, node: Node, slot: _Slot, msg: Message, batch: BatchLayout, out: list[_Part]) -> bool:
        """The parts of ``node`` and its children in one batch; False for a layout not gathered."""
        length, nulls = (int(x) for x in msg.nodes[node.index])
        if nulls or int(msg.buffers[node.buffers[0], 1]):  # a bitmap does not start on a byte in the joined array
            return False
        if not slot.width and any(int(msg.nodes[c.index][0]) != length for c in node.children):
            return False  # a struct whose fields run past it: its rows would not meet their fields once joined
        at = slot.length
        slot.length += length
        if slot.width:  # numbers, or a list's offsets
            b = node.buffers[1]
            a, n = (int(x) for x in msg.buffers[b])
            lists = _is_list(slot)
            count = (length + 1 if length or n else 0) if lists else length
            if count * slot.width > n:
                raise IntegrityError(f"{batch.where}: buffer {b} holds {n:,} bytes, its {count:,} values need "
                                     f"{count * slot.width:,}")
            values = int(msg.nodes[node.children[0].index][0]) if lists else 0
            out.append(_Part(slot, batch.body + a, batch.body + a + n, at, count, b, values))
        return all(self._walk(c, s, msg, batch, out) for c, s in zip(node.children, slot.children, strict=True))

    def run(self, streams: int, max_request: int) -> pa.Table:
        """Receive every wanted buffer where it belongs (``streams`` requests in flight, each at most
        ``max_request`` bytes), check it, and build the joined columns."""
        for slot in self.slots.values():
            _allocate(slot)
        per_file = [_requests(file, parts, max_request, WHOLE_GAP if set(self.names) >= set(file.schema.names) else GAP)
                    for file, parts in zip(self.files, self._parts, strict=True)]
        n = sum(len(r) for r in per_file)
        batches = iter(self._batches)
        with ThreadPoolExecutor(max_workers=max(1, min(streams, n))) as pool:
            futures = [[pool.submit(file.receive, a, b, [v for v, _ in views], _landed_sums(views))
                        for file, a, b, views in reqs] for reqs in per_file]
            try:
                # each file checked as soon as its bytes are in, in reading order, while later ones arrive
                for file, done in zip(self.files, futures, strict=True):
                    for fut in done:
                        fut.result()
                    for _ in file.batches:
                        self._check(*next(batches))
            except BaseException:
                for fut in [f for done in futures for f in done]:
                    fut.cancel()
                raise
        return self._build()

    def _check(self, batch: BatchLayout, nodes: dict[str, Node], parts: list[_Part]) -> None:
        """One batch's buffers against their checksums, its arrays in full, then its offsets rebased."""
        _check_sums(batch, parts)
        arrays = {name: _batch_array(node, self.slots[name], batch, parts) for name, node in nodes.items()}
        check_columns(arrays.items(), batch.where, batch.key)
        for part in parts:
            if part.landing is not None:
                _rebase(part, batch)

    def _build(self) -> pa.Table:
        try:
            columns = [_joined(self.slots[n]) for n in self.names]
            for column in columns:
                column.validate()  # each batch's were checked in full; this is the join's own shape
            return pa.Table.from_arrays(columns, schema=self.schema)
        except (pa.ArrowException, ValueError) as exc:
            raise IntegrityError(f"{self.files[0].where} and the other files read with it do not join: {exc}") \
                from exc


def plan(files: Sequence[FileLayout], names: Sequence[str], schema: pa.Schema) -> Gather | None:
    """The gather of columns ``names`` (typed as in ``schema``) from ``files``, or None when some batch's
    layout is not one gathered (the ordinary read then)."""
    g = Gather(files, names, schema)
    return g if g._plan() and _fits(g) else None


def _fits(g: Gather) -> bool:
    """Whether every list's joined offsets fit their type (32-bit lists of more than 2**31 values do not)."""
    def ok(slot: _Slot) -> bool:
        if pa.types.is_list(slot.type) and slot.children[0].length >= 2**31:
            return False
        return all(ok(c) for c in slot.children)

    return all(ok(s) for s in g.slots.values())


def _allocate(slot: _Slot) -> None:
    # from the default pool: its large blocks are mapped in huge pages, where 4 KB pages each cost a fault
    if _is_list(slot):
        slot.memory = pa.allocate_buffer((slot.length + 1) * slot.width)
        np.frombuffer(slot.memory, dtype=np.int32 if slot.width == 4 else np.int64, count=1)[:] = 0
    elif slot.width:
        slot.memory = pa.allocate_buffer(slot.length * slot.width)
    for c in slot.children:
        _allocate(c)


#: a view of a request, and the part it brings bytes of (None: a gap), with which of the part's pieces it is
_View = tuple[memoryview, "tuple[_Part, int] | None"]


def _requests(file: FileLayout, parts: list[_Part], max_request: int, gap: int
              ) -> list[tuple[FileLayout, int, int, list[_View]]]:
    """The requests that bring ``parts`` of ``file``: those at most ``gap`` apart together, the gaps into
    scratch memory."""
    out: list[tuple[FileLayout, int, int, list[_View]]] = []
    start = stop = -1
    views: list[_View] = []
    for part in parts:
        if part.start < stop:
            raise IntegrityError(f"{file.where}: two buffers of a record batch overlap")
        pieces = _pieces(part)
        received = _held(file, pieces)
        # its checksum is taken as it lands only when every byte of it is received, in one request
        part.whole = len(received) == len(pieces) and all(r[:2] == p[:2] and r[1] - r[0] <= max_request
                                                           for r, p in zip(received, pieces, strict=True))
        if not part.whole:  # a buffer larger than a request goes in several
            received = [(c, min(b, c + max_request), view[c - a:min(b, c + max_request) - a])
                        for a, b, view in received for c in range(a, b, max(1, max_request))]
        for k, (a, b, view) in enumerate(received):
            if views and (a - stop > gap or b - start > max_request):
                out.append((file, start, stop, views))
                views = []
                part.whole = part.whole and k == 0
            if not views:
                start = stop = a
            if a > stop:
                views.append((memoryview(bytearray(a - stop)), None))
            views.append((view, (part, k)))
            stop = b
    if views:
        out.append((file, start, stop, views))
    return out


def _landed_sums(views: list[_View]) -> Landed:
    """What a request's receive tells as bytes land: each whole part's CRC-32C, extended while its bytes are
    in the cache (its pieces land in order; a retry starts again from the first)."""
    def landed(i: int, start: int, stop: int) -> None:
        view, of = views[i]
        if of is None or not of[0].whole:
            return
        part, k = of
        # a piece's first bytes go on from the end of the one before (all in, in this request)
        sums = part.sums
        sums[k] = extend((sums[0] if k else 0) if start == 0 else sums[k], view[start:stop])

    return landed


def _held(file: FileLayout, pieces: list[tuple[int, int, memoryview]]) -> list[tuple[int, int, memoryview]]:
    """``pieces`` less what the site holds already (copied into place now): bytes never asked for twice."""
    out = []
    for a, b, view in pieces:
        cut = min(b, max(a, file.held))
        if cut < b:
            held = file.read_held(cut, b)
            if len(held) != b - cut:  # a buffer past the end of the file: the footer let it through
                raise IntegrityError(f"{file.where}: bytes {cut}-{b - 1} lie past the end of the file")
            np.frombuffer(view, dtype=np.uint8)[cut - a:] = np.frombuffer(held, dtype=np.uint8)
        if a < cut:
            out.append((a, cut, view[:cut - a]))
    return out


def _pieces(part: _Part) -> list[tuple[int, int, memoryview]]:
    """Where the bytes of ``part`` land: its values in the joined memory (offsets apart), the rest aside."""
    slot = part.slot
    assert slot.memory is not None
    need = part.count * slot.width
    if _is_list(slot):
        part.landing = memoryview(bytearray(need))
        land = part.landing
    else:
        land = memoryview(slot.memory)[part.at * slot.width:part.at * slot.width + need]
    out = [(part.start, part.start + need, land)]
    if part.stop > part.start + need:
        part.extra = bytearray(part.stop - part.start - need)
        out.append((part.start + need, part.stop, memoryview(part.extra)))
    return out


def _landed(part: _Part) -> memoryview:
    slot = part.slot
    assert slot.memory is not None
    if part.landing is not None:
        return part.landing
    return memoryview(slot.memory)[part.at * slot.width:(part.at + part.count) * slot.width]


def _check_sums(batch: BatchLayout, parts: list[_Part]) -> None:
    bases = table_bases(np.asarray(batch.msg.buffers[:, 1], dtype=np.int64), BLOCK)
    assert batch.msg.table is not None  # checked when planned
    for part in parts:
        if part.stop == part.start:
            continue  # as the ordinary read: an empty buffer has nothing to check
        if part.whole:
            crc = part.sums[1 if part.extra is not None else 0]  # taken as its bytes landed
        else:
            crc = extend(0, np.frombuffer(_landed(part), dtype=np.uint8))
            if part.extra is not None:
                crc = extend(crc, np.frombuffer(part.extra, dtype=np.uint8))
        if crc != batch.msg.table[bases[part.buffer]]:
            raise IntegrityError(f"{batch.where}: CRC-32C mismatch in buffer {part.buffer} (the bytes changed "
                                 "since they were written)")


def _batch_array(node: Node, slot: _Slot, batch: BatchLayout, parts: list[_Part]) -> pa.Array:
    """The batch's own array of ``node`` over the memory its bytes landed in (validated by the caller)."""
    by_buffer = {p.buffer: p for p in parts}
    msg = batch.msg

    def build(node: Node, slot: _Slot) -> pa.Array:
        length = int(msg.nodes[node.index][0])
        children = [build(c, s) for c, s in zip(node.children, slot.children, strict=True)]
        if not slot.width:
            return pa.Array.from_buffers(node.type, length, [None], children=children)
        part = by_buffer[node.buffers[1]]
        data = pa.py_buffer(_landed(part))
        return pa.Array.from_buffers(node.type, length, [None, data], children=children or None)

    try:
        return build(node, slot)
    except (pa.ArrowException, ValueError) as exc:
        raise IntegrityError(f"{batch.where} is corrupt: {exc}") from exc


def _rebase(part: _Part, batch: BatchLayout) -> None:
    """A batch's list offsets into the joined offsets, once checked to run from 0 to the batch's last value
    (valid Arrow may start later: such a batch is not joined by offsets alone, it is read the ordinary way)."""
    slot = part.slot
    assert part.landing is not None and slot.memory is not None
    kind = np.int32 if slot.width == 4 else np.int64
    own = np.frombuffer(part.landing, dtype=kind)
    if not len(own):
        return
    if int(own[0]) != 0 or int(own[-1]) != part.values:
        raise IntegrityError(f"{batch.where}: list offsets run from {int(own[0])} to {int(own[-1])}, not over "
                             f"the {part.values} values")
    joined = np.frombuffer(slot.memory, dtype=kind)
    joined[part.at:part.at + len(own)] = own + joined[part.at]


def _joined(slot: _Slot) -> pa.Array:
    children = [_joined(c) for c in slot.children]
    if not slot.width:
        return pa.Array.from_buffers(slot.type, slot.length, [None], children=children)
    return pa.Array.from_buffers(slot.type, slot.length, [None, slot.memory], children=children or None)
