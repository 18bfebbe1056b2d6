"""The frame of an Arrow IPC file: magic, footer and its block table; the codecs and CRC-32C both sides use.

An Arrow IPC file starts and ends with ``ARROW1``; before the last magic
stand the footer (a flatbuffer) and its length. The footer's block table
gives the offset and the metadata and body lengths of every record batch,
which is what lets the reader (``giod.storage.formats.arrow.reader``) fetch
one batch alone and the writer (``...arrow.writer``) check that it
checksummed the very ranges the footer names.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from giod.errors import IntegrityError, StorageError
from giod.storage.checksum import extend
from giod.storage.formats.arrow.blocks import SCHEMA_KEY, parse_message

__all__ = ["CODECS", "MAGIC", "crc32c", "describe", "ipc_options", "parse_footer", "schema_of"]

MAGIC = b"ARROW1"
#: codecs an Arrow IPC file can carry per buffer ("none": raw)
CODECS = ("zstd", "lz4", "none")
_BLOCK = np.dtype([("offset", "<i8"), ("meta", "<i4"), ("pad", "<i4"), ("body", "<i8")])


def crc32c(data: Any) -> int:
    """CRC-32C of a buffer, without copying it (a large one without holding Python's lock)."""
    return extend(0, data)


def ipc_options(compression: str, level: int | None, threads: bool = True) -> ipc.IpcWriteOptions:
    """The IPC writer's options for ``compression`` (one of :data:`CODECS`; StorageError otherwise);
    ``threads``: buffers compressed side by side in Arrow's thread pool."""
    if compression not in CODECS:
        raise StorageError(f"Arrow containers take compression {', '.join(CODECS)}, not {compression!r}")
    if compression == "none":
        return ipc.IpcWriteOptions(compression=None)
    return ipc.IpcWriteOptions(compression=pa.Codec(compression, level if compression == "zstd" else None),
                               use_threads=threads)


def parse_footer(footer: bytes | memoryview) -> np.ndarray:
    """The record-batch blocks (offset, metadata length, body length) of an IPC footer (a flatbuffer)."""
    buf = memoryview(footer)

    def u32(p: int) -> int:
        return int.from_bytes(buf[p:p + 4], "little")

    def u16(p: int) -> int:
        return int.from_bytes(buf[p:p + 2], "little")

    if len(buf) < 8:
        raise IntegrityError("the Arrow footer is too short")
    table = u32(0)
    vtable = table - int.from_bytes(buf[table:table + 4], "little", signed=True)
    if not (0 <= table < len(buf) and 0 <= vtable < len(buf)):
        raise IntegrityError("the Arrow footer is malformed")
    field = 3  # Footer: version, schema, dictionaries, recordBatches, custom_metadata
    if 4 + 2 * field >= u16(vtable) or (slot := u16(vtable + 4 + 2 * field)) == 0:
        return np.zeros(0, dtype=_BLOCK)
    vec = table + slot + u32(table + slot)
    n = u32(vec)
    if vec + 4 + n * _BLOCK.itemsize > len(buf):
        raise IntegrityError("the Arrow footer's block table runs past its end")
    return np.frombuffer(buf, dtype=_BLOCK, count=n, offset=vec + 4)


def describe(data: bytes | memoryview) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Events of each record batch, and the CRC-32C of each batch then of the footer, of a whole
    Arrow container's bytes: what a writer registers, found again from the file alone.

    Only the footer and the batches' metadata are read, nothing is decompressed or decoded: a file
    that makes no sense is an IntegrityError, found when it is read.
    """
    buf = memoryview(data)
    n = int.from_bytes(bytes(buf[-10:-6]), "little", signed=True)
    if bytes(buf[-6:]) != MAGIC or not 0 < n <= len(buf) - 18:
        raise IntegrityError("not a whole Arrow file")
    footer = buf[len(buf) - 10 - n:len(buf) - 10]
    blocks = parse_footer(footer)
    try:
        meta_only = SCHEMA_KEY in (schema_of(footer).metadata or {})
    except (pa.ArrowException, ValueError) as exc:
        raise IntegrityError(f"unreadable Arrow footer: {exc}") from exc
    events, crcs = [], []
    for i, b in enumerate(blocks):
        at, meta, body = int(b["offset"]), int(b["meta"]), int(b["body"])
        if not (8 <= at and 0 <= meta and 0 <= body and at + meta + body <= len(buf) - 10 - n):
            raise IntegrityError(f"record batch {i} lies outside the file")
        length = parse_message(bytes(buf[at:at + meta])).length
        if length < 0:
            raise IntegrityError(f"record batch {i} claims {length} events")
        events.append(length)
        crcs.append(crc32c(buf[at:at + meta + (0 if meta_only else body)]))
    return tuple(events), (*crcs, crc32c(buf[len(buf) - 10 - n:]))


def schema_of(footer: bytes | memoryview) -> pa.Schema:
    """The schema an IPC footer holds; IntegrityError when pyarrow cannot read it, whatever its complaint
    (a footer whose flatbuffer fails pyarrow's verification is an OSError, not an ArrowException)."""
    # pyarrow finds the schema in a footer alone: give it the footer between the two magics
    n = len(footer).to_bytes(4, "little")
    shell = pa.py_buffer(MAGIC + b"\0\0" + bytes(footer) + n + MAGIC)
    try:
        return ipc.open_file(pa.BufferReader(shell)).schema
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise IntegrityError(f"unreadable Arrow footer: {exc}") from exc
