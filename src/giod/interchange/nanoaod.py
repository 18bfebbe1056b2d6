"""ROOT event trees in: NanoAOD-style and flat ntuples to giod events.

The read path has three steps. :func:`inspect_tree` looks only at the
branch metadata and decides what every branch becomes (a field of a
collection, a relation, a tag, or nothing, with the reason written down).
:func:`iterate_events` reads the chosen branches chunk by chunk with uproot
and turns each chunk into giod's in-memory layout with whole-array numpy
operations. :func:`import_root` feeds those chunks to a dataset's writer.

Files written by :func:`giod.interchange.write_root` carry their giod schema
(``giod_schema``, a TObjString); when it is present and matches the tree,
the import follows it exactly instead of guessing from branch names.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import awkward as ak
import numpy as np

from giod.catalog.records import keyed_ranges
from giod.errors import ConfigError, ConflictError, DataError, NotFound, SchemaError
from giod.interchange.ahead import read_ahead
from giod.interchange.encoding import ROOT_NAMES, TREES_KEY, numpy_dtype
from giod.interchange.rootfile import DEFAULT_TREE, find_tree, open_root, root_errors, tree_names
from giod.interchange.treelayout import (  # noqa: F401 - Mapped: re-exported
    CollectionPlan,
    Mapped,
    Member,
    TreeLayout,
    inspect_tree,
    layout_of,
)
from giod.schema import STRING, Schema


@dataclass(frozen=True)
class ImportReport:
    """What :func:`import_root` did."""

    dataset: str
    path: str
    tree: str
    n_events: int
    n_chunks: int
    created: bool
    collections: tuple[str, ...]
    tags: tuple[str, ...]
    skipped: dict[str, str]
    checksum: str | None = None  # "sha256:<hex>" of the file; None for a URL
    resumed: int = 0  # events of the file the dataset held from an interrupted import of it, not written again
    trees: dict[str, str] = field(default_factory=dict)  # every other tree of the file -> what became of it


IMPORT_PROGRAM = "giod import"  # the program recorded in the provenance of imported databases
#: Trees imported beside a file's ``Events``, each into the linked dataset ``<dataset>.<tree>``:
#: NanoAOD's ``Runs`` holds ``genEventSumw`` and ``genEventCount``, which normalise MC.
LINKED_TREES = ("Runs",)


def linked_dataset(dataset: str, tree: str) -> str:
    """The dataset that holds tree ``tree`` of the files imported into ``dataset``: ``ttbar.Runs``."""
    return f"{dataset}.{tree}"


def import_key(checksum: str) -> str:
    """The idempotency key of an import of the file with this checksum: database keys are
    ``<key>:<first entry>`` (``Writer(key_from=)``), so the key names the events each holds."""
    return f"{IMPORT_PROGRAM}:{checksum}"


def _gaps(ranges: list[tuple[int, int]], n_entries: int) -> list[tuple[int, int]]:
    """The entry ranges of ``[0, n_entries)`` that ``ranges`` (merged) leave out."""
    gaps, at = [], 0
    for lo, hi in ranges:
        if lo > at:
            gaps.append((at, min(lo, n_entries)))
        at = max(at, hi)
    if at < n_entries:
        gaps.append((at, n_entries))
    return [(lo, hi) for lo, hi in gaps if lo < hi]


# ---------------------------------------------------------------- reading


class _Columns:
    """The branches of one chunk by name, looked up in a dict.

    awkward finds a record's field by a search through its list of fields:
    for a chunk of about 1,000 branches, read member by member, that search
    costs more than the conversion itself.
    """

    def __init__(self, chunk: ak.Array) -> None:
        self.chunk = chunk
        record = chunk.layout
        self.n = len(chunk)
        fields = record.fields if isinstance(record, ak.contents.RecordArray) else []
        self.top = dict(zip(fields, record.contents, strict=True)) if fields else {}

    def __call__(self, key: str) -> ak.contents.Content:
        if "." in key:  # a field inside an RNTuple collection
            return self.chunk[tuple(key.split("."))].layout
        content = self.top.get(key)
        if content is None:  # let awkward say what is missing
            return self.chunk.layout.content(key)
        # as RecordArray.content: a field longer than its record is cut to the record's length
        return content if content.length == self.n else content[: self.n]


def _flat(column: _Columns, key: str, where: str) -> np.ndarray:
    """All values of one branch in the chunk, as one numpy array."""
    layout = column(key)
    # the usual layouts, taken apart directly: ak.flatten costs more than the copy
    if isinstance(layout, ak.contents.NumpyArray):
        return np.asarray(layout.data)
    if isinstance(layout, ak.contents.ListOffsetArray) and isinstance(layout.content, ak.contents.NumpyArray):
        offsets = np.asarray(layout.offsets.data)
        return np.asarray(layout.content.data)[offsets[0] : offsets[-1]]
    arr = ak.Array(layout)
    if arr.ndim > 1 and isinstance(layout, ak.contents.ListOffsetArray | ak.contents.ListArray):
        arr = ak.flatten(arr, axis=1)
    try:
        return np.asarray(ak.to_numpy(arr, allow_missing=False))
    except Exception as exc:  # awkward's errors vary by layout
        raise DataError(f"{where}: branch {key!r} does not hold plain numbers") from exc


def _counts(column: _Columns, plan: CollectionPlan) -> np.ndarray:
    if plan.counter is not None:
        return np.asarray(ak.Array(column(plan.counter)), dtype=np.int64)
    first = next(iter(plan.members.values())).keys[0]
    return np.asarray(ak.num(ak.Array(column(first)), axis=1), dtype=np.int64)


def _in_range(idx: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Indices as int32, with those outside ``0 <= idx < limit`` replaced by -1."""
    idx = idx.astype(np.int64, copy=False)
    return np.where((idx >= 0) & (idx < limit), idx, -1).astype(np.int32)


