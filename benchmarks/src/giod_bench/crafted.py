"""Crafted Arrow containers: bytes changed as a malicious or buggy peer would, every checksum made consistent.

A checksum proves transport, not validity: whoever writes a file can recompute
the block checksums in each record batch's metadata, the CRC-32C of each
batch's metadata and of the footer, and the file's checksum, and register
them. :func:`reseal` does exactly that after a change of the bytes;
:func:`recatalog` writes the new figures into a local federation's catalog.
The fuzzer (``giod_bench.fuzz``, ``giod bench fuzz``) and the tests of the
trust boundary build their damage with these.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import google_crc32c
import numpy as np
import pyarrow as pa

from giod.errors import GiodError
from giod.storage.formats.arrow import MAGIC, parse_footer
from giod.storage.formats.arrow.blocks import BLOCK, Message, Node, layout, parse_message

__all__ = ["Batch", "Sealed", "batches", "buffer_of", "recatalog", "reseal", "seal"]


def _crc(data: Any) -> int:
    return int(google_crc32c.extend(0, np.frombuffer(data, dtype=np.uint8)))


@dataclass(frozen=True)
class Batch:
    """One record batch of a file: where its message starts, its metadata's length, and the message."""

    offset: int
    meta: int
    msg: Message

    @property
    def body(self) -> int:
        return self.offset + self.meta


def _footer(data: bytes | bytearray) -> tuple[int, memoryview]:
    n = int.from_bytes(bytes(data[-10:-6]), "little", signed=True)
    return n, memoryview(data)[len(data) - 10 - n:len(data) - 10]


def batches(data: bytes | bytearray) -> list[Batch]:
    """The record batches of a whole Arrow container's bytes."""
    _, footer = _footer(data)
    out = []
    for b in parse_footer(bytes(footer)):
        at, meta = int(b["offset"]), int(b["meta"])
        out.append(Batch(at, meta, parse_message(bytes(data[at:at + meta]))))
    return out


def buffer_of(data: bytearray, batch: Batch, buffer: int) -> np.ndarray:
    """A writable view of one (uncompressed) buffer of ``batch`` in ``data``."""
    off, length = (int(x) for x in batch.msg.buffers[buffer])
    return np.frombuffer(memoryview(data)[batch.body + off:batch.body + off + length], dtype=np.uint8)


def nodes(schema: pa.Schema, batch: Batch) -> list[Node]:
    """Every array node of ``batch``, roots and descendants, depth first."""
    out: list[Node] = []

    def walk(node: Node) -> None:
        out.append(node)
        for c in node.children:
            walk(c)

    for root in layout(schema, len(batch.msg.nodes), len(batch.msg.buffers)):
        walk(root)
    return out


def _block_table(buffers: list[bytes]) -> bytes:
    out: list[int] = []
    for data in buffers:
        out.append(_crc(data))
        out.extend(_crc(data[i:i + BLOCK]) for i in range(0, len(data), BLOCK))
    return np.asarray(out, dtype="<u4").tobytes()


def _plain_buffers(data: bytearray, batch: Batch) -> list[bytes] | None:
    """The uncompressed bytes of each buffer of ``batch`` (None when a compressed one does not decompress)."""
    msg = batch.msg
    out = []
    for off, length in msg.buffers.tolist():
        raw = bytes(data[batch.body + off:batch.body + off + length])
        if msg.codec is not None and length:
            n = int.from_bytes(raw[:8], "little", signed=True)
            if n == -1:
                raw = raw[8:]
            else:
                try:
                    if not 0 <= n < 1 << 30:
                        return None
                    raw = pa.Codec(msg.codec).decompress(raw[8:], decompressed_size=n).to_pybytes()
                except (pa.ArrowException, ValueError, OSError):
                    return None
        out.append(raw)
    return out


