"""The dataset's tag index: every database's sorted tag field merged into one, per pinned version.

A selection over tags used to ask each database's tag index in turn: a few
milliseconds of opening, footer parsing and array building per database,
however few events it selected. Here the sorted values and entry numbers of
one tag field of *all* the databases of a snapshot are merged into one sorted
array (numbers, then nan, then nulls: the order of ``giod.read.tagindex``),
and the same zone-map search (``tagindex.select``) runs once over it, with
blocks of ``tagindex.BLOCK`` positions of the merged order and entry numbers
of the dataset. A count then costs a bisection of the block bounds plus the
blocks that match, whatever the number of databases.

The merged index of a field costs about a scan of the field to build, so a
selection builds it when these tags were selected on before in the process
(a session that selects again repays it, a process that selects once never
pays it) or when too many databases remain to ask each alone
(``giod.read.selection``). It is kept in the process, per store, keyed by the version (a pinned
version's databases never change), and, for a federation with a directory of
its own, in a file of it (``indexes/<dataset>/<field>.index``, :func:`saved_path`),
so that the next process's first selection on these tags reads one file, not
every database's index: written when an index is merged, read when a process
has none in memory, used for the databases it names that the snapshot still
holds with the same tags (the rest merged in as below). The file is the
federation's own, beside its catalog, and trusted as much; it is still checked
before it is used (its CRC-32C, its sizes, its order, its entries within the
dataset), and one that fails is left aside, never an error. A later version whose databases include
every database an index already covers (a writer committed more) merges only
the new databases' sorted runs into it, as an LSM tree merges a run, instead
of reading every database again. Each database contributes the sorted field
from its tag-index container, or, when it has none that describes its tag
container (written before indexes, replaced by a later pass, under an older
schema), its tag column read through ``giod.read.projection`` and sorted here.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import shutil
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa

from giod.catalog.records import DatabaseRecord
from giod.errors import DataError, GiodError, IntegrityError
from giod.expression import Expression
from giod.read import tagindex
from giod.read.projection import Projection, read_database
from giod.schema import TAG_CONTAINER
from giod.storage import checksum
from giod.storage.numpyview import numpy_array, values

if TYPE_CHECKING:
    from giod.storage.container import ContainerReader
    from giod.store.snapshot import Snapshot, Store

__all__ = ["CACHE_BYTES", "FieldIndex", "asked_before", "cached", "count", "field_index", "remove_unused", "saved_path",
           "select"]

#: bytes of merged field indexes kept per store (least recently used dropped first)
CACHE_BYTES = 1 << 30
_ENTRY = "#entry"  # the entry column of a field in a tag-index container (tagindex's suffix)

Part = tuple[int, int, str, str]  # (database id, first entry, tag container path, its checksum)


@dataclass(frozen=True)
class FieldIndex:
    """One tag field of a set of databases in sorted order: numbers, then nan, then nulls."""

    values: np.ndarray  # sorted; positions from ``valid`` on hold nulls (their values are meaningless)
    entries: np.ndarray  # the dataset entry of each position (int64)
    numeric: int  # positions holding numbers
    valid: int  # positions holding numbers or nan
    parts: frozenset[Part]  # the databases merged in
    # the directory entry per block size, made once: every count and selection through the index asks it
    _directories: dict[int, dict[str, object]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes + self.entries.nbytes)

    def directory(self) -> dict[str, object]:
        """The directory entry ``tagindex.Directory`` describes a field with (shared: read it only)."""
        found = self._directories.get(tagindex.BLOCK)
        if found is None:
            starts = np.arange(0, self.numeric, tagindex.BLOCK)
            ends = np.minimum(starts + tagindex.BLOCK, self.numeric) - 1
            head = self.values[: self.numeric]
            found = {"valid": self.valid, "numeric": self.numeric, "lo": head[starts].tolist(),
                     "hi": head[ends].tolist()}
            self._directories[tagindex.BLOCK] = found
        return found


@dataclass
class _Run:
    """One database's sorted field: numbers and nan (``valid`` of them) then nulls, with dataset entries."""

    values: np.ndarray
    entries: np.ndarray
    valid: int