def _offsets(counts: np.ndarray) -> ak.index.Index64:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return ak.index.Index64(out)


def _member(column: _Columns, m: Member, n_obj: int, limit: np.ndarray | None, where: str) -> ak.contents.Content:
    """One field, relation or tag of one chunk; ``limit``: size of the target per object."""
    if m.many:
        per_object = _flat(column, m.keys[0], where).astype(np.int64)
        idx = _flat(column, m.keys[1], where)
        if len(per_object) != n_obj or int(per_object.sum()) != len(idx) or limit is None:
            raise DataError(f"{where}: list lengths do not match the stored indices")
        values = _in_range(idx, np.repeat(limit, per_object))
        return ak.contents.ListOffsetArray(_offsets(per_object), ak.contents.NumpyArray(values))
    if m.dtype == STRING:  # one string per event (a tag): awkward's layout is already giod's
        text = column(m.keys[0])
        if text.parameter("__array__") != "string" or text.length != n_obj:
            raise DataError(f"{where}: branch {m.keys[0]!r} does not hold one string per event")
        return text
    flats = [_flat(column, k, where) for k in m.keys]
    values = flats[0] if len(flats) == 1 else np.stack(flats, axis=-1)
    if len(values) != n_obj:  # a broken file
        raise DataError(f"{where}: {len(values)} values for {n_obj} objects")
    if limit is not None:
        return ak.contents.NumpyArray(_in_range(values, limit))
    values = values.reshape((n_obj, *m.shape)).astype(numpy_dtype(m.dtype), copy=False)
    if values.ndim == 1:  # what ak.from_numpy makes of it, without its dispatch (a fixed cost per branch)
        return ak.contents.NumpyArray(values)
    return ak.from_numpy(values, regulararray=True, highlevel=False)


def _events_from_chunk(chunk: ak.Array, layout: TreeLayout) -> ak.Array:
    """One chunk of branches as giod events, built from whole numpy buffers."""
    n_events = len(chunk)
    column = _Columns(chunk)
    counts = {coll: _counts(column, plan) for coll, plan in layout.collections.items()}
    columns: dict[str, ak.contents.Content] = {}
    for coll, plan in layout.collections.items():
        n_obj = int(counts[coll].sum())
        event_of = np.repeat(np.arange(n_events), counts[coll])
        parts = [
            _member(column, m, n_obj, None if m.target is None else counts[m.target][event_of], f"{coll}.{n}")
            for n, m in plan.members.items()
        ]
        records = ak.contents.RecordArray(
            parts, list(plan.members), length=n_obj, parameters={"__record__": plan.type_name}
        )
        columns[coll] = ak.contents.ListOffsetArray(_offsets(counts[coll]), records)
    for tag, m in layout.tags.items():
        columns[tag] = _member(column, m, n_events, None, f"tag {tag}")
    return ak.Array(ak.contents.RecordArray(list(columns.values()), list(columns), length=n_events))


def _filter_names(layout: TreeLayout) -> list[str]:
    """What to ask uproot for: an RNTuple field read whole, unless some of its subfields are skipped.

    uproot matches subfield names in time that grows with the square of the
    number of fields; naming top-level fields reads an importer-style NanoAOD
    about three times faster.
    """
    if layout.kind != "RNTuple":
        return layout.branches
    partial = {k.split(".", 1)[0] for k in layout.skipped if "." in k}
    tops = (k.split(".", 1)[0] for k in layout.branches)
    return list(dict.fromkeys(t if t not in partial else k for t, k in zip(tops, layout.branches, strict=True)))


