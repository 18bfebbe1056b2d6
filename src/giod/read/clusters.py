"""Decoded clusters of local container files, kept in the process so that sparse reads only gather.

A sparse read (a narrow selection, ``ds.event(i)``) used to walk, in every
database, the blocks holding its few events: parse the batch's metadata, check
its layout, fetch and check each block, build the arrays, take the rows —
about a millisecond of Python per database and container, repeated on every
read however few events it wanted. Here a cluster (an Arrow record batch) of a
local, memory-mapped container is decoded and checked whole once, through the
container reader like any read, and kept; later reads only gather their rows
from it, the rows of all the databases of a read at once (``gather``: one
numpy indexing per buffer and cluster, one Arrow array per buffer in all). An
uncompressed batch decodes without a copy (its arrays are views of the memory
map), so keeping it costs address space, not memory; what decoding did
allocate (decompressed buffers) is counted against :data:`CACHE_BYTES`, least
recently used dropped first.

The price is the first read of a cluster: it checks and maps the whole
cluster, not only the blocks that hold its rows. Files are immutable under
their path and checksum, which key the cache with the batch and the columns
read. Remote and Parquet containers, and reads in chunks (``iterate``), are
read block by block as before (``ContainerReader.read_rows``).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from giod.catalog.records import ContainerRecord
from giod.errors import IntegrityError

if TYPE_CHECKING:
    from giod.storage.container import ContainerReader
    from giod.storage.site import Site

__all__ = ["CACHE_BYTES", "Piece", "gather", "pieces", "serves"]

#: bytes decoding allocated (decompressed buffers) that kept clusters may hold per process
CACHE_BYTES = 1 << 30

_Key = tuple[str, str, str, int, tuple[str, ...]]
_LOCAL: weakref.WeakKeyDictionary[Site, bool] = weakref.WeakKeyDictionary()  # whether a site's files are local
_KEPT: OrderedDict[_Key, tuple[_Cluster, int]] = OrderedDict()
_HELD = [0]  # allocated bytes of the kept clusters
_LOCK = threading.Lock()


def serves(reader: ContainerReader, container: ContainerRecord) -> bool:
    """Whether reads of ``container`` through ``reader`` gather from kept clusters: a local Arrow file whose
    clusters the catalog lists."""
    if container.format != "arrow" or not container.cluster_entries:
        return False
    local = _LOCAL.get(reader.site)
    if local is None:
        local = _LOCAL[reader.site] = reader.site.local_path(container.path) is not None
    return local


def _ranges(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Every integer of the half-open ranges [starts, stops), in order."""
    lengths = stops - starts
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)


@dataclass(frozen=True)
class _Flat:
    """A column's buffers as numpy arrays, taken apart once when its cluster is kept (None: not flat)."""

    type: pa.DataType
    values: np.ndarray | None = None  # numbers
    offsets: np.ndarray | None = None  # lists: absolute in ``children[0]``
    children: tuple[_Flat, ...] = ()

    @classmethod
    def of(cls, array: pa.Array) -> _Flat | None:
        t = array.type
        if array.null_count:
            return None
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            child = cls.of(array.values)
            return None if child is None else cls(t, offsets=array.offsets.to_numpy().astype(np.int64),
                                                  children=(child,))
        if pa.types.is_struct(t):
            children = [cls.of(c) for c in array.flatten()]
            return None if any(c is None for c in children) else cls(t, children=tuple(children))  # type: ignore[arg-type]
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            return cls(t, values=array.to_numpy(zero_copy_only=True))
        return None

    def gather(self, parts: Sequence[tuple[_Flat, np.ndarray]]) -> pa.Array:
        """``take`` of each (flat, rows) of the same column type, concatenated: numpy indexing per part and
        one Arrow array per buffer for all of them (Arrow's take of a list of structs costs some 200 µs a
        part, however few the rows)."""
        if self.values is not None:
            values = [f.values[r] for f, r in parts]  # type: ignore[index]
            return pa.array(np.concatenate(values) if len(values) > 1 else values[0], type=self.type)
        if self.offsets is not None:
            lengths, inner = [], []
            for f, r in parts:
                starts, stops = f.offsets[r], f.offsets[r + 1]  # type: ignore[index]
                lengths.append(stops - starts)
                inner.append((f.children[0], _ranges(starts, stops)))
            out = np.zeros(sum(len(x) for x in lengths) + 1, dtype=np.int64)
            np.cumsum(np.concatenate(lengths), out=out[1:])
            child = self.children[0].gather(inner)
            large = pa.types.is_large_list(self.type)
            offsets = pa.array(out, type=pa.int64() if large else pa.int32())
            cls = pa.LargeListArray if large else pa.ListArray
            return cls.from_arrays(offsets, child, type=self.type)
        return pa.StructArray.from_arrays([c.gather([(f.children[i], r) for f, r in parts])
                                           for i, c in enumerate(self.children)], fields=list(self.type))


