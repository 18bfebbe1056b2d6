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

__all__ = ["Batch", "Page", "Sealed", "batches", "buffer_of", "encode_sized", "parquet_footer", "parquet_pages",
           "recatalog", "reseal", "reseal_page", "seal", "seal_parquet"]


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


# ------------------------------------------------------------------ Parquet


@dataclass(frozen=True)
class Page:
    """One page of a Parquet column chunk: its header (decoded) and where header and body lie."""

    header: Any  # giod.storage.formats.parquet.thrift.Struct
    at: int  # where the header starts
    size: int  # the header's bytes
    body: int  # where the (compressed) page data start
    length: int  # compressed_page_size, as the header says


def parquet_footer(data: bytes | bytearray) -> tuple[int, int]:
    """Where a Parquet file's footer (FileMetaData) starts, and its length."""
    n = int.from_bytes(bytes(data[-8:-4]), "little")
    return len(data) - 8 - n, n


def parquet_pages(data: bytes | bytearray) -> list[Page]:
    """Every page of every column chunk of a whole Parquet file, as the footer and the page headers say."""
    from giod.storage.formats.parquet.thrift import decode_struct

    start, n = parquet_footer(data)
    meta, _ = decode_struct(bytes(data[start:start + n]))
    raw = bytes(data)
    out = []
    for group in meta.value(4).items:
        for chunk in group.value(1).items:
            cmd = chunk.value(3)
            at = cmd.value(11) or cmd.value(9)
            end = at + cmd.value(7)
            while at < end:
                header, after = decode_struct(raw, at)
                length = header.value(3)
                out.append(Page(header, at, after - at, after, length))
                at = after + length
    return out


def _varint(n: int, size: int) -> bytes:
    """``n`` as a varint of exactly ``size`` bytes (continuation bytes past the canonical ones read as 0)."""
    out = bytearray()
    while True:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
        if n == 0 and len(out) >= size:
            break
    out[-1] &= 0x7F
    return bytes(out)


def encode_sized(s: Any, size: int) -> bytes | None:
    """A page header encoded in exactly ``size`` bytes (its integers' varints padded), or None if it needs
    more: the bytes after it then stay where the footer says they are."""
    from giod.storage.formats.parquet import thrift

    plain = thrift.encode_struct(s)
    extra = size - len(plain)
    if extra < 0:
        return None
    out = bytearray()
    last = 0
    for fid, (ttype, v) in s.items():
        delta = fid - last
        out += bytes([delta << 4 | ttype]) if 0 < delta <= 15 else bytes([ttype]) + _varint(fid << 1, 1)
        last = fid
        if ttype in (thrift.I16, thrift.I32, thrift.I64):
            zz = (v << 1) ^ (v >> 63)
            canonical = len(_varint(zz, 1))
            grow = min(extra, (5 if ttype != thrift.I64 else 10) - canonical)
            out += _varint(zz, canonical + grow)
            extra -= grow
        elif ttype == thrift.STRUCT:
            out += thrift.encode_struct(v)
        else:
            return None
    out.append(0)
    return bytes(out) if extra == 0 else None


def reseal_page(data: bytearray, page: Page, header: Any = None) -> bool:
    """Write ``header`` (default: the page's own) over the page's header with its CRC recomputed from the
    page's bytes as they are now; False when the header no longer fits in its place."""
    import zlib

    from giod.storage.formats.parquet import thrift

    header = page.header if header is None else header
    if header.get(4) is not None:
        length = max(0, header.value(3) or 0)
        crc = zlib.crc32(bytes(data[page.body:page.body + length]))
        header.put(4, thrift.I32, crc - (1 << 32) if crc >= 1 << 31 else crc)
    encoded = encode_sized(header, page.size)
    if encoded is None:
        return False
    data[page.at:page.at + page.size] = encoded
    return True


def seal_parquet(data: bytes | bytearray, fallback: Sealed) -> Sealed:
    """The catalog figures of a Parquet file: its checksum and size, events per row group as its footer
    states them (where it still parses: else ``fallback``'s)."""
    import io

    import pyarrow.parquet as pq

    try:
        md = pq.read_metadata(io.BytesIO(bytes(data)))
        clusters = tuple(md.row_group(i).num_rows for i in range(md.num_row_groups))
    except (pa.ArrowException, OSError, ValueError):
        clusters = fallback.clusters
    return Sealed(f"crc32c:{_crc(data):08x}", len(data), clusters, ())
