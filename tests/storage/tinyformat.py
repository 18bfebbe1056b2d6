"""A container format that is not giod's: the smallest one that keeps the promises of a format.

It stands for a third party's format in the tests: registered with
``register_format`` or found through the ``giod.formats`` entry-point group,
it must be usable end to end. A file is ``GIODTINY``, the schema as an IPC
message, then per cluster its events, its length and its record batch as an
IPC message; the catalog records the CRC-32C of every cluster's message and,
last, of the header.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, BinaryIO

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from giod.errors import IntegrityError, NotFound
from giod.storage.checksum import ChecksummingSink
from giod.storage.formats import ContainerFormat, Described, FormatReader, FormatWriter, WriteOptions, WrittenFile
from giod.storage.site import PendingFile, Site
from giod.storage.validation import check_columns

MAGIC = b"GIODTINY"
_HEAD = struct.Struct("<I")
_CLUSTER = struct.Struct("<QQ")  # events, bytes


def _crc(data: Any) -> int:
    return int(google_crc32c.extend(0, np.frombuffer(data, dtype=np.uint8)))


def _parse(data: bytes, where: str) -> tuple[memoryview, list[tuple[int, memoryview]]]:
    """The schema message and each cluster's (events, message), every length checked against the file."""
    view = memoryview(data)
    if bytes(view[:8]) != MAGIC or len(view) < 12:
        raise IntegrityError(f"{where} is no tiny file")
    (n,) = _HEAD.unpack_from(view, 8)
    if 12 + n > len(view):
        raise IntegrityError(f"{where}: the schema runs past the end of the file")
    schema, at, clusters = view[12:12 + n], 12 + n, []
    while at < len(view):
        if at + _CLUSTER.size > len(view):
            raise IntegrityError(f"{where}: a cluster header runs past the end of the file")
        events, length = _CLUSTER.unpack_from(view, at)
        at += _CLUSTER.size
        if length > len(view) - at:
            raise IntegrityError(f"{where}: cluster {len(clusters)} claims {length} bytes past the end of the file")
        clusters.append((events, view[at:at + length]))
        at += length
    return schema, clusters


class _Writer(FormatWriter):
    def __init__(self, pending: PendingFile, schema: pa.Schema, metadata: dict[str, str] | None):
        self._schema = schema.with_metadata({**(schema.metadata or {}), **(metadata or {})})
        self._sink = ChecksummingSink(pending)
        head = self._schema.serialize().to_pybytes()
        self._sink.write(MAGIC + _HEAD.pack(len(head)) + head)
        self._header_crc = _crc(MAGIC + _HEAD.pack(len(head)) + head)
        self._crcs: list[int] = []

    def write_cluster(self, table: pa.Table) -> list[int]:
        batch = table.cast(self._schema).combine_chunks().to_batches()[0]
        message = batch.serialize().to_pybytes()
        self._sink.write(_CLUSTER.pack(batch.num_rows, len(message)) + message)
        self._crcs.append(_crc(message))
        return [batch.num_rows]

    def close(self) -> WrittenFile:
        return WrittenFile(self._sink.checksum, (*self._crcs, self._header_crc))

    def abort(self) -> None:
        pass


class _Reader(FormatReader):
    def __init__(self, site: Site, path: str, checksums: Sequence[int] | None):
        self._where = f"container {path} on site {site.name}"
        with site.open(path) as fh:
            head, self._clusters = _parse(fh.read(), self._where)
        if checksums is not None:
            if len(checksums) != len(self._clusters) + 1:
                raise IntegrityError(f"{self._where} has {len(self._clusters)} clusters, the catalog recorded "
                                     f"{len(checksums) - 1}")
            if _crc(MAGIC + _HEAD.pack(len(head)) + bytes(head)) != checksums[-1]:
                raise IntegrityError(f"{self._where}: CRC-32C mismatch in the header")
        self._checksums = checksums
        self._schema = ipc.read_schema(pa.py_buffer(bytes(head)))

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    @property
    def num_clusters(self) -> int:
        return len(self._clusters)

    def _cluster(self, i: int) -> pa.RecordBatch:
        events, message = self._clusters[i]
        if self._checksums is not None and _crc(message) != self._checksums[i]:
            raise IntegrityError(f"{self._where}, cluster {i}: CRC-32C mismatch")
        batch = ipc.read_record_batch(pa.py_buffer(bytes(message)), self._schema)
        if batch.num_rows != events:
            raise IntegrityError(f"{self._where}, cluster {i}: {batch.num_rows} events, its header says {events}")
        check_columns(zip(batch.schema.names, batch.columns, strict=True), f"{self._where}, cluster {i}")
        return batch

    def read(self, columns: Sequence[str] | None, clusters: Sequence[int] | None) -> pa.Table:
        which = range(len(self._clusters)) if clusters is None else clusters
        table = pa.Table.from_batches([self._cluster(i) for i in which], schema=self._schema)
        if columns is None:
            return table
        names = list(dict.fromkeys(c.partition(".")[0] for c in columns))
        missing = [n for n in names if n not in table.column_names]
        if missing:
            raise NotFound(f"{self._where} has no column {missing[0]!r}")
        if all("." not in c for c in columns):
            return table.select(names)
        from giod.storage.formats.arrow.projection import project  # the rule every format follows

        return project(table, columns)

    def read_rows(self, columns: Sequence[str] | None, rows: np.ndarray) -> pa.Table:
        return self.read(columns, None).take(pa.array(np.asarray(rows, dtype=np.int64)))

    def cluster_starts(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum([e for e, _ in self._clusters], dtype=np.int64)]).astype(np.int64)

    def close(self) -> None:
        self._clusters = []


class TinyFormat(ContainerFormat):
    name = "tiny"
    suffix = ".tiny"

    def writer(self, pending: PendingFile, path: str, schema: pa.Schema, options: WriteOptions,
               metadata: dict[str, str] | None) -> FormatWriter:
        return _Writer(pending, schema, metadata)

    def reader(self, site: Site, path: str, *, size: int | None, clusters: Sequence[int] | None,
               checksums: Sequence[int] | None) -> FormatReader:
        return _Reader(site, path, checksums)

    def describe(self, data: bytes) -> Described:
        head, clusters = _parse(data, "a tiny file")
        header = _crc(MAGIC + _HEAD.pack(len(head)) + bytes(head))
        return Described(tuple(e for e, _ in clusters), (*(_crc(m) for _, m in clusters), header))

    def footer_metadata(self, fh: BinaryIO) -> dict[bytes, bytes]:
        head, _ = _parse(fh.read(), "a tiny file")
        return dict(ipc.read_schema(pa.py_buffer(bytes(head))).metadata or {})


TINY = TinyFormat()
