"""Decoded clusters of local container files, kept in the process so that sparse reads only gather.

A sparse read (a narrow selection, ``ds.event(i)``) used to walk, in every
database, the blocks holding its few events: parse the batch's metadata, check
its layout, fetch and check each block, build the arrays, take the rows —
about a millisecond of Python per database and container, repeated on every
read however few events it wanted. Here a cluster (an Arrow record batch) of a
local container is read and checked whole once, through the container reader
like any read, and its buffers kept as numpy copies (a view of the memory map
would show whatever the file holds later, unchecked); later reads only gather
their rows from it, the rows of all the databases of a read at once
(``gather``: one numpy indexing per buffer and cluster, one Arrow array per
buffer in all). Kept clusters are bounded by :data:`CACHE_BYTES`
(:class:`Segmented`). What a read (a selection) decodes is protected; what a
point lookup (``ds.event``) decodes enters a probation segment, protected only
when a read uses it too, and probation is dropped first: lookups scattered over
many databases replace one another and leave the clusters that selections read
again where they are, up to :data:`PROTECTED` of the bound. A
cluster that cannot be kept (a column with nulls or strings) is remembered as
such, so that its reads go block by block without decoding it whole first on
every read.

The price is the first read of a cluster: it checks and maps the whole
cluster, not only the blocks that hold its rows. Files are immutable under
their path and checksum in a federation, which key the cache with the batch and
the columns read; every function takes the federation's name for it (``place``,
its catalog's URL), so that two federations read in one process never answer
for each other. Damage done to a file after its cluster was kept is found by the next
read that goes to the file (another process, ``iterate``, a whole read,
``giod verify``), not by reads served from the kept copy. Remote and Parquet
containers and columns with nulls or strings are read block by block as before
(``ContainerReader.read_rows``); ``iterate``'s chunks of consecutive entries read whole
clusters and slice them (``giod.read.projection.RangeReader``), without this cache.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np
import pyarrow as pa

from giod.catalog.records import ContainerRecord
from giod.errors import IntegrityError
from giod.storage import numpyview
from giod.storage.numpyview import numpy_array, unique

if TYPE_CHECKING:
    from giod.storage.container import ContainerReader
    from giod.storage.site import Site

__all__ = ["CACHE_BYTES", "DERIVED_BYTES", "PROTECTED", "Piece", "Segmented", "derived", "forget",
           "gather", "keep_derived", "keep_side_by_side", "kept", "pieces", "serves", "side_by_side", "touched"]

#: bytes of kept clusters per process (probation dropped first, then the protected segment, each least
#: recently used first)
CACHE_BYTES = 2 << 30
#: the share of :data:`CACHE_BYTES` the protected segment (clusters reads use) may hold; probation (what point
#: lookups decode, and what the protected segment let go) holds the rest, and all of it while the protected
#: segment holds less
PROTECTED = 0.9
#: a read whose rows of a cluster (with those of it kept already) are at most this share of its events reads them
#: block by block and keeps them alone, not the whole cluster (the share under which a container reader reads a
#: batch's rows block by block: ``ArrowContainerReader``'s ``PARTIAL_SHARE``)
PARTIAL_SHARE = 1 / 16

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Segmented(Generic[K, V]):
    """Values with a cost in bytes, bounded by a total given on each call, in two segments (a segmented LRU
    whose admission depends on who uses a value).

    A value a read keeps (:meth:`put` with ``protect``) enters the *protected* segment; one a point lookup
    keeps enters *probation*, and moves to the protected segment when a read uses it (:meth:`get` with
    ``promote``). The protected segment holds at most ``protected`` of the bound: past it, its least recently
    used values go back to probation (most recent there). Past the bound, probation's least recently used
    values are dropped first, the protected segment's only when probation is empty. So lookups, however
    many and scattered, displace one another and what reads left in probation, never what reads use within
    the protected share; reads alone see a plain LRU over the whole bound. Not thread-safe: the caller holds
    a lock.
    """

    def __init__(self, protected: float = PROTECTED) -> None:
        self.share = protected
        self.probation: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.protected: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.held = [0, 0]  # bytes in probation, in the protected segment

    def __len__(self) -> int:
        return len(self.probation) + len(self.protected)

    def __contains__(self, key: object) -> bool:
        return key in self.probation or key in self.protected

    @property
    def nbytes(self) -> int:
        return self.held[0] + self.held[1]

    def get(self, key: K, bound: int, promote: bool = True) -> V | None:
        """The value of ``key`` (None when not kept), now the most recently used of its segment; promoted to
        the protected segment if it was in probation and ``promote``."""
        found = self.protected.get(key)
        if found is not None:
            self.protected.move_to_end(key)
            return found[0]
        found = self.probation.get(key)
        if found is None:
            return None
        if not promote:
            self.probation.move_to_end(key)
            return found[0]
        del self.probation[key]
        self.held[0] -= found[1]
        self._protect(key, found, bound)
        return found[0]

    def put(self, key: K, value: V, cost: int, bound: int, protect: bool = True) -> None:
        """Keep ``value`` (nothing when it costs more than ``bound``, or ``key`` is kept already): in the
        protected segment when ``protect``, else in probation; then drop least recently used values, from
        probation first, until all of them cost at most ``bound``."""
        if cost > bound or key in self:
            return
        if protect:
            self._protect(key, (value, cost), bound)
        else:
            self.probation[key] = (value, cost)
            self.held[0] += cost
        while self.nbytes > bound:
            segment, i = (self.probation, 0) if self.probation else (self.protected, 1)
            _, (_, dropped) = segment.popitem(last=False)
            self.held[i] -= dropped

    def _protect(self, key: K, item: tuple[V, int], bound: int) -> None:
        self.protected[key] = item
        self.held[1] += item[1]
        while self.held[1] > self.share * bound and self.protected:
            old, moved = self.protected.popitem(last=False)
            self.held[1] -= moved[1]
            self.probation[old] = moved
            self.held[0] += moved[1]

    def discard(self, key: K) -> None:
        """Forget ``key`` (nothing if it is not kept)."""
        for i, segment in enumerate((self.probation, self.protected)):
            found = segment.pop(key, None)
            if found is not None:
                self.held[i] -= found[1]

    def clear(self) -> None:
        self.probation.clear()
        self.protected.clear()
        self.held[:] = [0, 0]


# (federation, path, checksum, batch, columns): the same bytes on any of the federation's sites. The federation
# (its catalog) is in the key because a checksum proves transport, not origin: a crafted file of another
# federation opened in the same process, at the same path with the same CRC, must not answer for this one.
_Key = tuple[str, str, str, int, tuple[str, ...]]
# a cluster's rows kept by sparse reads: beside the cluster kept whole, so that a dense read of it leaves them
_Rows = tuple[str, str, str, int, tuple[str, ...], bool]
_LOCAL: weakref.WeakKeyDictionary[Site, bool] = weakref.WeakKeyDictionary()  # whether a site's files are local
_KEPT: Segmented[_Key | _Rows, _Cluster] = Segmented()
#: clusters found not flat, whose rows are read block by block without decoding them whole again first
_NOT_FLAT: OrderedDict[_Key, None] = OrderedDict()
NOT_FLAT_KEYS = 4_096
#: clusters a point lookup read a block of (the next lookup into one of them decodes and keeps it whole)
_TOUCHED: OrderedDict[_Key, None] = OrderedDict()
TOUCHED_KEYS = 4_096
#: bytes of what is built from kept clusters and kept beside them (``giod.read.event``'s blocks of events)
DERIVED_BYTES = 256 << 20
_DERIVED: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
_DERIVED_HELD = [0]
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
    size: int = 0  # fixed-size lists (``float32[3]``): the items of each, in ``children[0]``

    @classmethod
    def of(cls, array: pa.Array) -> _Flat | None:
        t = array.type
        if array.null_count:
            return None
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            child = cls.of(array.values)
            return None if child is None else cls(t, offsets=numpyview.offsets(array).astype(np.int64, copy=True),
                                                  children=(child,))
        if pa.types.is_fixed_size_list(t):
            child = cls.of(array.flatten())  # the items of this slice only, unlike ``values``
            return None if child is None else cls(t, children=(child,), size=t.list_size)
        if pa.types.is_struct(t):
            children = [cls.of(c) for c in array.flatten()]
            return None if any(c is None for c in children) else cls(t, children=tuple(children))  # type: ignore[arg-type]
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            # a copy: a view of the memory map would show whatever the file holds later, unchecked
            return cls(t, values=numpyview.values(array).copy())
        return None

    def gather(self, parts: Sequence[tuple[_Flat, np.ndarray]]) -> pa.Array:
        """``take`` of each (flat, rows) of the same column type, concatenated: numpy indexing per part and
        one Arrow array per buffer for all of them (Arrow's take of a list of structs costs some 200 µs a
        part, however few the rows)."""
        if self.values is not None:
            values = [f.values[r] for f, r in parts]  # type: ignore[index]
            return numpy_array(np.concatenate(values) if len(values) > 1 else values[0], self.type)
        if self.offsets is not None:
            # every part's items at once: one range expansion for all parts, then cut per part
            starts = np.concatenate([f.offsets[r] for f, r in parts])  # type: ignore[index]
            stops = np.concatenate([f.offsets[r + 1] for f, r in parts])  # type: ignore[index]
            out = np.zeros(len(starts) + 1, dtype=np.int64)
            np.cumsum(stops - starts, out=out[1:])
            items = _ranges(starts, stops)
            cuts = out[np.cumsum([len(r) for _, r in parts])[:-1]]
            child = self.children[0].gather([(f.children[0], at)
                                             for (f, _), at in zip(parts, np.split(items, cuts), strict=True)])
            large = pa.types.is_large_list(self.type)
            offsets = numpy_array(out) if large else numpy_array(out).cast(pa.int32())
            cls = pa.LargeListArray if large else pa.ListArray
            return cls.from_arrays(offsets, child, type=self.type)
        if self.size:
            child = self.children[0].gather([(f.children[0], _ranges(r * self.size, (r + 1) * self.size))
                                             for f, r in parts])
            return pa.FixedSizeListArray.from_arrays(child, type=self.type)
        return pa.StructArray.from_arrays([c.gather([(f.children[i], r) for f, r in parts])
                                           for i, c in enumerate(self.children)], fields=list(self.type))


@dataclass(frozen=True)
class _Cluster:
    """A cluster's columns as numpy copies (``_Flat``), checked when they were read: all its events, or only
    ``rows`` of them (a sparse read's, read block by block)."""

    schema: pa.Schema
    flats: tuple[_Flat, ...]
    rows: np.ndarray | None = None  # the events held (sorted, unique, numbered in the cluster); None: every one

    @classmethod
    def of(cls, table: pa.Table, rows: np.ndarray | None = None) -> _Cluster | None:
        """``table``'s columns taken apart (``rows``: the cluster's events it holds, one a row; None: all);
        None when one is not flat (nulls, strings, …)."""
        return _apart(table, rows)

    def at(self, local: np.ndarray) -> np.ndarray | None:
        """Where the cluster's events ``local`` (sorted) are held; None when one of them is not."""
        if self.rows is None:
            return local
        if not len(local):
            return local
        if not len(self.rows):
            return None
        if len(local) == len(self.rows):  # all of them, or not held
            return np.arange(len(local)) if (self.rows == local).all() else None
        place = self.rows.searchsorted(local)
        if place[-1] >= len(self.rows):  # sorted: the last is the largest
            return None
        return place if (self.rows[place] == local).all() else None

    @property
    def nbytes(self) -> int:
        def size(f: _Flat) -> int:
            own = (0 if f.values is None else f.values.nbytes) + (0 if f.offsets is None else f.offsets.nbytes)
            return own + sum(size(c) for c in f.children)

        return sum(size(f) for f in self.flats) + (0 if self.rows is None else self.rows.nbytes)


def _apart(table: pa.Table, rows: np.ndarray | None) -> _Cluster | None:
    table = table.combine_chunks()
    flats = [_Flat.of(c.chunk(0)) if c.num_chunks == 1 else None for c in table.columns]
    if any(f is None for f in flats):
        return None
    return _Cluster(table.schema, tuple(flats), rows)  # type: ignore[arg-type]


Piece = tuple[_Cluster, np.ndarray]  # a kept cluster and the rows of it a read wants


def gather(pieces: Sequence[Piece]) -> pa.Table:
    """The rows of every piece (clusters of the same columns), in order, as one table: each column gathered
    across all of them at once (numpy indexing per piece, one Arrow array per buffer)."""
    schema = pieces[0][0].schema
    columns = [flat.gather([(c.flats[i], r) for c, r in pieces]) for i, flat in enumerate(pieces[0][0].flats)]
    return pa.Table.from_arrays(columns, schema=schema)


#: a file's number among those of rows kept side by side, shifted past any local entry: (number << SHIFT) | entry
SHIFT = 32
#: reads of the same files whose rows are kept side by side, each apart (the last ones)
SIDE_BY_SIDE_READS = 4


@dataclass(frozen=True)
class _SideBySide:
    """The rows a sparse read gathered from the kept rows of many files (one container of many databases),
    side by side in one :class:`_Cluster`: its ``rows`` are ``(number << SHIFT) | local entry``, sorted, where
    ``number`` is the file's place among ``files`` (the read's order). Built from kept rows, checked when they
    were read; the files are immutable under their path and checksum, which ``files`` names."""

    files: dict[tuple[str, str], int]
    kept: _Cluster


def _side_key(place: str, recs: Sequence[ContainerRecord], paths: Sequence[str]) -> Hashable:
    """Rows kept side by side are found by their federation, their first and last files and how many: two
    selections read in turn over other databases keep theirs apart."""
    return ("side by side", place, recs[0].path, recs[0].checksum, recs[-1].path, recs[-1].checksum, len(recs),
            tuple(paths))


def _numbered(recs: Sequence[ContainerRecord | None], rows: Sequence[np.ndarray | None], schema_id: int
              ) -> list[tuple[str, str]] | None:
    """The (path, checksum) of each container of a sparse read that rows kept side by side may serve: local
    Arrow files of the reading schema, each read at some of its events (sorted local entries); else None."""
    files = []
    for rec, local in zip(recs, rows, strict=True):
        if rec is None or local is None or rec.format != "arrow" or not rec.cluster_entries \
                or rec.schema_id != schema_id:
            return None
        files.append((rec.path, rec.checksum))
    return files


def _keys(numbers: np.ndarray, rows: Sequence[np.ndarray]) -> np.ndarray:
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    return np.repeat(numbers << SHIFT, lengths) + np.concatenate(rows).astype(np.int64, copy=False)


def _held(found: object) -> tuple[_SideBySide, ...]:
    return found if isinstance(found, tuple) and all(isinstance(f, _SideBySide) for f in found) else ()


def side_by_side(place: str, recs: Sequence[ContainerRecord | None], rows: Sequence[np.ndarray | None],
                 paths: Sequence[str], schema_id: int) -> pa.Table | None:
    """The columns ``paths`` of the sparse read of containers ``recs`` at their local entries ``rows`` (sorted,
    each a part of its file's events), in order, when rows a read kept side by side (:func:`keep_side_by_side`)
    hold them all: one search and one gather per buffer for all the files, no step per file; the rows kept by
    a read of exactly these rows first, else the fewest that hold them. None otherwise (the read goes file by
    file, :func:`pieces`)."""
    if len(recs) < 2:
        return None
    files = _numbered(recs, rows, schema_id)
    if files is None:
        return None
    held = _held(derived(_side_key(place, recs, paths)))  # type: ignore[arg-type]
    if not held or any(list(h.files) != files for h in held):
        return None
    keys = _keys(np.arange(len(files), dtype=np.int64), rows)  # type: ignore[arg-type]
    for h in sorted(held, key=lambda h: (len(h.kept.rows) != len(keys), len(h.kept.rows))):  # type: ignore[arg-type]
        at = h.kept.at(keys)
        if at is not None:
            return gather([(h.kept, at)])
    return None


def keep_side_by_side(place: str, recs: Sequence[ContainerRecord | None], rows: Sequence[np.ndarray | None],
                      paths: Sequence[str], schema_id: int, table: pa.Table) -> None:
    """Keep ``table``, the rows ``rows`` of containers ``recs`` (columns ``paths``) gathered from kept rows, side by
    side for :func:`side_by_side` (in the bound of :func:`keep_derived`), beside what the last
    :data:`SIDE_BY_SIDE_READS` other reads of the same files kept (each read's rows apart, so that a narrow read
    gathers from its own rows, not from a wider one's): only a sparse read's, at most :data:`PARTIAL_SHARE` of the
    files' events."""
    if len(recs) < 2:
        return
    files = _numbered(recs, rows, schema_id)
    if files is None or len(set(files)) != len(files):
        return
    sizes = [int(sum(rec.cluster_entries)) for rec in recs if rec is not None]
    if max(sizes) >> SHIFT:  # a local entry past the shift: not numbered side by side
        return
    keys = _keys(np.arange(len(files), dtype=np.int64), rows)  # type: ignore[arg-type]
    if len(keys) != table.num_rows or len(keys) > PARTIAL_SHARE * sum(sizes):
        return
    kept = _apart(table, keys)  # a copy of kept rows: nothing decoded
    if kept is None:
        return
    key = _side_key(place, recs, paths)  # type: ignore[arg-type]
    numbered = dict(zip(files, range(len(files)), strict=True))
    others = [h for h in _held(derived(key))
              if h.files == numbered and not np.array_equal(h.kept.rows, keys)]  # type: ignore[arg-type]
    held = (_SideBySide(numbered, kept), *others[: SIDE_BY_SIDE_READS - 1])
    keep_derived(key, held, sum(h.kept.nbytes for h in held))


def _rows_key(key: _Key) -> _Rows:
    return (*key, True)


def _find(key: _Key, local: np.ndarray, lookup: bool) -> tuple[Piece | None, _Cluster | None]:
    """(the piece of ``local`` if a kept cluster or kept rows hold them all, the rows kept of the cluster);
    the caller holds the lock. Rows kept are asked first: gathering from them touches a few megabytes, from
    the whole cluster one cache line or more per event and buffer across all of it."""
    rows = _KEPT.get(_rows_key(key), CACHE_BYTES, promote=not lookup)
    if rows is not None:
        at = rows.at(local)
        if at is not None:
            return (rows, at), rows
    whole = _KEPT.get(key, CACHE_BYTES, promote=not lookup)
    return ((whole, local) if whole is not None else None), rows


def _piece(place: str, reader: ContainerReader, container: ContainerRecord, paths: Sequence[str], batch: int,
           local: np.ndarray, lookup: bool = False) -> Piece | None:
    """The kept cluster ``batch`` (or its rows kept) holding its events ``local`` and where it holds them, read
    and kept first if need be: a read's few rows of it (with those kept already) alone, block by block, beside
    the cluster; else the cluster whole."""
    key = (place, container.path, container.checksum, batch, tuple(paths))
    with _LOCK:
        found, rows = _find(key, local, lookup)
        if found is not None:
            return found
        if key in _NOT_FLAT:
            return None
    n = container.cluster_entries[batch]
    want = local if rows is None or rows.rows is None else np.union1d(rows.rows, local)
    if not lookup and len(want) <= PARTIAL_SHARE * n:
        first = int(np.sum(np.asarray(container.cluster_entries[:batch], dtype=np.int64)))
        table = reader.read_rows(list(paths), want + first)
        if table.num_rows != len(want):
            raise IntegrityError(f"container {container.path}: cluster {batch} gave {table.num_rows} events, "
                                 f"not the {len(want)} asked")
        kept = _Cluster.of(table, np.array(want, dtype=np.int64))
        where: _Key | _Rows = _rows_key(key)
    else:
        table = reader.read(list(paths), [batch])
        if table.num_rows != n:
            raise IntegrityError(f"container {container.path}: cluster {batch} holds {table.num_rows} events, "
                                 f"the catalog recorded {n}")
        kept = _Cluster.of(table)
        where = key
    if kept is None:
        with _LOCK:
            _NOT_FLAT[key] = None
            while len(_NOT_FLAT) > NOT_FLAT_KEYS:
                _NOT_FLAT.popitem(last=False)
        return None
    with _LOCK:
        _KEPT.discard(where)  # the rows kept before, now among these (or a cluster kept meanwhile: alike)
        _KEPT.put(where, kept, kept.nbytes, CACHE_BYTES, protect=not lookup)
    at = kept.at(local)
    if at is None:  # the rows read are the rows asked: only a reader that gave other events gets here
        raise IntegrityError(f"container {container.path}: cluster {batch} did not give the events asked")
    return kept, at


def touched(place: str, container: ContainerRecord, paths: Sequence[str], rows: np.ndarray) -> bool:
    """Whether a point lookup touched every cluster of ``container`` holding ``rows`` before (each now
    remembered as touched, the last :data:`TOUCHED_KEYS` of them)."""
    columns = tuple(paths)
    keys = [(place, container.path, container.checksum, b, columns) for b, _ in _split(container, rows)]
    with _LOCK:
        before = all(k in _TOUCHED for k in keys)
        for k in keys:
            _TOUCHED[k] = None
            _TOUCHED.move_to_end(k)
        while len(_TOUCHED) > TOUCHED_KEYS:
            _TOUCHED.popitem(last=False)
    return before


def forget() -> None:
    """Drop every kept cluster, and what was built from them (as a new process starts with none)."""
    with _LOCK:
        _KEPT.clear()
        _NOT_FLAT.clear()
        _TOUCHED.clear()
        _DERIVED.clear()
        _DERIVED_HELD[0] = 0


def derived(key: Hashable) -> object | None:
    """What :func:`keep_derived` kept under ``key``, if it still is."""
    with _LOCK:
        found = _DERIVED.get(key)
        if found is None:
            return None
        _DERIVED.move_to_end(key)
        return found[0]


def keep_derived(key: Hashable, value: object, cost: int) -> None:
    """Keep ``value``, built from kept clusters (its key names their files and checksums), for
    :func:`derived`; bounded by :data:`DERIVED_BYTES`, least recently used dropped first, and dropped by
    :func:`forget` with the clusters."""
    if cost > DERIVED_BYTES:
        return
    with _LOCK:
        old = _DERIVED.pop(key, None)
        if old is not None:
            _DERIVED_HELD[0] -= old[1]
        _DERIVED[key] = (value, cost)
        _DERIVED_HELD[0] += cost
        while _DERIVED_HELD[0] > DERIVED_BYTES and _DERIVED:
            _, (_, dropped) = _DERIVED.popitem(last=False)
            _DERIVED_HELD[0] -= dropped


def _split(container: ContainerRecord, rows: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``rows`` (sorted local entries) by the cluster holding them: (cluster, its rows in it)."""
    rows = np.asarray(rows, dtype=np.int64)
    if len(container.cluster_entries) == 1:  # one cluster: nothing to split
        if len(rows) and (rows[0] < 0 or rows[-1] >= container.cluster_entries[0]):
            raise IntegrityError(f"container {container.path} holds {container.cluster_entries[0]} events, "
                                 f"not entry {rows[-1]}")
        return [(0, rows)] if len(rows) else []
    starts = np.concatenate([[0], np.cumsum(np.asarray(container.cluster_entries, dtype=np.int64))])
    if len(rows) and (rows[0] < 0 or rows[-1] >= starts[-1]):
        raise IntegrityError(f"container {container.path} holds {starts[-1]} events, not entry {rows[-1]}")
    if len(starts) == 2:  # one cluster: nothing to split
        return [(0, rows)] if len(rows) else []
    batch = np.searchsorted(starts, rows, side="right") - 1
    which = unique(batch)
    bounds = np.searchsorted(batch, which, side="left"), np.searchsorted(batch, which, side="right")
    return [(int(b), rows[lo:hi] - starts[b]) for b, lo, hi in zip(which, *bounds, strict=True)]


def kept(place: str, container: ContainerRecord, paths: Sequence[str], rows: np.ndarray, lookup: bool = False
         ) -> list[Piece] | None:
    """The pieces of ``rows`` when every cluster holding them is kept already (no reader, no router: the
    bytes were checked when they were kept); None otherwise. ``lookup``: a point lookup's use, which
    protects nothing (:class:`Segmented`)."""
    if container.format != "arrow" or not container.cluster_entries:
        return None
    out = []
    columns = tuple(paths)
    with _LOCK:
        for b, local in _split(container, rows):
            found, _ = _find((place, container.path, container.checksum, b, columns), local, lookup)
            if found is None:
                return None
            out.append(found)
    return out


def pieces(place: str, reader: ContainerReader, container: ContainerRecord, paths: Sequence[str], rows: np.ndarray,
           lookup: bool = False) -> list[Piece] | None:
    """The kept clusters of ``container`` (columns ``paths``) holding ``rows`` (sorted local entries), each with
    its rows; read and kept first if need be (protected, or in probation for a ``lookup``: :func:`kept`).
    None when a column is not flat (nulls, strings, …): such reads go block by block."""
    out = []
    for b, local in _split(container, rows):
        piece = _piece(place, reader, container, paths, b, local, lookup)
        if piece is None:
            return None
        out.append(piece)
    return out