@dataclass(frozen=True)
class _Cluster:
    table: pa.Table
    flats: tuple[_Flat | None, ...]

    @classmethod
    def of(cls, table: pa.Table) -> _Cluster:
        table = table.combine_chunks()
        return cls(table, tuple(_Flat.of(c.chunk(0)) if c.num_chunks == 1 else None for c in table.columns))


Piece = tuple[_Cluster, np.ndarray]  # a kept cluster and the rows of it a read wants


def gather(pieces: Sequence[Piece]) -> pa.Table:
    """The rows of every piece (clusters of the same columns), in order, as one table: each column gathered
    across all of them at once where its buffers are flat, through Arrow's take otherwise."""
    first = pieces[0][0].table
    columns = []
    for i, column in enumerate(first.columns):
        flat = pieces[0][0].flats[i]
        if flat is not None and all(c.flats[i] is not None and c.table.schema.field(i).type == column.type
                                    for c, _ in pieces):
            columns.append(flat.gather([(c.flats[i], r) for c, r in pieces]))  # type: ignore[misc]
        else:
            parts = [c.table.column(i).take(pa.array(r)) for c, r in pieces]
            columns.append(pa.chunked_array([x for p in parts for x in p.chunks], type=column.type))
    return pa.Table.from_arrays(columns, schema=first.schema)


def _cluster(reader: ContainerReader, container: ContainerRecord, paths: Sequence[str], batch: int) -> _Cluster:
    key = (reader.site.name, container.path, container.checksum, batch, tuple(paths))
    with _LOCK:
        found = _KEPT.get(key)
        if found is not None:
            _KEPT.move_to_end(key)
            return found[0]
    before = pa.total_allocated_bytes()
    table = reader.read(list(paths), [batch])
    if table.num_rows != container.cluster_entries[batch]:
        raise IntegrityError(f"container {container.path}: cluster {batch} holds {table.num_rows} events, "
                             f"the catalog recorded {container.cluster_entries[batch]}")
    kept = _Cluster.of(table)
    cost = max(0, pa.total_allocated_bytes() - before)  # zero for a batch that maps the file
    if cost <= CACHE_BYTES:
        with _LOCK:
            if key not in _KEPT:
                _KEPT[key] = (kept, cost)
                _HELD[0] += cost
            while _HELD[0] > CACHE_BYTES and _KEPT:
                _, (_, dropped) = _KEPT.popitem(last=False)
                _HELD[0] -= dropped
            while len(_KEPT) > 1 << 16:  # mapped batches cost nothing, but their keys do
                _, (_, dropped) = _KEPT.popitem(last=False)
                _HELD[0] -= dropped
    return kept


def pieces(reader: ContainerReader, container: ContainerRecord, paths: Sequence[str], rows: np.ndarray
           ) -> list[Piece]:
    """The kept clusters of ``container`` (columns ``paths``) holding ``rows`` (sorted local entries), each with
    its rows; read and kept first if need be."""
    starts = np.concatenate([[0], np.cumsum(np.asarray(container.cluster_entries, dtype=np.int64))])
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) and (rows[0] < 0 or rows[-1] >= starts[-1]):
        raise IntegrityError(f"container {container.path} holds {starts[-1]} events, not entry {rows[-1]}")
    batch = np.searchsorted(starts, rows, side="right") - 1
    which = np.unique(batch)
    bounds = np.searchsorted(batch, which, side="left"), np.searchsorted(batch, which, side="right")
    return [(_cluster(reader, container, paths, int(b)), rows[lo:hi] - starts[b])
            for b, lo, hi in zip(which, *bounds, strict=True)]
