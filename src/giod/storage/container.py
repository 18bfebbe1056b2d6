"""Container files: one Parquet file per container of a database.

A container holds one row per event and one column per collection (a list of
structs) or per tag. Each Parquet row group is one *cluster*, the unit of I/O.
Files are written through a site's :class:`~giod.storage.site.PendingFile`, so
the CRC-32C checksum is computed on the bytes as they go out, and the file only
appears under its final name once it is durable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from giod.errors import IntegrityError, NotFound, StorageError
from giod.storage.checksum import Checksum
from giod.storage.site import PendingFile, Site


@dataclass(frozen=True)
class WriteOptions:
    """How container files are encoded (measured choices in docs/storage.md)."""

    compression: str = "zstd"
    compression_level: int | None = 1
    use_dictionary: bool = False  # floats and indices gain nothing from dictionaries
    byte_stream_split: bool = True  # measured: 8 % smaller files, 11 % faster reads, same write rate
    data_page_size: int = 8 << 10  # small pages let sparse selections read little (docs/pages.md)
    page_checksums: bool = True  # lets readers catch a flipped bit in the page they read

    def parquet_kwargs(self, schema: pa.Schema) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(
            compression=self.compression,
            compression_level=self.compression_level if self.compression != "none" else None,
            use_dictionary=self.use_dictionary,
            write_page_index=True,
            write_page_checksum=self.page_checksums,
            data_page_size=self.data_page_size,
            write_statistics=False,
        )
        if self.byte_stream_split:
            kwargs["use_byte_stream_split"] = _float_columns(schema)
        return kwargs


def _float_columns(schema: pa.Schema) -> list[str]:
    out: list[str] = []

    def visit(path: str, t: pa.DataType) -> None:
        if pa.types.is_floating(t):
            out.append(path)
        elif pa.types.is_struct(t):
            for f in t:
                visit(f"{path}.{f.name}", f.type)
        elif pa.types.is_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_large_list(t):
            visit(f"{path}.list.element", t.value_type)

    for f in schema:
        visit(f.name, f.type)
    return out


class _ChecksummingSink:
    """File-like object for pyarrow: checksums and forwards every write."""

    def __init__(self, pending: PendingFile):
        self.pending = pending
        self.checksum = Checksum()
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.checksum.update(view)
        self.pending.write(view)
        return len(view)

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.checksum.size

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


@dataclass(frozen=True)
class WrittenContainer:
    path: str
    checksum: str
    size: int
    cluster_entries: tuple[int, ...]


class ContainerWriter:
    """Writes one container file, one cluster per :meth:`write_cluster` call."""

    def __init__(self, site: Site, path: str, schema: pa.Schema, options: WriteOptions):
        self.path = path
        self.schema = schema
        self._pending = site.create(path)
        self._sink = _ChecksummingSink(self._pending)
        try:
            self._writer = pq.ParquetWriter(self._sink, schema, **options.parquet_kwargs(schema))
        except (pa.ArrowException, OSError) as exc:
            self._pending.discard()
            raise StorageError(f"cannot start container {path}: {exc}") from exc
        self._clusters: list[int] = []

    def write_cluster(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        try:
            self._writer.write_table(table, row_group_size=table.num_rows)
        except (pa.ArrowException, OSError) as exc:
            self.abort()
            raise StorageError(f"cannot write container {self.path}: {exc}") from exc
        self._clusters.append(table.num_rows)

    @property
    def n_events(self) -> int:
        return sum(self._clusters)

    def close(self) -> WrittenContainer:
        """Finish the file, make it durable and publish it under its final name."""
        try:
            self._writer.close()
        except (pa.ArrowException, OSError) as exc:
            self.abort()
            raise StorageError(f"cannot finish container {self.path}: {exc}") from exc
        self._pending.publish()
        return WrittenContainer(
            self.path, self._sink.checksum.hexdigest(), self._sink.checksum.size, tuple(self._clusters)
        )

    def abort(self) -> None:
        # already failing: whatever close() says, the temporary file goes
        with contextlib.suppress(Exception):
            self._writer.close()
        self._pending.discard()


class ContainerReader:
    """Reads columns and clusters of one container file."""

    def __init__(self, site: Site, path: str, *, expected_size: int | None = None):
        self.site = site
        self.path = path
        self._source: Any = None
        local = site.local_path(path)
        try:
            if expected_size is not None:
                actual = site.size(path)
                if actual != expected_size:
                    raise IntegrityError(
                        f"container {path} on site {site.name} has {actual} bytes, "
                        f"the catalog recorded {expected_size}: truncated or replaced"
                    )
            source: Any = local if local is not None else site.open(path)
            self._source = source
            self._file = pq.ParquetFile(source, page_checksum_verification=True, pre_buffer=True)
        except (NotFound, IntegrityError):
            raise
        except FileNotFoundError as exc:
            raise NotFound(f"container {path} is missing on site {site.name}") from exc
        except (pa.ArrowException, OSError) as exc:
            raise IntegrityError(f"container {path} on site {site.name} is unreadable: {exc}") from exc

    @property
    def arrow_schema(self) -> pa.Schema:
        return self._file.schema_arrow

    @property
    def num_row_groups(self) -> int:
        return self._file.num_row_groups

    def read(
        self, columns: Sequence[str] | None = None, row_groups: Sequence[int] | None = None
    ) -> pa.Table:
        """Read ``columns`` (Parquet paths) of the given clusters (all by default)."""
        try:
            if row_groups is None:
                return self._file.read(columns=list(columns) if columns is not None else None)
            return self._file.read_row_groups(
                list(row_groups), columns=list(columns) if columns is not None else None
            )
        except (pa.ArrowException, OSError) as exc:
            raise IntegrityError(f"container {self.path} on site {self.site.name} is corrupt: {exc}") from exc

    def read_rows(self, columns: Sequence[str] | None, rows: np.ndarray) -> pa.Table:
        """Only the given rows, reading only the Parquet pages that hold them.

        Falls back to whole clusters for files without a page index.
        """
        from giod.storage.pages import read_rows

        local = self.site.local_path(self.path)
        try:
            if local is not None:
                return read_rows(local, columns, rows, metadata=self._file.metadata)
            with self.site.open(self.path) as fh:
                return read_rows(fh, columns, rows, metadata=self._file.metadata)
        except IntegrityError:
            raise
        except StorageError:  # no page index: whole clusters
            return self.read(columns).take(pa.array(rows))

    def close(self) -> None:
        reader = getattr(self._file, "reader", None)
        if reader is not None and hasattr(reader, "close"):
            reader.close()
        if self._source is not None and hasattr(self._source, "close"):
            self._source.close()  # a remote file hands its prefetched bytes back