def reseal(data: bytearray) -> None:
    """Recompute the block checksum table in every batch's metadata from the bytes as they are now."""
    try:
        found = batches(data)
    except (GiodError, ValueError, IndexError):
        return  # a footer or metadata no longer parsed: nothing to seal against
    for batch in found:
        if batch.msg.table is None:
            continue
        plain = _plain_buffers(data, batch)
        if plain is None:
            continue
        old = batch.msg.table.tobytes()
        new = _block_table(plain)
        if len(new) != len(old):
            continue  # the lengths changed: the table cannot say otherwise without moving the metadata
        meta = bytes(data[batch.offset:batch.offset + batch.meta])
        at = meta.find(len(old).to_bytes(4, "little") + old)
        if at >= 0:
            data[batch.offset + at + 4:batch.offset + at + 4 + len(new)] = new


@dataclass(frozen=True)
class Sealed:
    """What a writer registers for a file: its checksum and size, events and CRC-32C per batch, footer CRC."""

    checksum: str
    size: int
    clusters: tuple[int, ...]
    cluster_checksums: tuple[int, ...]


def seal(data: bytes | bytearray, fallback: Sealed | None = None) -> Sealed:
    """The catalog figures of ``data`` as the file itself states them (where it still parses: else
    ``fallback``'s)."""
    n, footer = _footer(data)
    try:
        blocks = parse_footer(bytes(footer)) if bytes(data[-6:]) == MAGIC and 0 < n < len(data) else None
    except GiodError:
        blocks = None
    crcs: list[int] = []
    clusters: list[int] = []
    for i, b in enumerate(blocks if blocks is not None else []):
        at, meta = int(b["offset"]), int(b["meta"])
        if not (0 <= at and meta >= 0 and at + meta <= len(data)):
            crcs.append(fallback.cluster_checksums[i] if fallback and i < len(fallback.cluster_checksums) - 1
                        else 0)
            clusters.append(fallback.clusters[i] if fallback and i < len(fallback.clusters) else 0)
            continue
        crcs.append(_crc(memoryview(data)[at:at + meta]))
        try:
            clusters.append(max(0, parse_message(bytes(data[at:at + meta])).length))
        except (GiodError, ValueError, IndexError):
            clusters.append(fallback.clusters[i] if fallback and i < len(fallback.clusters) else 0)
    if blocks is None and fallback is not None:
        crcs, clusters = list(fallback.cluster_checksums[:-1]), list(fallback.clusters)
    tail = _crc(memoryview(data)[len(data) - 10 - n:]) if 0 < n < len(data) - 10 else 0
    return Sealed(f"crc32c:{_crc(data):08x}", len(data), tuple(clusters), (*crcs, tail))


def recatalog(catalog_url: str, path: str, sealed: Sealed) -> None:
    """Write ``sealed`` into the catalog row of container ``path`` (and the database's event count)."""
    import sqlalchemy as sa

    engine = sa.create_engine(catalog_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE containers SET checksum = :c, size = :s, cluster_entries = :e, "
                                 "cluster_checksums = :k WHERE path = :p"),
                         {"c": sealed.checksum, "s": sealed.size, "e": json.dumps(list(sealed.clusters)),
                          "k": json.dumps(list(sealed.cluster_checksums)), "p": path})
    finally:
        engine.dispose()


def local_file(fed: Any, record: Any) -> str:
    """Where a container record of a local federation lies on disk."""
    for s in fed.catalog.sites():
        if s.id in record.site_ids:
            path = fed.site(s.name).local_path(record.path)
            if path is not None:
                return str(path)
    raise FileNotFoundError(f"no local replica of {record.path}")


def column_buffer(data: bytearray, schema: pa.Schema, batch: int, column: str, buffer: int = 1,
                  dtype: str = "<i4") -> np.ndarray:
    """A writable view of a buffer of one array of a batch: ``column`` is ``jets`` (the list), ``jets.tracks``
    (a member), ``jets.tracks[]`` (the member's items); ``buffer`` 1 is the offsets (or values)."""
    b = batches(data)[batch]
    head, _, rest = column.partition(".")
    found = [n for n in layout(schema, len(b.msg.nodes), len(b.msg.buffers)) if n.name == head][0]
    if rest:
        member, items = rest.rstrip("[]"), rest.endswith("[]")
        found = [c for c in found.children[0].children if c.name == member][0]
        if items:
            found = found.children[0]
    return buffer_of(data, b, found.buffers[buffer]).view(dtype)