def iterate_events(
    path: str | os.PathLike[str], layout: TreeLayout, step_size: int | str = "100 MB", *,
    entry_start: int | None = None, entry_stop: int | None = None,
) -> Iterator[ak.Array]:
    """Read the tree chunk by chunk as giod events (see :class:`TreeLayout`).

    Relation indices are int32; indices outside the target collection of
    their event become -1. ``entry_start`` / ``entry_stop`` read only the
    entries in between (all by default).
    """
    with open_root(path) as file, root_errors(path):
        yield from _iterate_tree(file[layout.tree_name], layout, step_size, entry_start, entry_stop)


def _read_tree(obj: Any, layout: TreeLayout, path: str | os.PathLike[str], step_size: int | str,
               entry_start: int | None, entry_stop: int | None) -> Iterator[ak.Array]:
    with root_errors(path):  # around the reading only: the consumer's errors are its own
        yield from _iterate_tree(obj, layout, step_size, entry_start, entry_stop)


def _iterate_tree(obj: Any, layout: TreeLayout, step_size: int | str, entry_start: int | None,
                  entry_stop: int | None) -> Iterator[ak.Array]:
    """:func:`iterate_events` on a tree already open."""
    wanted: Any = _filter_names(layout)
    if layout.kind != "RNTuple":
        # a set's lookup: uproot matches a list of names against every branch, one by one
        # (about 6 s for a tree of 1,200 branches)
        wanted = set(wanted).__contains__
    chunks = obj.iterate(filter_name=wanted, step_size=step_size, library="ak",
                         entry_start=entry_start, entry_stop=entry_stop)
    for chunk in chunks:
        yield _events_from_chunk(chunk, layout)


# ---------------------------------------------------------------- importing


def _dataset_for(target: Any, name: str, schema: Schema, container_format: str | None = None
                 ) -> tuple[Any, bool]:
    if not hasattr(target, "create_dataset"):  # a Dataset was given
        if getattr(target, "name", name) != name:
            raise ConfigError(f"dataset {target.name!r} was given but {name!r} was named")
        if target.schema != schema:
            raise SchemaError(f"dataset {name} has a schema different from the file's")
        return target, False
    try:
        ds = target.dataset(name)
    except NotFound:
        return target.create_dataset(name, schema, container_format=container_format), True
    if ds.schema != schema:
        raise SchemaError(
            f"dataset {name} exists with a schema different from the file's; "
            "import into a new dataset or evolve it first"
        )
    return ds, False


def file_checksum(path: str | os.PathLike[str]) -> str | None:
    """``sha256:<hex>`` of a local file's bytes; None for a URL (it would have to be read twice)."""
    if "://" in os.fspath(path):
        return None
    with root_errors(path), open(path, "rb") as fh:
        return "sha256:" + hashlib.file_digest(fh, "sha256").hexdigest()


def _to_import(ds: Any, checksum: str, path: str | os.PathLike[str], n_entries: int) -> list[tuple[int, int]]:
    """The entry ranges of the file still to import into ``ds``: all of them, or what an interrupted
    import of it left out; ConflictError when ``ds`` holds the file already (whole, or without keys
    that say which events)."""
    dbs = ds.databases()
    landed = keyed_ranges(dbs, import_key(checksum))
    if landed:
        gaps = _gaps(landed, n_entries)
        if gaps:
            return gaps
    held = [db for db in dbs if db.parameters.get("source_checksum") == checksum]
    if not held:
        return [(0, n_entries)]
    n = sum(db.n_events for db in held)
    # fewer events than the file has: an import into an existing dataset that was interrupted
    part = "all" if n >= n_entries else f"{n:,} of the {n_entries:,}"
    ids = ", ".join(str(db.id) for db in held[:5]) + (", ..." if len(held) > 5 else "")
    raise ConflictError(
        f"{os.fspath(path)} is already in dataset {ds.name}: {part} of its events, from "
        f"{held[0].parameters.get('source') or 'a file'} with the same {checksum.split(':', 1)[0]} "
        f"(database {ids}); use --append (append=True) to add it again"
    )


