"""The Parquet container format, as the registry hands it out: ``parquet``, files ``*.parquet``.

The format of the first giod releases and a per-dataset choice for
data-lake tools: one row group per cluster, written by pyarrow with a page
index and page CRCs (``WriteOptions.parquet_kwargs``). Whole clusters are
read by pyarrow, which verifies the page CRCs; a few rows through the page
reader of this package (:func:`~giod.storage.formats.parquet.rows.read_rows`),
which reads only the pages that hold them. Every column read is validated
(``giod.storage.validation.check_columns``) before it is handed out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from giod.errors import IntegrityError, NotFound, StorageError
from giod.storage.checksum import ChecksummingSink
from giod.storage.formats.base import ContainerFormat, Described, FormatReader, FormatWriter, WrittenFile
from giod.storage.formats.options import WriteOptions
from giod.storage.formats.parquet.rows import read_rows
from giod.storage.kind import Site
from giod.storage.numpyview import numpy_array
from giod.storage.pending import PendingFile
from giod.storage.validation import check_columns

__all__ = ["PARQUET", "ParquetFormat"]

#: pyarrow hands the sink one write per page header and per page (~8 kB): a buffer in Arrow gathers them,
#: so that Python is called once per this many bytes, not thousands of times per container.
SINK_BUFFER = 1 << 20


class _Writer(FormatWriter):
    def __init__(self, pending: PendingFile, schema: pa.Schema, options: WriteOptions,
                 metadata: dict[str, str] | None):
        self._metadata = metadata
        self._sink = ChecksummingSink(pending)
        self._stream = pa.BufferedOutputStream(pa.PythonFile(self._sink, mode="w"), buffer_size=SINK_BUFFER)
        self._writer = pq.ParquetWriter(self._stream, schema, **options.parquet_kwargs(schema))

    def write_cluster(self, table: pa.Table) -> list[int]:
        self._writer.write_table(table, row_group_size=table.num_rows)
        return [table.num_rows]

    def close(self) -> WrittenFile:
        if self._metadata:
            self._writer.add_key_value_metadata(self._metadata)
        self._writer.close()
        self._stream.close()  # the buffered tail goes through the checksum to the file
        return WrittenFile(self._sink.checksum)

    def abort(self) -> None:
        # already failing: whatever closing says, the front discards the file
        with contextlib.suppress(Exception):
            self._writer.close()
        with contextlib.suppress(Exception):
            self._stream.close()


class _Reader(FormatReader):
    def __init__(self, site: Site, path: str, size: int | None, clusters: Sequence[int] | None):
        self._site = site
        self._path = path
        local = site.local_path(path)
        # the batches' identity among those validated: only a size the catalog vouches for, and the file
        # itself (two sites, or two federations in one process, hold different files under one path)
        self._key = (site.name, str(local) if local is not None else getattr(site, "url", ""), path,
                     size) if size is not None else None
        self._source: Any = local if local is not None else site.open(path)
        try:
            self._file = pq.ParquetFile(self._source, page_checksum_verification=True, pre_buffer=True)
            meta = self._file.metadata
            found = tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
        except ValueError as exc:  # column names that are no UTF-8
            raise IntegrityError(f"container {path} on site {site.name} is unreadable: {exc}") from exc
        if clusters is not None and found != tuple(clusters):
            raise IntegrityError(f"container {path} on site {site.name}: row groups of {found} events, the "
                                 f"catalog recorded {tuple(clusters)}")

    @property
    def schema(self) -> pa.Schema:
        return self._file.schema_arrow

    @property
    def num_clusters(self) -> int:
        return int(self._file.num_row_groups)

    def _where(self, row_groups: Sequence[int] | None = None) -> str:
        groups = "" if row_groups is None else f", row groups {', '.join(map(str, row_groups))}"
        return f"container {self._path} on site {self._site.name}{groups}"

    def read(self, columns: Sequence[str] | None, clusters: Sequence[int] | None) -> pa.Table:
        names = list(columns) if columns is not None else None
        if names is not None:  # as Arrow files answer: pyarrow would leave an unknown column out
            missing = [n for n in dict.fromkeys(c.partition(".")[0] for c in names) if n not in self.schema.names]
            if missing:
                raise NotFound(f"no column {missing[0]!r} in the container (it has {', '.join(self.schema.names)})")
        if clusters is None:
            table = self._file.read(columns=names)
        else:
            table = self._file.read_row_groups(list(clusters), columns=names)
        rows = int(self.cluster_starts()[-1]) if clusters is None else int(
            sum(self._file.metadata.row_group(i).num_rows for i in clusters))
        if table.num_rows != rows:  # a page's header can claim fewer values than its row group has rows
            raise IntegrityError(f"{self._where(clusters)} is corrupt: {table.num_rows} rows decoded of {rows}")
        key = None if self._key is None else (*self._key, None if clusters is None else tuple(clusters))
        check_columns(zip(table.column_names, table.columns, strict=True), self._where(clusters), key)
        return table

    def read_rows(self, columns: Sequence[str] | None, rows: np.ndarray) -> pa.Table:
        """Only the pages holding ``rows``; whole clusters for a file without a page index."""
        local = self._site.local_path(self._path)
        try:
            if local is not None:
                table = read_rows(local, columns, rows, metadata=self._file.metadata)
            else:
                with self._site.open(self._path) as fh:
                    table = read_rows(fh, columns, rows, metadata=self._file.metadata)
        except IntegrityError:
            raise
        except StorageError:  # no page index: whole clusters
            return self.read(columns, None).take(numpy_array(rows))
        if table.num_rows != len(rows):
            raise IntegrityError(f"{self._where()} is corrupt: {table.num_rows} rows decoded of {len(rows)}")
        check_columns(zip(table.column_names, table.columns, strict=True), self._where())
        return table

    def cluster_starts(self) -> np.ndarray:
        meta = self._file.metadata
        return np.cumsum([0] + [meta.row_group(i).num_rows for i in range(meta.num_row_groups)])

    def close(self) -> None:
        reader = getattr(self._file, "reader", None)
        if reader is not None and hasattr(reader, "close"):
            reader.close()
        if hasattr(self._source, "close"):
            self._source.close()  # a remote file hands its prefetched bytes back


class ParquetFormat(ContainerFormat):
    """Parquet files, one row group per cluster: every giod before catalog level 6 wrote them."""

    name = "parquet"
    suffix = ".parquet"

    def writer(self, pending: PendingFile, path: str, schema: pa.Schema, options: WriteOptions,
               metadata: dict[str, str] | None) -> FormatWriter:
        return _Writer(pending, schema, options, metadata)

    def reader(self, site: Site, path: str, *, size: int | None, clusters: Sequence[int] | None,
               checksums: Sequence[int] | None) -> FormatReader:
        return _Reader(site, path, size, clusters)  # Parquet keeps its own page CRCs

    def describe(self, data: bytes) -> Described:
        try:
            meta = pq.read_metadata(pa.BufferReader(data))
        except (pa.ArrowException, OSError) as exc:
            raise IntegrityError(f"unreadable Parquet footer: {exc}") from exc
        return Described(tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups)))

    def footer_metadata(self, fh: BinaryIO) -> dict[bytes, bytes]:
        return dict(pq.read_metadata(fh).metadata or {})


PARQUET = ParquetFormat()
