"""Writing Arrow IPC containers: one record batch per cluster, checksummed as the bytes go out.

The writer chooses the codec on the first cluster (``WriteOptions.min_savings``),
writes each batch with its block checksum table (``giod.storage.formats.arrow.blocks``) and
notes the CRC-32C of each batch's metadata message while the bytes pass through
the site's pending file; closing checks that the footer names the very ranges
that were checksummed (docs/storage.md, docs/decisions.md §46, §47).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from giod.errors import StorageError
from giod.storage.checksum import Checksum, ChecksummingSink, extend
from giod.storage.formats.arrow.blocks import BLOCK, CRC_KEY, SCHEMA_KEY, checksummed, has_block_layout
from giod.storage.formats.arrow.frame import crc32c, ipc_options, parse_footer
from giod.storage.pending import PendingFile

__all__ = ["SMALL_FILE_BYTES", "TRIAL_BYTES", "ArrowFileWriter"]

#: uncompressed bytes of the first cluster on which the writer judges its codec
TRIAL_BYTES = 2 << 20
#: uncompressed bytes under which a file of one cluster is written raw without a trial (with ``min_savings``
#: above 0): the trial (the cluster serialised twice, once compressed) costs 0.1-0.3 ms, and what a codec
#: could save on such a file is a few KB, less than the file's own inode and catalog row (docs/decisions.md)
SMALL_FILE_BYTES = 32 << 10


def _ipc_size(batch: pa.RecordBatch, options: ipc.IpcWriteOptions) -> int:
    sink = pa.MockOutputStream()  # counts the bytes, keeps none
    with ipc.new_stream(sink, batch.schema, options=options) as w:
        w.write_batch(batch)
    return int(sink.size())


class _BatchSink(ChecksummingSink):
    """File-like sink for the IPC writer: checksums the whole file and each record batch.

    A record batch message is everything from a mark (``begin``) to the next
    flush; the schema message, written just before the first batch, is
    skipped by reading its length from the bytes that pass. What comes after
    the last batch (the footer) is kept, to check the writer's block table.
    """

    def __init__(self, pending: PendingFile, meta_only: bool = False):
        super().__init__(pending)
        # with block checksums, a batch's CRC covers its metadata message only (docs/decisions.md §46)
        self._meta_only = meta_only
        self._meta = bytearray()
        self.tail = bytearray()  # bytes since the last batch: the footer, once closed
        self._batch: int | None = None  # the batch's CRC while one is written
        self._from = 0  # where the batch starts, once known
        self._head = bytearray()  # the first 16 bytes: magic, padding, the schema message's length

    def begin(self) -> None:
        self._batch = 0
        self._meta = bytearray()
        self._from = self.checksum.size if self.checksum.size else -1  # -1: after the schema message

    def end(self) -> tuple[int, int, int]:
        """(offset, length, CRC-32C) of the batch written since ``begin``."""
        crc, self._batch = self._batch, None
        if self._meta_only:
            crc = crc32c(self._meta[:8 + int.from_bytes(self._meta[4:8], "little", signed=True)])
        self.tail = bytearray()
        return self._from, self.checksum.size - self._from, int(crc or 0)

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        at = self.checksum.size
        if len(self._head) < 16:
            self._head += view[: 16 - len(self._head)]
            if self._from == -1 and len(self._head) == 16:
                # magic (8 bytes), then the schema message: 0xFFFFFFFF, int32 length, metadata
                self._from = 16 + int.from_bytes(self._head[12:16], "little", signed=True)
        if self._batch is not None:
            skip = max(0, self._from - at) if self._from >= 0 else len(view)
            if skip < len(view) and self._meta_only:
                need = (8 if len(self._meta) < 8 else 8 + int.from_bytes(self._meta[4:8], "little")) - len(self._meta)
                while need > 0 and skip < len(view):
                    self._meta += view[skip:skip + need]
                    skip += need
                    need = (8 + int.from_bytes(self._meta[4:8], "little") - len(self._meta)
                            if len(self._meta) >= 8 else 8 - len(self._meta))
            elif skip < len(view):
                self._batch = extend(self._batch, view[skip:])
        else:
            self.tail += view
        return super().write(view)


class ArrowFileWriter:
    """Writes one Arrow IPC container: one record batch per cluster, the CRC-32C of each noted."""

    def __init__(self, pending: PendingFile, path: str, schema: pa.Schema, compression: str, level: int | None,
                 buffer_size: int, min_savings: float = 0.0):
        self.path = path
        ipc_options(compression, level)  # a bad codec fails here, not at the first cluster
        self._codec = (compression, level)
        self._min_savings = min_savings
        # block checksums where every column has a layout read event by event
        self._blocks = has_block_layout(schema)
        if self._blocks:
            schema = schema.with_metadata({**(schema.metadata or {}), SCHEMA_KEY: str(BLOCK).encode()})
        self._sink = _BatchSink(pending, meta_only=self._blocks)
        self._stream = pa.BufferedOutputStream(pa.PythonFile(self._sink, mode="w"), buffer_size=buffer_size)
        self._schema = schema
        self._writer: Any = None  # opened at the first cluster, once the codec is chosen
        #: the codec the file's buffers were written with ("none": raw)
        self.compression = compression
        self.blocks: list[tuple[int, int]] = []
        self.checksums: list[int] = []  # one per record batch, then the footer's (after close)

    @property
    def checksum(self) -> Checksum:
        return self._sink.checksum

    def _open(self, first: pa.RecordBatch | None, compression: str | None = None) -> None:
        """Open the IPC writer with the codec the trial on ``first`` chooses, or ``compression``."""
        chosen, level = self._codec
        compression = chosen if compression is None else compression
        if first is not None and compression != "none" and self._min_savings > 0:
            # the codec stays only where it pays: raw buffers map straight into memory and are read event
            # by event, so a codec must save at least ``min_savings`` of the first cluster's bytes (judged on
            # its first ``TRIAL_BYTES``: the same data, a fraction of the work)
            if first.nbytes > TRIAL_BYTES:
                first = first.slice(0, max(1, first.num_rows * TRIAL_BYTES // first.nbytes))
            raw = _ipc_size(first, ipc_options("none", None))
            # in this thread: a trial of a small cluster costs less than handing its buffers to a pool
            packed = _ipc_size(first, ipc_options(compression, level, threads=False))
            if packed > raw * (1 - self._min_savings):
                compression = "none"
        self.compression = compression
        self._writer = ipc.new_file(self._stream, self._schema, options=ipc_options(compression, level))

    def prepare(self, table: pa.Table, whole: bool = False) -> None:
        """Choose the codec on ``table``, the first cluster, unless it is chosen already. ``whole``: no
        cluster follows ``table``."""
        if self._writer is None:
            compression = self._codec[0]
            if whole and compression != "none" and self._min_savings > 0 and table.nbytes < SMALL_FILE_BYTES:
                self._open(None, compression="none")  # a small file of one cluster: raw, no trial
                return
            if table.nbytes > TRIAL_BYTES:  # the trial's share alone is made one batch: not a copy of it all
                table = table.slice(0, max(1, table.num_rows * TRIAL_BYTES // table.nbytes))
            batches = table.combine_chunks().to_batches()
            self._open(batches[0] if batches else None)

    def write_batch(self, table: pa.Table) -> None:
        batches = table.combine_chunks().to_batches()
        if self._writer is None:
            self._open(batches[0] if batches else None)
        self._stream.flush()
        self._sink.begin()
        for b in batches:  # one: every column of a combined table is one chunk
            if self._blocks:
                b, table = checksummed(b)
                self._writer.write_batch(b, custom_metadata={CRC_KEY: table})
            else:
                self._writer.write_batch(b)
        self._stream.flush()
        offset, length, crc = self._sink.end()
        self.blocks.append((offset, length))
        self.checksums.append(crc)

    def close(self) -> None:
        if self._writer is None:
            self._open(None)
        self._writer.close()
        self._stream.close()
        tail = bytes(self._sink.tail)
        n = int.from_bytes(tail[-10:-6], "little")
        # the footer must name the very ranges that were checksummed
        got = [(int(b["offset"]), int(b["meta"]) + int(b["body"])) for b in parse_footer(tail[-10 - n:-10])]
        if got != self.blocks:
            raise StorageError(f"container {self.path}: record batches written at {self.blocks}, "
                               f"the footer says {got}")
        self.checksums.append(crc32c(tail[-10 - n:]))

    def abort(self) -> None:
        for obj in (self._writer, self._stream):
            if obj is None:
                continue
            try:
                obj.close()
            except Exception:  # noqa: BLE001, S110 - already failing: the temporary file goes regardless
                pass
