"""Container files: one file per container of a database, Arrow IPC or Parquet.

A container holds one row per event and one column per collection (a list of
structs) or per tag. Each cluster, the unit of I/O, is one record batch of an
Arrow IPC file (the default: no per-value levels to decode, see
``giod.storage.arrowfile``) or one row group of a Parquet file (the format of
the first giod releases, and a per-dataset choice for data-lake tools). Files
are written through a site's :class:`~giod.storage.site.PendingFile`, so the
CRC-32C checksum is computed on the bytes as they go out, and the file only
appears under its final name once it is durable.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from giod.errors import ConfigError, GiodError, IntegrityError, NotFound, StorageError
from giod.storage.arrowfile import ArrowContainerReader
from giod.storage.arrowwriter import ArrowFileWriter
from giod.storage.checksum import ChecksummingSink
from giod.storage.site import Site
from giod.storage.validation import check_columns

#: the container formats giod writes and reads, by the name the catalog records
FORMATS = ("arrow", "parquet")
SUFFIX = {"arrow": ".arrow", "parquet": ".parquet"}


@dataclass(frozen=True)
class WriteOptions:
    """How container files are encoded (measured choices in docs/storage.md).

    ``container_format`` is ``arrow`` (Arrow IPC file) or ``parquet``; the
    Parquet-only settings (dictionary, byte-stream split, pages) leave Arrow
    files alone.
    """

    container_format: str = "arrow"
    compression: str = "zstd"
    compression_level: int | None = 1
    use_dictionary: bool = False  # floats and indices gain nothing from dictionaries
    byte_stream_split: bool = True  # measured: 8 % smaller files, 11 % faster reads, same write rate
    data_page_size: int = 8 << 10  # small pages let sparse selections read little (docs/pages.md)
    page_checksums: bool = True  # lets readers catch a flipped bit in the page they read
    #: Arrow files: the codec is kept only if it saves this share of the first cluster's bytes (docs/decisions.md §47)
    min_savings: float = 0.25
    #: Arrow files whose codec is kept: clusters are cut to about this many uncompressed bytes, since a
    #: compressed buffer is decompressed whole to read one event of it (None: as given)
    compressed_cluster_bytes: int | None = 1 << 20

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


#: pyarrow hands the sink one write per page header and per page (~8 kB): a buffer in Arrow gathers them,
#: so that Python is called once per this many bytes, not thousands of times per container.
_SINK_BUFFER = 1 << 20


@dataclass(frozen=True)
class WrittenContainer:
    path: str
    checksum: str
    size: int
    cluster_entries: tuple[int, ...]
    format: str = "parquet"
    cluster_checksums: tuple[int, ...] = ()  # Arrow files: CRC-32C of each record batch, then of the footer


def check_dataset_format(name: object) -> str | None:
    """A dataset's container format as given at its creation: one of FORMATS, or None (each writer's
    setting); ConfigError otherwise."""
    if name is not None and name not in FORMATS:
        raise ConfigError(f"container_format must be one of {', '.join(FORMATS)}, not {name!r}")
    return name


def check_format(name: str) -> str:
    if name not in FORMATS:
        raise StorageError(f"unknown container format {name!r} (giod writes {', '.join(FORMATS)})")
    return name


#: footer key-value entry where writers record what the catalog needs to register the file again
COMMIT_KEY = "giod.commit"


class ContainerWriter:
    """Writes one container file, one cluster per :meth:`write_cluster` call.

    ``metadata`` goes into the file's footer as key-value entries (strings).
    """

    def __init__(self, site: Site, path: str, schema: pa.Schema, options: WriteOptions,
                 metadata: dict[str, str] | None = None):
        self.path = path
        self.schema = schema
        self._metadata = metadata
        self.format = check_format(options.container_format)
        self._pending = site.create(path)
        self._arrow: ArrowFileWriter | None = None
        self._compressed_cluster = options.compressed_cluster_bytes
        try:
            if self.format == "arrow":
                # Arrow IPC keeps key-value metadata with the schema, which the footer repeats
                schema = schema.with_metadata({**(schema.metadata or {}), **metadata}) if metadata else schema
                self._arrow = ArrowFileWriter(self._pending, path, schema, options.compression,
                                              options.compression_level, _SINK_BUFFER, options.min_savings)
            else:
                self._sink = ChecksummingSink(self._pending)
                self._stream = pa.BufferedOutputStream(pa.PythonFile(self._sink, mode="w"),
                                                       buffer_size=_SINK_BUFFER)
                self._writer = pq.ParquetWriter(self._stream, schema, **options.parquet_kwargs(schema))
        except (pa.ArrowException, OSError, StorageError) as exc:
            self._pending.discard()
            raise StorageError(f"cannot start container {path}: {exc}") from exc
        self._clusters: list[int] = []

    def write_cluster(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        try:
            if self._arrow is not None:
                self._arrow.prepare(table)  # the codec is chosen on the first cluster
                for part in self._parts(table):
                    self._arrow.write_batch(part)
                    self._clusters.append(part.num_rows)
                return
            self._writer.write_table(table, row_group_size=table.num_rows)
        except (pa.ArrowException, OSError, StorageError) as exc:
            self.abort()
            raise StorageError(f"cannot write container {self.path}: {exc}") from exc
        self._clusters.append(table.num_rows)

    def _parts(self, table: pa.Table) -> list[pa.Table]:
        """The record batches of a cluster: itself, or compressed slices of about ``compressed_cluster_bytes``."""
        assert self._arrow is not None
        limit = self._compressed_cluster
        if self._arrow.compression == "none" or limit is None or table.nbytes <= limit:
            return [table]
        n = min(table.num_rows, -(-table.nbytes // limit))
        cuts = np.linspace(0, table.num_rows, n + 1).astype(np.int64)
        return [table.slice(int(a), int(b - a)) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]

    @property
    def n_events(self) -> int:
        return sum(self._clusters)

    def close(self) -> WrittenContainer:
        """Finish the file, make it durable and publish it under its final name."""
        try:
            if self._arrow is not None:
                self._arrow.close()
            else:
                if self._metadata:
                    self._writer.add_key_value_metadata(self._metadata)
                self._writer.close()
                self._stream.close()  # the buffered tail goes through the checksum to the file
        except (pa.ArrowException, OSError, StorageError) as exc:
            self.abort()
            raise StorageError(f"cannot finish container {self.path}: {exc}") from exc
        self._pending.publish()
        if self._arrow is not None:
            whole = self._arrow.checksum
            return WrittenContainer(self.path, whole.hexdigest(), whole.size, tuple(self._clusters), "arrow",
                                    tuple(self._arrow.checksums))
        return WrittenContainer(
            self.path, self._sink.checksum.hexdigest(), self._sink.checksum.size, tuple(self._clusters)
        )

    def abort(self) -> None:
        # already failing: whatever close() says, the temporary file goes
        if self._arrow is not None:
            self._arrow.abort()
        else:
            with contextlib.suppress(Exception):
                self._writer.close()
            with contextlib.suppress(Exception):
                self._stream.close()
        self._pending.discard()


class _ObjectCounts:
    """Objects per event of the collections of container files read in this process.

    A later pass checks its relation indices against the number of objects of
    the target collections in each event (``giod.write.writer``). When those
    collections live in containers that the pass has just read — the raw hits
    of a reconstruction — their list lengths are taken from that read instead
    of reading the containers again. Files never change once published, so a
    file is known by its path and size; a read of some events (a pass reads
    large runs of them) fills those events in. Bounded: least recently used
    files are forgotten first.
    """

    def __init__(self, max_events: int = 1 << 21):
        self.max_events = max_events
        self.clear()

    def remember(self, key: tuple[str, int], n_rows: int, table: pa.Table, rows: np.ndarray | None) -> None:
        """Note the list lengths of ``table``, whose rows are the file's ``rows`` (all of them if None)."""
        if table.num_rows == 0 or n_rows > self.max_events // 4:
            return
        if rows is not None and len(rows) * 64 < n_rows:
            return  # a sparse selection, not a pass over the file: not worth the bookkeeping
        lengths = {}
        for name, column in zip(table.column_names, table.columns, strict=True):
            if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
                parts = [np.diff(chunk.offsets.to_numpy()) for chunk in column.chunks]
                lengths[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if not lengths:
            return
        with self._lock:
            if key not in self._files:
                self._files[key] = (n_rows, {})
                self._events += n_rows
                while self._events > self.max_events and len(self._files) > 1:
                    self._events -= self._files.popitem(last=False)[1][0]
            self._files.move_to_end(key)
            entry = self._files[key][1]
            for name, n in lengths.items():
                if rows is None:
                    entry[name] = (n.astype(np.int32), None)
                    continue
                counts, known = entry.get(name, (np.zeros(n_rows, dtype=np.int32), np.zeros(n_rows, dtype=bool)))
                if known is not None:  # else every event is known already
                    counts[rows] = n
                    known[rows] = True
                    entry[name] = (counts, None if known.all() else known)

    def get(self, key: tuple[str, int], collection: str) -> np.ndarray | None:
        """The counts of every event, or None when some are unknown."""
        with self._lock:
            counts, known = self._files.get(key, (0, {}))[1].get(collection, (None, None))
        return counts if counts is not None and known is None else None

    def clear(self) -> None:
        # also after a fork: another thread of the parent may have held the lock
        self._lock = threading.Lock()
        # (path, size) -> (events in the file, collection -> (counts, which events are known; None: all))
        self._files: OrderedDict[tuple[str, int], tuple[int, dict[str, tuple[np.ndarray, np.ndarray | None]]]] = (
            OrderedDict())
        self._events = 0


_COUNTS = _ObjectCounts()
os.register_at_fork(after_in_child=_COUNTS.clear)


def object_counts(path: str, size: int, collection: str) -> np.ndarray | None:
    """Objects per event (int32) of ``collection`` in the container file ``path`` of ``size`` bytes.

    Known when reads in this process have returned every event of it
    (see :class:`_ObjectCounts`); None otherwise.
    """
    return _COUNTS.get((path, size), collection)


class ContainerReader:
    """Reads columns and clusters of one container file, Arrow IPC or Parquet.

    ``format`` is the one the catalog recorded; ``clusters`` (events per
    cluster) and ``checksums`` (CRC-32C per record batch) let an Arrow file's
    batches be found and checked without reading others.
    """

    def __init__(self, site: Site, path: str, *, expected_size: int | None = None, format: str = "parquet",
                 clusters: Sequence[int] | None = None, checksums: Sequence[int] | None = None):
        self.site = site
        self.path = path
        self.format = format
        self._source: Any = None
        self._arrow: ArrowContainerReader | None = None
        # the file's identity for the object counts: only a size the catalog vouches for
        self._key = (path, expected_size) if expected_size is not None else None
        local = site.local_path(path)
        if format not in FORMATS:
            raise IntegrityError(f"container {path}: unknown format {format!r} (this giod reads "
                                 f"{', '.join(FORMATS)})")
        try:
            if expected_size is not None:
                actual = site.size(path)
                if actual != expected_size:
                    raise IntegrityError(
                        f"container {path} on site {site.name} has {actual} bytes, "
                        f"the catalog recorded {expected_size}: truncated or replaced"
                    )
            if format == "arrow":
                size = expected_size if expected_size is not None else site.size(path)
                self._arrow = ArrowContainerReader(site, path, size=size, clusters=clusters, checksums=checksums)
                return
            source: Any = local if local is not None else site.open(path)
            self._source = source
            self._file = pq.ParquetFile(source, page_checksum_verification=True, pre_buffer=True)
        except (NotFound, IntegrityError):
            raise
        except FileNotFoundError as exc:
            raise NotFound(f"container {path} is missing on site {site.name}") from exc
        except (pa.ArrowException, OSError) as exc:
            raise IntegrityError(f"container {path} on site {site.name} is unreadable: {exc}") from exc

    @classmethod
    def of(cls, site: Site, record: Any) -> ContainerReader:
        """The reader of a catalog's container record (path, size, format, clusters, checksums)."""
        return cls(site, record.path, expected_size=record.size, format=getattr(record, "format", "parquet"),
                   clusters=record.cluster_entries or None,
                   checksums=getattr(record, "cluster_checksums", ()) or None)

    @property
    def arrow_schema(self) -> pa.Schema:
        return self._arrow.schema if self._arrow is not None else self._file.schema_arrow

    @property
    def num_row_groups(self) -> int:
        return self._arrow.num_batches if self._arrow is not None else self._file.num_row_groups

    def read(
        self, columns: Sequence[str] | None = None, row_groups: Sequence[int] | None = None
    ) -> pa.Table:
        """Read ``columns`` (Parquet paths) of the given clusters (all by default)."""
        try:
            if self._arrow is not None:
                table = self._arrow.read(columns, row_groups)
            elif row_groups is None:
                table = self._file.read(columns=list(columns) if columns is not None else None)
            else:
                table = self._file.read_row_groups(
                    list(row_groups), columns=list(columns) if columns is not None else None
                )
        except GiodError:
            raise
        except (pa.ArrowException, OSError) as exc:
            raise IntegrityError(f"container {self.path} on site {self.site.name} is corrupt: {exc}") from exc
        if self._arrow is None:  # Arrow batches are checked as they are decoded; a Parquet file's here
            key = None if self._key is None else (*self._key, None if row_groups is None else tuple(row_groups))
            check_columns(zip(table.column_names, table.columns, strict=True), self._where(row_groups), key)
        self._remember(table, None if row_groups is None else self._group_rows(row_groups))
        return table

    def _where(self, row_groups: Sequence[int] | None = None) -> str:
        groups = "" if row_groups is None else f", row groups {', '.join(map(str, row_groups))}"
        return f"container {self.path} on site {self.site.name}{groups}"

    def _group_rows(self, row_groups: Sequence[int]) -> np.ndarray:
        if self._arrow is not None:
            first = self._arrow.batch_rows()
        else:
            meta = self._file.metadata
            first = np.cumsum([0] + [meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
        return np.concatenate([np.arange(first[g], first[g + 1]) for g in row_groups] or [np.zeros(0, np.int64)])

    def _n_rows(self) -> int:
        return int(self._arrow.batch_rows()[-1]) if self._arrow is not None else self._file.metadata.num_rows

    def _remember(self, table: pa.Table, rows: np.ndarray | None) -> None:
        if self._key is not None:
            _COUNTS.remember(self._key, self._n_rows(), table, rows)

    def read_rows(self, columns: Sequence[str] | None, rows: np.ndarray) -> pa.Table:
        """Only the given rows: for Arrow files only the record batches holding them, for Parquet files
        only the pages holding them.

        Falls back to whole clusters for Parquet files without a page index.
        """
        if self._arrow is not None:
            try:
                table = self._arrow.read_rows(columns, rows)
            except GiodError:
                raise
            except (pa.ArrowException, OSError) as exc:
                raise IntegrityError(f"container {self.path} on site {self.site.name} is corrupt: {exc}") from exc
            self._remember(table, np.asarray(rows))
            return table
        from giod.storage.parquet import read_rows

        local = self.site.local_path(self.path)
        try:
            if local is not None:
                table = read_rows(local, columns, rows, metadata=self._file.metadata)
            else:
                with self.site.open(self.path) as fh:
                    table = read_rows(fh, columns, rows, metadata=self._file.metadata)
        except IntegrityError:
            raise
        except StorageError:  # no page index: whole clusters
            return self.read(columns).take(pa.array(rows))
        check_columns(zip(table.column_names, table.columns, strict=True), self._where())
        self._remember(table, np.asarray(rows))
        return table

    def close(self) -> None:
        if self._arrow is not None:
            self._arrow.close()
            return
        reader = getattr(self._file, "reader", None)
        if reader is not None and hasattr(reader, "close"):
            reader.close()
        if self._source is not None and hasattr(self._source, "close"):
            self._source.close()  # a remote file hands its prefetched bytes back
