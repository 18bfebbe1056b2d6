"""Container files: one file per container of a database, in the format the catalog records.

A container holds one row per event and one column per collection (a list of
structs) or per tag. Each cluster, the unit of I/O, is one record batch of an
Arrow IPC file (the default: no per-value levels to decode, see
``giod.storage.formats.arrow``) or one row group of a Parquet file (the
format of the first giod releases, and a per-dataset choice for data-lake
tools, ``giod.storage.formats.parquet``). This module is the front the store
calls: :class:`ContainerWriter` and :class:`ContainerReader` find the format
by its name in the registry (``giod.storage.formats``) and leave the rest to
it. Files are written through a site's :class:`~giod.storage.pending.PendingFile`,
so the CRC-32C checksum is computed on the bytes as they go out, and the
file only appears under its final name once it is durable.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from giod.errors import ConfigError, GiodError, IntegrityError, NotFound, StorageError
from giod.storage.formats import (
    FORMATS,
    SUFFIX,
    ContainerFormat,
    Gathered,
    WriteOptions,
    WrittenContainer,
    find_format,
)
from giod.storage.kind import Site
from giod.storage.numpyview import offsets
from giod.storage.pending import FolderSyncs

__all__ = ["COMMIT_KEY", "FORMATS", "SUFFIX", "ContainerReader", "ContainerWriter", "WriteOptions",
           "WrittenContainer", "check_dataset_format", "check_format", "object_counts"]


def check_dataset_format(name: object) -> str | None:
    """A dataset's container format as given at its creation: a registered format's name, or None (each
    writer's setting); ConfigError otherwise."""
    if name is not None and name not in FORMATS:
        raise ConfigError(f"container_format must be one of {', '.join(FORMATS)}, not {name!r}")
    return name  # type: ignore[return-value]


def check_format(name: str) -> str:
    """``name`` if it is a registered format's; StorageError otherwise."""
    _format_to_write(name)
    return name


def _format_to_write(name: str) -> ContainerFormat:
    fmt = find_format(name)
    if fmt is None:
        raise StorageError(f"unknown container format {name!r} (giod writes {', '.join(FORMATS)})")
    return fmt


#: footer key-value entry where writers record what the catalog needs to register the file again
COMMIT_KEY = "giod.commit"

#: what a format's writer may raise, besides giod's errors: mapped to StorageError, the file discarded
_WRITE_ERRORS = (pa.ArrowException, OSError, StorageError)


class ContainerWriter:
    """Writes one container file, one cluster per :meth:`write_cluster` call.

    ``options.container_format`` names the format; ``metadata`` goes into the
    file's footer as key-value entries (strings).
    """

    def __init__(self, site: Site, path: str, schema: pa.Schema, options: WriteOptions,
                 metadata: dict[str, str] | None = None):
        self.path = path
        self.schema = schema
        fmt = _format_to_write(options.container_format)
        self.format = fmt.name
        self._pending = site.create(path)
        try:
            self._writer = fmt.writer(self._pending, path, schema, options, metadata)
        except _WRITE_ERRORS as exc:
            self._pending.discard()
            raise StorageError(f"cannot start container {path}: {exc}") from exc
        self._clusters: list[int] = []

    def write_cluster(self, table: pa.Table, *, last: bool = False) -> None:
        """Write ``table`` as the next cluster (a format may cut it into several); nothing if it is empty.
        ``last``: no cluster follows (a format may choose its settings knowing the whole file)."""
        if table.num_rows == 0:
            return
        try:
            if last:
                self._writer.last_cluster_next()
            self._clusters += self._writer.write_cluster(table)
        except _WRITE_ERRORS as exc:
            self.abort()
            raise StorageError(f"cannot write container {self.path}: {exc}") from exc

    @property
    def n_events(self) -> int:
        return sum(self._clusters)

    def close(self, folders: FolderSyncs | None = None) -> WrittenContainer:
        """Finish the file, make it durable and publish it under its final name.

        With ``folders``, the fsync of its folder is left to ``folders.sync()``, which must
        come before anything names the file (``giod.storage.pending.FolderSyncs``).
        """
        if folders is not None:
            self._pending.defer_folder_sync(folders)
        try:
            written = self._writer.close()
        except _WRITE_ERRORS as exc:
            self.abort()
            raise StorageError(f"cannot finish container {self.path}: {exc}") from exc
        self._pending.publish()
        whole = written.checksum
        return WrittenContainer(self.path, whole.hexdigest(), whole.size, tuple(self._clusters), self.format,
                                written.cluster_checksums)

    def abort(self) -> None:
        """Give up the file: whatever the format says, the temporary file goes."""
        try:
            self._writer.abort()
        finally:
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
                parts = [np.diff(offsets(chunk)) for chunk in column.chunks]
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


def gather(format: str, layouts: Sequence[Any], names: Sequence[str], schema: pa.Schema) -> Gathered | None:
    """Columns ``names`` of several files of ``format`` (their readers' ``layout()``) read into one table, as
    the format plans it (:meth:`~giod.storage.formats.ContainerFormat.gather`); None: read them one by one."""
    fmt = find_format(format)
    return None if fmt is None or any(f is None for f in layouts) else fmt.gather(layouts, names, schema)


def object_counts(path: str, size: int, collection: str) -> np.ndarray | None:
    """Objects per event (int32) of ``collection`` in the container file ``path`` of ``size`` bytes.

    Known when reads in this process have returned every event of it
    (see :class:`_ObjectCounts`); None otherwise.
    """
    return _COUNTS.get((path, size), collection)


class ContainerReader:
    """Reads columns, clusters and rows of one container file, in the format the catalog recorded.

    ``clusters`` (events per cluster) and ``checksums`` (per-cluster checksums,
    for Arrow files the CRC-32C of each record batch then of the footer) are the
    catalog's; the format checks the file against them.
    """

    def __init__(self, site: Site, path: str, *, expected_size: int | None = None, format: str = "parquet",
                 clusters: Sequence[int] | None = None, checksums: Sequence[int] | None = None):
        self.site = site
        self.path = path
        self.format = format
        # the file's identity for the object counts: only a size the catalog vouches for
        self._key = (path, expected_size) if expected_size is not None else None
        fmt = find_format(format)
        if fmt is None:
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
            self._reader = fmt.reader(site, path, size=expected_size, clusters=clusters, checksums=checksums)
        except (NotFound, IntegrityError):
            raise
        except FileNotFoundError as exc:
            raise NotFound(f"container {path} is missing on site {site.name}") from exc
        except (pa.ArrowException, OSError, ValueError) as exc:  # ValueError: names that are no UTF-8
            raise IntegrityError(f"container {path} on site {site.name} is unreadable: {exc}") from exc

    @classmethod
    def of(cls, site: Site, record: Any) -> ContainerReader:
        """The reader of a catalog's container record (path, size, format, clusters, checksums)."""
        return cls(site, record.path, expected_size=record.size, format=getattr(record, "format", "parquet"),
                   clusters=record.cluster_entries or None,
                   checksums=getattr(record, "cluster_checksums", ()) or None)

    @property
    def arrow_schema(self) -> pa.Schema:
        return self._reader.schema

    @property
    def num_row_groups(self) -> int:
        """The clusters of the file (record batches, row groups)."""
        return self._reader.num_clusters

    def read(
        self, columns: Sequence[str] | None = None, row_groups: Sequence[int] | None = None
    ) -> pa.Table:
        """Read ``columns`` (Parquet paths) of the given clusters (all by default)."""
        try:
            table = self._reader.read(columns, row_groups)
        except GiodError:
            raise
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise IntegrityError(f"container {self.path} on site {self.site.name} is corrupt: {exc}") from exc
        self._remember(table, None if row_groups is None else self._group_rows(row_groups))
        return table

    def read_rows(self, columns: Sequence[str] | None, rows: np.ndarray) -> pa.Table:
        """Only the given rows: for Arrow files only the record batches (and blocks) holding them, for
        Parquet files only the pages holding them (whole clusters for a file without a page index)."""
        try:
            table = self._reader.read_rows(columns, rows)
        except GiodError:
            raise
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise IntegrityError(f"container {self.path} on site {self.site.name} is corrupt: {exc}") from exc
        self._remember(table, np.asarray(rows))
        return table

    def layout(self) -> Any:
        """The file as its format's :meth:`~giod.storage.formats.ContainerFormat.gather` needs it, or None."""
        try:
            return self._reader.layout()
        except GiodError:
            raise
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise IntegrityError(f"container {self.path} on site {self.site.name} is corrupt: {exc}") from exc

    def _group_rows(self, row_groups: Sequence[int]) -> np.ndarray:
        first = self._reader.cluster_starts()
        return np.concatenate([np.arange(first[g], first[g + 1]) for g in row_groups] or [np.zeros(0, np.int64)])

    def _remember(self, table: pa.Table, rows: np.ndarray | None) -> None:
        if self._key is not None:
            _COUNTS.remember(self._key, int(self._reader.cluster_starts()[-1]), table, rows)

    def refresh(self) -> bool:
        """Ready this reader to be kept open after a read (:meth:`FormatReader.refresh`); False when it cannot."""
        return self._reader.refresh()

    def close(self) -> None:
        self._reader.close()