def import_root(
    fed_or_dataset: Any,
    path: str | os.PathLike[str],
    dataset_name: str,
    *,
    tree: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    step_size: int | str = "100 MB",
    append: bool = False,
    container_format: str | None = None,
) -> ImportReport:
    """Import every event of a ROOT tree into a dataset, creating it if needed.

    ``fed_or_dataset`` is a Federation (the dataset is created with the file's
    schema unless it exists with the same one) or a Dataset. ``progress`` is
    called with (events done, events in the file) after every chunk. A file
    whose checksum the dataset's provenance already holds raises
    ConflictError unless ``append`` is true; one an interrupted import (a
    crash, kill -9, Ctrl-C into an existing dataset) left partly imported is
    finished: every database records which entries of the file it holds (its
    idempotency key, see :func:`import_key`), and only the entries none holds
    are read and written (``ImportReport.resumed`` counts the others).
    ``container_format`` fixes the format of a dataset this import creates
    (see ``Federation.create_dataset``); an existing dataset keeps its own.
    """
    with open_root(path) as file:  # opened once: a wide tree's metadata costs seconds to read
        name, obj = find_tree(file, path, tree)
        layout = layout_of(file, name, obj, path)
        with root_errors(path):
            others = [t for t in tree_names(file) if t != layout.tree_name]
        return _import_tree(fed_or_dataset, path, dataset_name, layout, obj, others, progress=progress,
                            step_size=step_size, append=append, container_format=container_format)


def _import_tree(fed_or_dataset: Any, path: str | os.PathLike[str], dataset_name: str, layout: TreeLayout,
                 obj: Any, others: list[str], *, progress: Callable[[int, int], None] | None,
                 step_size: int | str, append: bool, container_format: str | None) -> ImportReport:
    """:func:`import_root` of the tree ``obj`` of an open file (``others``: the file's other trees)."""
    ds, created = _dataset_for(fed_or_dataset, dataset_name, layout.schema, container_format)
    checksum = file_checksum(path)
    todo = [(0, layout.n_entries)]
    if checksum is not None and not created and not append:
        todo = _to_import(ds, checksum, path, layout.n_entries)
    linked = [t for t in others if t in LINKED_TREES and layout.tree_name == DEFAULT_TREE]
    provenance: dict[str, Any] = {"source": os.path.basename(os.fspath(path)), "tree": layout.tree_name}
    if linked:
        provenance[TREES_KEY] = {t: linked_dataset(dataset_name, t) for t in linked}
    provenance[ROOT_NAMES] = layout.names.to_dict()  # how the export spells the file again
    key = None
    if checksum is not None:
        provenance["source_checksum"] = checksum
        provenance["source_entries"] = layout.n_entries  # fsck tells an import that did not finish
        # an append is the file once more on purpose: keys of its own, never taken for a resume
        key = import_key(checksum) + (f"/{uuid.uuid4().hex[:12]}" if append else "")
    resumed = layout.n_entries - sum(hi - lo for lo, hi in todo)
    done = chunks = 0
    trees = {t: f"not imported: giod imports one event tree; import it with --tree {t} --dataset NAME"
             for t in others}
    made: list[str] = []  # linked datasets this import created
    try:
        for t in linked:  # first: a file whose Runs cannot be imported leaves nothing behind
            trees[t] = _import_linked(ds.federation, path, linked_dataset(dataset_name, t), t, append=append,
                                      container_format=container_format, made=made)
        for start, stop in todo:
            with ds.writer(program=IMPORT_PROGRAM, parameters=provenance, idempotency_key=key,
                           key_from=None if key is None else start) as writer:
                with read_ahead(_read_tree(obj, layout, path, step_size, start, stop)) as ahead:
                    for events in ahead:
                        writer.append(events)
                        done += len(events)
                        chunks += 1
                        if progress is not None:
                            progress(resumed + done, layout.n_entries)
    except BaseException:
        if created:  # an import that created its dataset lands whole or not at all
            ds.federation.catalog.delete_dataset(dataset_name)
        for name in made:
            ds.federation.catalog.delete_dataset(name)
        raise
    return ImportReport(
        dataset=dataset_name,
        path=os.fspath(path),
        tree=layout.tree_name,
        n_events=done,
        n_chunks=chunks,
        created=created,
        collections=tuple(layout.collections),
        tags=tuple(layout.tags),
        skipped=dict(layout.skipped),
        checksum=checksum,
        resumed=resumed,
        trees=trees,
    )


def _import_linked(fed: Any, path: str | os.PathLike[str], name: str, tree: str, *, append: bool,
                   container_format: str | None, made: list[str]) -> str:
    """Import ``tree`` of the file into the linked dataset ``name``; what became of it, in words."""
    try:
        report = import_root(fed, path, name, tree=tree, append=append, container_format=container_format)
    except ConflictError:  # an interrupted import finished now, or the same file again: it is there
        return f"already in dataset {name}"
    except DataError as exc:  # a tree with nothing giod can read
        return f"not imported: {exc}"
    if report.created:
        made.append(name)
    n = report.n_events
    return f"{n:,} entr{'y' if n == 1 else 'ies'} into dataset {name}"