class _Cache:
    """The merged field indexes of one store, by (dataset, version, field), least recently used first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_version: OrderedDict[tuple[str, int, str], FieldIndex] = OrderedDict()
        self.asked: set[tuple[str, str]] = set()  # (dataset, tag) a selection of this process named

    def get(self, key: tuple[str, int, str]) -> FieldIndex | None:
        with self.lock:
            found = self.by_version.get(key)
            if found is not None:
                self.by_version.move_to_end(key)
            return found

    def newest(self, dataset: str, name: str) -> FieldIndex | None:
        """The most recently used index of ``name`` in ``dataset`` (the base of an incremental merge)."""
        with self.lock:
            for (ds, _, named), index in reversed(self.by_version.items()):
                if ds == dataset and named == name:
                    return index
        return None

    def put(self, key: tuple[str, int, str], index: FieldIndex) -> None:
        with self.lock:
            self.by_version[key] = index
            self.by_version.move_to_end(key)
            while len(self.by_version) > 1:
                unique = {id(i): i for i in self.by_version.values()}
                if sum(i.nbytes for i in unique.values()) <= CACHE_BYTES:
                    break
                self.by_version.popitem(last=False)


_CACHES: weakref.WeakKeyDictionary[Store, _Cache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def _cache(store: Store) -> _Cache:
    with _CACHES_LOCK:
        found = _CACHES.get(store)
        if found is None:
            found = _CACHES[store] = _Cache()
        return found


def _part(db: DatabaseRecord) -> Part | None:
    tag = db.container(TAG_CONTAINER)
    return None if tag is None else (db.id, db.first_entry, tag.path, tag.checksum)


def _run_from_index(snapshot: Snapshot, db: DatabaseRecord, name: str) -> _Run | None:
    """``name`` of ``db`` sorted, from its tag-index container; None when it has none that serves."""
    tag = db.container(TAG_CONTAINER)
    rec = db.container(tagindex.TAG_INDEX)
    if tag is None or rec is None or tag.schema_id != snapshot.schema_id:
        return None

    def read(reader: ContainerReader) -> _Run | None:
        directory = tagindex.Directory.of(reader.arrow_schema)
        if (directory is None or not tagindex.same_file(directory.tag, tag.path)
                or directory.checksum != tag.checksum or directory.events != db.n_events
                or name not in directory.fields):
            return None  # a later pass replaced the tags: this index describes other values
        table = reader.read([name, name + _ENTRY])
        if table.num_rows != db.n_events:
            return None
        return _run(table.column(name), table.column(name + _ENTRY), int(directory.fields[name]["valid"]), db)

    try:
        return snapshot.store.read_container(rec, read)
    except GiodError:
        return None  # no reachable, sound copy of the index: the tag container is the truth


def _numpy(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if array.null_count:  # nulls sit after ``valid``, where no selection looks at their values
        array = array.fill_null(False if pa.types.is_boolean(array.type) else 0)
    return values(array)


def _run(values: pa.ChunkedArray | pa.Array, entries: pa.ChunkedArray | pa.Array, valid: int,
         db: DatabaseRecord) -> _Run:
    local = _numpy(entries).astype(np.int64, copy=False)
    if len(local) and (int(local.min()) < 0 or int(local.max()) >= db.n_events):
        raise IntegrityError(f"the tag index of database {db.id} names entries outside the database")
    return _Run(_numpy(values), local + db.first_entry, valid)


def _run_from_tags(snapshot: Snapshot, db: DatabaseRecord, name: str) -> _Run:
    """``name`` of ``db`` read from its tag container (adapted when written under an older schema), sorted."""
    table = read_database(snapshot, db, Projection({TAG_CONTAINER: [name]}, (name,)), None)[TAG_CONTAINER]
    built = tagindex.build(table.select([name]), "", "")
    if built is None:
        raise DataError(f"tag {name} is not a number or a boolean: it cannot be indexed")
    index, meta = built
    valid = int(json.loads(meta[tagindex.DIRECTORY_KEY])["fields"][name]["valid"])
    return _run(index.column(name), index.column(name + _ENTRY), valid, db)


def _merge(base: FieldIndex | None, runs: Sequence[_Run], parts: frozenset[Part]) -> FieldIndex:
    """``runs`` merged into ``base`` (or alone): numbers and nan sorted stably (nan last), then nulls."""
    heads = [] if base is None else [(base.values[: base.valid], base.entries[: base.valid])]
    tails = [] if base is None else [(base.values[base.valid:], base.entries[base.valid:])]
    for r in runs:
        heads.append((r.values[: r.valid], r.entries[: r.valid]))
        tails.append((r.values[r.valid:], r.entries[r.valid:]))
    values = np.concatenate([v for v, _ in heads]) if heads else np.zeros(0)
    entries = np.concatenate([e for _, e in heads]) if heads else np.zeros(0, np.int64)
    # runs already sorted: a stable sort of their concatenation is a merge (timsort finds the runs)
    order = np.argsort(values, kind="stable")
    values, entries = values[order], entries[order]
    valid = len(values)
    numeric = valid - (int(np.count_nonzero(np.isnan(values))) if values.dtype.kind == "f" else 0)
    null_values = [v for v, _ in tails]
    null_entries = [e for _, e in tails]
    return FieldIndex(np.concatenate([values, *null_values]).astype(values.dtype, copy=False),
                      np.concatenate([entries, *null_entries]).astype(np.int64, copy=False),
                      numeric, valid, parts)


def field_index(snapshot: Snapshot, name: str) -> FieldIndex:
    """Tag ``name`` of every database of the pinned ``snapshot``, merged and sorted (cached per version)."""
    assert snapshot.version is not None
    cache = _cache(snapshot.store)
    key = (snapshot.name, snapshot.version, name)
    found = cache.get(key)
    if found is not None:
        return found
    dbs = snapshot.databases()
    parts = {p: db for db in dbs if (p := _part(db)) is not None}
    if len(parts) != len(dbs):
        missing = next(db for db in dbs if _part(db) is None)
        raise DataError(f"database {missing.id} has no tag container: cannot index tag {name}")
    wanted = frozenset(parts)
    base = cache.newest(snapshot.name, name)
    if base is not None and not base.parts <= wanted:
        base = None  # a database went away or changed its tags: merge everything again
    if base is None:
        base = _load(snapshot, name, parts)
    if base is not None and base.parts == wanted:
        cache.put(key, base)
        return base
    new = [db for p, db in parts.items() if base is None or p not in base.parts]
    new.sort(key=lambda db: db.first_entry)
    runs = []
    for db in new:
        run = _run_from_index(snapshot, db, name)
        runs.append(run if run is not None else _run_from_tags(snapshot, db, name))
    index = _merge(base, runs, wanted)
    cache.put(key, index)
    _save(snapshot, name, index)
    return index


def asked_before(snapshot: Snapshot, names: Sequence[str]) -> bool:
    """Whether a selection of this process named each of ``names`` in this dataset before; notes that one
    names them now."""
    cache = _cache(snapshot.store)
    keys = {(snapshot.name, n) for n in names}
    with cache.lock:
        before = keys <= cache.asked
        cache.asked |= keys
    return before


def cached(snapshot: Snapshot, names: Sequence[str]) -> bool:
    """Whether the merged indexes of ``names`` at the pinned ``snapshot``'s version are in memory, or saved
    by an earlier process for databases the snapshot holds (then read into memory here)."""
    cache = _cache(snapshot.store)
    missing = [n for n in names if cache.get((snapshot.name, snapshot.version or 0, n)) is None]
    if not missing:
        return True
    if snapshot.store.root is None or not all(saved_path(snapshot.store.root, snapshot.name, n).exists()
                                              for n in missing):
        return False
    parts = {p: db for db in snapshot.databases() if (p := _part(db)) is not None}
    for n in missing:
        if cache.newest(snapshot.name, n) is None:
            loaded = _load(snapshot, n, parts)
            if loaded is None:
                return False
            cache.put((snapshot.name, -1, n), loaded)  # the base field_index merges the rest into
    return True


#: the first bytes of a saved field index, a format of its own: this, the JSON header's length and the CRC-32C of
#: all that follows (8 bytes each, little-endian), the header, the values, the entries
MAGIC = b"GIODFIX1"
_KINDS = "biuf"  # booleans and numbers: what a tag index holds
_HEAD = len(MAGIC) + 16  # the magic, the header's length, the CRC-32C of the header and both arrays


def saved_path(root: Path, dataset: str, name: str) -> Path:
    """Where the merged index of tag ``name`` of ``dataset`` is saved in the federation at ``root`` (both names
    quoted, dots too: one file name below ``indexes`` whatever they hold, never ``..``)."""
    return root / "indexes" / _quoted(dataset) / f"{_quoted(name)}.index"


def _quoted(name: str) -> str:
    return quote(name, safe="").replace(".", "%2E")


def remove_unused(store: Store, *, grace_seconds: float, dry_run: bool = False) -> list[str]:
    """Remove the saved merged indexes of datasets the catalog no longer holds (``indexes/<dataset>``,
    untouched for ``grace_seconds``: a reader pinned before the deletion may still be merging); returns
    those datasets' names. Always safe: an index is merged again when a selection needs it (``giod gc``)."""
    if store.root is None:
        return []
    try:
        found = sorted(p for p in (store.root / "indexes").iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []  # none saved, or a directory that cannot be read: nothing of ours to remove
    live = {_quoted(d.name) for d in store.catalog.datasets()}
    now = time.time()
    out = []
    for path in found:
        if path.name in live:
            continue
        try:
            touched = max([path.stat().st_mtime] + [f.lstat().st_mtime for f in path.iterdir()])
        except OSError:
            continue
        if now - touched < grace_seconds:
            continue
        if not dry_run:
            shutil.rmtree(path, ignore_errors=True)
        out.append(unquote(path.name))
    return out


def _save(snapshot: Snapshot, name: str, index: FieldIndex) -> None:
    """Write ``index`` where :func:`saved_path` says, whole or not at all (a file beside it renamed over
    it); nothing when the federation has no directory or it cannot be written (a read-only copy)."""
    root = snapshot.store.root
    if root is None:
        return
    path = saved_path(root, snapshot.name, name)
    values_, entries = np.ascontiguousarray(index.values), np.ascontiguousarray(index.entries, dtype="<i8")
    if values_.dtype.kind not in _KINDS:
        return
    values_ = values_.astype(values_.dtype.newbyteorder("<"), copy=False)
    head = json.dumps({"dtype": values_.dtype.str, "n": len(values_), "numeric": index.numeric,
                       "valid": index.valid, "parts": sorted(index.parts)}).encode()
    crc = checksum.extend(checksum.extend(checksum.extend(0, head), values_.view(np.uint8)), entries.view(np.uint8))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(MAGIC + len(head).to_bytes(8, "little") + crc.to_bytes(8, "little") + head)
            f.write(values_.view(np.uint8).data)
            f.write(entries.view(np.uint8).data)
        os.replace(tmp, path)
    except BaseException as exc:  # nothing left half-written, Ctrl-C included; a write that fails is no error
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if not isinstance(exc, OSError):
            raise


def _load(snapshot: Snapshot, name: str, parts: dict[Part, DatabaseRecord]) -> FieldIndex | None:
    """The saved index of ``name`` if it is sound and every database it names is one of ``parts`` (the
    snapshot's, with the same tags); None otherwise."""
    root = snapshot.store.root
    if root is None:
        return None
    try:
        with open(saved_path(root, snapshot.name, name), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size <= _HEAD:
                return None
            data: Any = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    return _parsed(memoryview(data), parts, name)


def _parsed(data: memoryview, parts: dict[Part, DatabaseRecord], name: str) -> FieldIndex | None:
    """The field index a saved file's bytes hold, every size, the checksum, the order and the entries
    checked against the databases ``parts``; None when anything is off."""
    if bytes(data[: len(MAGIC)]) != MAGIC:
        return None
    length = int.from_bytes(data[len(MAGIC): len(MAGIC) + 8], "little")
    crc = int.from_bytes(data[len(MAGIC) + 8: _HEAD], "little")
    if length > len(data) - _HEAD:
        return None
    text = bytes(data[_HEAD: _HEAD + length])
    try:
        head = json.loads(text)
        dtype = np.dtype(head["dtype"])
        n, numeric, valid = (int(head[k]) for k in ("n", "numeric", "valid"))
        named = frozenset((int(a), int(b), str(c), str(d)) for a, b, c, d in head["parts"])
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if dtype.kind not in _KINDS or dtype.itemsize > 8 or dtype.byteorder not in "<|=" \
            or not 0 <= numeric <= valid <= n or (dtype.kind != "f" and numeric != valid) \
            or not named <= parts.keys():
        return None
    body = _HEAD + length
    if len(data) != body + n * (dtype.itemsize + 8):
        return None
    vals = np.frombuffer(data, dtype=dtype, count=n, offset=body)
    entries = np.frombuffer(data, dtype="<i8", count=n, offset=body + n * dtype.itemsize)
    if checksum.extend(checksum.extend(checksum.extend(0, text), vals.view(np.uint8)), entries.view(np.uint8)) != crc:
        return None
    dbs = [parts[p] for p in named]
    if n != sum(db.n_events for db in dbs):
        return None
    if n:
        lo = min(db.first_entry for db in dbs)
        hi = max(db.first_entry + db.n_events for db in dbs)
        if int(entries.min()) < lo or int(entries.max()) >= hi:
            return None
        # as many entries as the databases hold, none twice, none outside them: exactly their events
        seen = np.zeros(hi - lo, dtype=bool)
        seen[entries - lo] = True
        outside = np.ones(hi - lo, dtype=bool)
        for db in dbs:
            outside[db.first_entry - lo: db.first_entry - lo + db.n_events] = False
        if int(np.count_nonzero(seen)) != n or seen[outside].any():
            return None
        head_values = vals[:numeric]
        if numeric > 1 and not np.all(head_values[1:] >= head_values[:-1]):
            return None  # not in order: a search over it would miss events
        if dtype.kind == "f" and not np.all(np.isnan(vals[numeric:valid])):
            return None
    return FieldIndex(vals, entries, numeric, valid, named)


def select(snapshot: Snapshot, expression: Expression) -> np.ndarray | None:
    """Dataset entries of the pinned ``snapshot`` that pass ``expression`` (tags only), through the merged
    indexes; None when they do not serve (no tag named, or too much of the index would match)."""
    over = _over(snapshot, expression)
    return None if over is None else tagindex.select(expression, *over)


def count(snapshot: Snapshot, expression: Expression) -> int | None:
    """How many entries of the pinned ``snapshot`` pass ``expression`` (one tag), through its merged index:
    the blocks it selects whole counted, only those at its edges read (``tagindex.count``); None when it does
    not serve."""
    if len(expression.fields) != 1:
        return None
    over = _over(snapshot, expression)
    return None if over is None else tagindex.count(expression, *over)


def _over(snapshot: Snapshot, expression: Expression
          ) -> tuple[tagindex.Directory, Callable[[np.ndarray, list[str]], pa.Table]] | None:
    """The merged indexes of ``expression``'s tags as a directory and a reader of its blocks."""
    names = sorted(expression.fields)
    if not names or expression.objects:
        return None
    indexes = {n: field_index(snapshot, n) for n in names}
    events = len(next(iter(indexes.values())).values)
    if any(len(i.values) != events for i in indexes.values()):
        return None
    directory = tagindex.Directory(tagindex.BLOCK, events, "", "", {n: i.directory() for n, i in indexes.items()})

    def read(blocks: np.ndarray, columns: list[str]) -> pa.Table:
        sizes = np.minimum(tagindex.BLOCK, events - blocks * tagindex.BLOCK)
        ends = np.cumsum(sizes)
        positions = np.repeat(blocks * tagindex.BLOCK - (ends - sizes), sizes) + np.arange(int(ends[-1]))
        out = {}
        for n in names:
            out[n] = numpy_array(indexes[n].values[positions])
            out[n + _ENTRY] = numpy_array(indexes[n].entries[positions])
        return pa.table({c: out[c] for c in columns})

    return directory, read
