"""The Arrow IPC container format, as the registry hands it out: ``arrow``, files ``*.arrow``.

One record batch per cluster, with block checksums; the writer keeps its
codec only where it pays and then cuts clusters to about
``WriteOptions.compressed_cluster_bytes``, since a compressed buffer is
decompressed whole to read one event of it. The catalog records the CRC-32C
of every batch's metadata and of the footer (docs/storage.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

from giod.storage.formats.arrow.frame import CODECS, describe
from giod.storage.formats.arrow.gather import FileLayout, plan
from giod.storage.formats.arrow.reader import ArrowContainerReader
from giod.storage.formats.arrow.writer import ArrowFileWriter
from giod.storage.formats.base import (
    ContainerFormat,
    Described,
    FormatReader,
    FormatWriter,
    Gathered,
    WrittenFile,
)
from giod.storage.formats.options import WriteOptions
from giod.storage.kind import Site
from giod.storage.pending import PendingFile

__all__ = ["ARROW", "ArrowFormat"]

#: pyarrow hands the sink one write per buffer: a buffer in Arrow gathers them, so that Python is called
#: once per this many bytes, not thousands of times per container
SINK_BUFFER = 1 << 20


class _Writer(FormatWriter):
    def __init__(self, pending: PendingFile, path: str, schema: pa.Schema, options: WriteOptions,
                 metadata: dict[str, str] | None):
        # Arrow IPC keeps key-value metadata with the schema, which the footer repeats
        schema = schema.with_metadata({**(schema.metadata or {}), **metadata}) if metadata else schema
        self._file = ArrowFileWriter(pending, path, schema, options.compression, options.compression_level,
                                     SINK_BUFFER, options.min_savings)
        self._limit = options.compressed_cluster_bytes
        self._last = False  # no cluster follows the next (``last_cluster_next``)

    def last_cluster_next(self) -> None:
        self._last = True

    def write_cluster(self, table: pa.Table) -> list[int]:
        self._file.prepare(table, whole=self._last)  # the codec is chosen on the first cluster
        written = []
        for part in self._parts(table):
            self._file.write_batch(part)
            written.append(part.num_rows)
        return written

    def _parts(self, table: pa.Table) -> list[pa.Table]:
        """The record batches of a cluster: itself, or compressed slices of about ``compressed_cluster_bytes``."""
        limit = self._limit
        if self._file.compression == "none" or limit is None or table.nbytes <= limit:
            return [table]
        n = min(table.num_rows, -(-table.nbytes // limit))
        cuts = np.linspace(0, table.num_rows, n + 1).astype(np.int64)
        return [table.slice(int(a), int(b - a)) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]

    def close(self) -> WrittenFile:
        self._file.close()
        return WrittenFile(self._file.checksum, tuple(self._file.checksums))

    def abort(self) -> None:
        self._file.abort()


class _Reader(FormatReader):
    def __init__(self, reader: ArrowContainerReader):
        self._reader = reader

    @property
    def schema(self) -> pa.Schema:
        return self._reader.schema

    @property
    def num_clusters(self) -> int:
        return self._reader.num_batches

    def read(self, columns: Sequence[str] | None, clusters: Sequence[int] | None) -> pa.Table:
        return self._reader.read(columns, clusters)  # every batch is checked as it is decoded

    def read_rows(self, columns: Sequence[str] | None, rows: np.ndarray) -> pa.Table:
        return self._reader.read_rows(columns, rows)

    def cluster_starts(self) -> np.ndarray:
        return self._reader.batch_rows()

    def layout(self) -> Any:
        return self._reader.layout()

    def refresh(self) -> bool:
        return self._reader.refresh()

    def close(self) -> None:
        self._reader.close()


class ArrowFormat(ContainerFormat):
    """Arrow IPC files, the default format since catalog level 6."""

    name = "arrow"
    suffix = ".arrow"
    codecs = CODECS

    def writer(self, pending: PendingFile, path: str, schema: pa.Schema, options: WriteOptions,
               metadata: dict[str, str] | None) -> FormatWriter:
        return _Writer(pending, path, schema, options, metadata)

    def reader(self, site: Site, path: str, *, size: int | None, clusters: Sequence[int] | None,
               checksums: Sequence[int] | None) -> FormatReader:
        return _Reader(ArrowContainerReader(site, path, size=size if size is not None else site.size(path),
                                            clusters=clusters, checksums=checksums))

    def gather(self, layouts: Sequence[Any], names: Sequence[str], schema: pa.Schema) -> Gathered | None:
        if any(not isinstance(f, FileLayout) for f in layouts):
            return None
        return plan(layouts, names, schema)

    def describe(self, data: bytes) -> Described:
        clusters, checksums = describe(data)
        return Described(clusters, checksums)

    def footer_metadata(self, fh: BinaryIO) -> dict[bytes, bytes]:
        return dict(pa.ipc.open_file(fh).schema.metadata or {})


ARROW = ArrowFormat()
