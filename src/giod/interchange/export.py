"""giod events out: a flat NanoAOD-style ROOT tree, or one Parquet file.

The ROOT encoding of a schema (also what :mod:`giod.interchange.nanoaod`
expects when it reads such a file back) is described in
:mod:`giod.interchange.encoding`.

The Parquet export is one file with giod's container column types: a
list-of-struct column per collection, a scalar column per tag.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import awkward as ak
import numpy as np

from giod.errors import DataError, GiodError, NotFound, SchemaError, StorageError
from giod.interchange.ahead import read_ahead
from giod.interchange.encoding import (  # noqa: F401 - the encoding's names stay importable from here
    NAMES_KEY,
    ROOT_NAMES,
    SCHEMA_KEY,
    TREES_KEY,
    Encoding,
    RootNames,
    encode,
    identifier,
    index_field,
    is_name,
    numpy_dtype,
    relation_from_index,
)
from giod.read.objects import INDEX_SUFFIX
from giod.schema import STRING, Schema

if TYPE_CHECKING:
    import pyarrow as pa


# ------------------------------------------------- events to flat arrays


@dataclass
class _FlatEvents:
    """One chunk of events as flat numpy arrays, validated against the schema."""

    n_events: int
    counts: dict[str, np.ndarray] = field(default_factory=dict)
    members: dict[str, dict[str, Any]] = field(default_factory=dict)  # array or (per object, idx)
    tags: dict[str, np.ndarray] = field(default_factory=dict)


def _numbers(arr: ak.Array, where: str) -> np.ndarray:
    try:
        out = np.asarray(ak.to_numpy(arr, allow_missing=False))
    except Exception as exc:  # awkward's errors vary by layout
        raise DataError(f"{where}: values are missing or not numbers ({arr.type})") from exc
    if out.dtype.kind not in "biuf":
        raise DataError(f"{where}: expected numbers, got {arr.type}")
    return out


def _text(arr: ak.Array, where: str) -> ak.Array:
    """Strings, one per object or event; DataError for anything else."""
    if arr.layout.is_option or arr.layout.parameter("__array__") != "string":
        raise DataError(f"{where}: expected strings, got {arr.type}")
    return arr


def _no_text() -> ak.Array:
    return ak.Array([""])[:0]


def _cast(values: np.ndarray, dtype: str, shape: tuple[int, ...], where: str) -> np.ndarray:
    target = numpy_dtype(dtype)
    if values.shape[1:] != shape:
        got = list(values.shape[1:])
        raise DataError(f"{where}: expected shape {list(shape)} per value, got {got}")
    both_int = values.dtype.kind in "iu" and target.kind in "iu"
    if not both_int and not np.can_cast(values.dtype, target, casting="same_kind"):
        raise DataError(f"{where}: {values.dtype} values cannot be stored as {dtype}")
    if both_int and values.size and not np.can_cast(values.dtype, target, casting="safe"):
        info, lo, hi = np.iinfo(target), values.min(), values.max()
        if lo < info.min or hi > info.max:
            raise DataError(f"{where}: values {lo}..{hi} do not fit in {dtype}")
    return values.astype(target, copy=False)


def _get(events: ak.Array, name: str, what: str) -> ak.Array:
    if name not in ak.fields(events):
        have = ", ".join(ak.fields(events))
        raise DataError(f"the events have no {what} {name!r} (they have {have})")
    return events[name]


def _flatten_events(events: ak.Array, schema: Schema) -> _FlatEvents:
    """Validate one chunk against ``schema`` and take it apart into flat arrays."""
    if not isinstance(events, ak.Array) or events.ndim != 1 or not ak.fields(events):
        raise DataError("events must be an awkward Array of records")
    flat = _FlatEvents(len(events))
    for coll in schema.collections:
        tdef = schema.collection_type(coll)
        records = _get(events, coll, "collection")
        try:
            counts = np.asarray(ak.num(records, axis=1), dtype=np.int64)
            objects = ak.flatten(records, axis=1)
        except Exception as exc:  # not a list per event
            got = records.type
            raise DataError(f"collection {coll}: expected a list per event, got {got}") from exc
        flat.counts[coll] = counts
        members: dict[str, Any] = {}
        for name, fdef in tdef.fields.items():
            where = f"{coll}.{name}"
            values = _get(objects, name, f"field of {coll}")
            if fdef.dtype == STRING:
                members[name] = _text(values, where)
                continue
            members[name] = _cast(_numbers(values, where), fdef.dtype, fdef.shape, where)
        present = set(ak.fields(objects))
        for name, rdef in tdef.relations.items():
            where = f"{coll}.{name}"
            # events read from a dataset carry the indices beside a navigable view
            stored = name + INDEX_SUFFIX if name + INDEX_SUFFIX in present else name
            values = _get(objects, stored, f"relation of {coll}")
            if rdef.many:
                try:
                    per_object = np.asarray(ak.num(values, axis=1), dtype=np.int64)
                    values = ak.flatten(values, axis=1)
                except Exception as exc:  # not a list per object
                    raise DataError(f"{where}: expected a list of indices per object") from exc
                idx = _numbers(values, where)
                members[name] = (per_object, _cast(idx, "int32", (), where))
            else:
                idx = _numbers(ak.fill_none(values, -1), where)
                members[name] = _cast(idx, "int32", (), where)
        flat.members[coll] = members
    for tag, fdef in schema.tags.items():
        where = f"tag {tag}"
        if fdef.dtype == STRING:
            flat.tags[tag] = _text(_get(events, tag, "tag"), where)
            continue
        values = _numbers(_get(events, tag, "tag"), where)
        flat.tags[tag] = _cast(values, fdef.dtype, fdef.shape, where)
    return flat


def _as_schema(schema: Any) -> Schema:
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, Mapping):
        return Schema.from_dict(schema)
    if hasattr(schema, "schema_dict"):  # a TreeLayout
        built: Schema = schema.schema
        return built
    kind = type(schema).__name__
    raise SchemaError(f"expected a Schema, a schema dict or a TreeLayout, got {kind}")


def _chunks(arrays: Iterable[ak.Array] | ak.Array, schema: Schema) -> Iterator[_FlatEvents]:
    for chunk in [arrays] if isinstance(arrays, ak.Array) else arrays:
        if len(chunk):
            yield _flatten_events(chunk, schema)


@dataclass
class _Replacing:
    """Write to a temporary name beside ``path``; rename into place only on success."""

    path: str
    temp: str = ""

    def __enter__(self) -> str:
        directory = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(directory):
            raise StorageError(f"cannot write {self.path}: directory {directory} does not exist")
        unique = uuid.uuid4().hex[:12]
        self.temp = os.path.join(directory, f".{os.path.basename(self.path)}.{unique}.part")
        return self.temp

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            try:
                os.replace(self.temp, self.path)
                return
            except OSError as err:
                raise StorageError(f"cannot write {self.path}: {err.strerror}") from err
        if os.path.exists(self.temp):
            os.remove(self.temp)


# ---------------------------------------------------------------- ROOT out


def _root_arrays(flat: _FlatEvents, schema: Schema, enc: Encoding) -> tuple[dict[str, Any], dict[str, str]]:
    """The branches of one chunk (tags, then collections), and the counter of each jagged branch."""
    out: dict[str, Any] = {enc.tags[tag]: values for tag, values in flat.tags.items()}
    counter_of: dict[str, str] = {}
    for coll, counts in flat.counts.items():
        tdef = schema.collection_type(coll)
        counter = enc.counters[coll]
        for name, keys in enc.sources[coll].items():
            if (coll, name) in enc.from_field:
                continue  # the field of the same branch holds the indices as they came
            value = flat.members[coll][name]
            rdef = tdef.relations.get(name)
            if rdef is not None and rdef.many:
                per_object, idx = value
                event_of = np.repeat(np.arange(flat.n_events), counts)
                per_event = np.bincount(event_of, weights=per_object, minlength=flat.n_events)
                out[keys[0]] = ak.unflatten(per_object.astype(np.int32), counts)
                out[keys[1]] = ak.unflatten(idx, per_event.astype(np.int64))
                counter_of[keys[0]] = counter
                counter_of[keys[1]] = enc.counters[f"{coll}_{name}"]
                continue
            if isinstance(value, ak.Array):  # uproot writes strings per event, not per object
                raise DataError(f"{coll}.{name}: strings of objects cannot be written to a ROOT tree "
                                "(strings per event, as tags, can)")
            columns = value.reshape(len(value), len(keys)) if len(keys) > 1 else value[:, None]
            for i, key in enumerate(keys):  # a fixed-size field is split into one branch per element
                out[key] = ak.unflatten(columns[:, i], counts)
                counter_of[key] = counter
    return out, counter_of


def _branch_type(value: Any) -> Any:
    if isinstance(value, ak.Array):
        return value.type.content
    return value.dtype


def _mktree(file: Any, name: str, branches: dict[str, Any], counter_of: dict[str, str], enc: Encoding,
            titles: dict[str, str]) -> Any:
    types = {k: _branch_type(v) for k, v in branches.items()}
    tree = file.mktree(name, types, counter_name=counter_of.__getitem__)
    if enc.counter_types or titles:
        _set_branch_metadata(file, tree, enc.counter_types, titles)
    return tree


def _titles(schema: Schema, enc: Encoding, names: RootNames) -> dict[str, str]:
    """Branch titles: the schema's documentation (NanoAOD's titles), else what the source file had."""
    out = dict(names.titles)
    for coll, cdef in schema.collections.items():
        if cdef.doc:
            out[enc.counters[coll]] = cdef.doc
        tdef = schema.collection_type(coll)
        documented = {n: f.doc for n, f in tdef.fields.items() if f.doc}
        documented |= {n: r.doc for n, r in tdef.relations.items() if r.doc and (coll, n) not in enc.from_field}
        for member, doc in documented.items():
            out.update(dict.fromkeys(enc.sources[coll][member], doc))
    out.update({enc.tags[t]: f.doc for t, f in schema.tags.items() if f.doc})
    return out


def _set_branch_metadata(file: Any, tree: Any, types: dict[str, str], titles: dict[str, str]) -> None:
    """Give counters the integer type the source file had (uproot writes every counter as int32), and
    branches their titles (uproot writes the leaf list).

    uproot has no option for either: the branches' descriptions are changed in
    place and the tree's metadata written again, before any entry. The leaves
    keep uproot's leaf list, which is what readers take the type from.
    """
    from uproot.writing._cascadetree import _dtype_to_char

    cascade = tree._cascading
    for datum in cascade._branch_data:
        wanted = types.get(datum["fName"])
        if datum["kind"] == "counter" and wanted is not None:
            dtype = np.dtype(wanted).newbyteorder(">")
            datum["dtype"] = dtype
            datum["fTitle"] = f"{datum['fName']}/{_dtype_to_char[dtype]}"
        if datum["fName"] in titles:
            datum["fTitle"] = titles[datum["fName"]]
    cascade.write_anew(file._file.sink)


def _empty(schema: Schema) -> _FlatEvents:
    flat = _FlatEvents(0)
    for coll in schema.collections:
        tdef = schema.collection_type(coll)
        flat.counts[coll] = np.zeros(0, np.int64)
        members: dict[str, Any] = {
            n: _no_text() if f.dtype == STRING else np.zeros((0, *f.shape), numpy_dtype(f.dtype))
            for n, f in tdef.fields.items()
        }
        for n, r in tdef.relations.items():
            idx = np.zeros(0, np.int32)
            members[n] = (np.zeros(0, np.int64), idx) if r.many else idx
        flat.members[coll] = members
    flat.tags = {
        t: _no_text() if f.dtype == STRING else np.zeros(0, numpy_dtype(f.dtype)) for t, f in schema.tags.items()
    }
    return flat


def root_names(source: Any) -> RootNames | None:
    """The ROOT spelling recorded when the databases of ``source`` (a Dataset or Selection) were imported.

    None when no database was imported from ROOT or when they disagree (files
    of different layouts in one dataset): the export then uses the defaults.
    """
    found = {
        json.dumps(db.parameters.get(ROOT_NAMES), sort_keys=True)
        for db in source.databases()
        if isinstance(db.parameters.get(ROOT_NAMES), dict)
    }
    if len(found) != 1:
        return None
    return RootNames.from_dict(json.loads(found.pop()))


def linked_trees(source: Any) -> dict[str, Any]:
    """The trees imported beside the events of ``source`` (a Selection), as selections of their
    linked datasets at the same version: ``{"Runs": <Selection of ttbar.Runs>}``.

    A linked tree is written whole whatever the events' selection: ``Runs``
    sums every generated event, before any cut.
    """
    found: dict[str, str] = {}
    for db in source.dataset.databases():  # every file of the dataset, whichever events are selected
        trees = db.parameters.get(TREES_KEY)
        if isinstance(trees, dict):
            found.update({str(k): str(v) for k, v in trees.items()})
    from giod.read.selection import Selection

    store = source.dataset.store
    out: dict[str, Any] = {}
    for tree, name in sorted(found.items()):
        try:
            out[tree] = Selection(store.dataset(name, version=source.version), None)
        except NotFound:  # the linked dataset was deleted since: the events are still written
            continue
    return out


def _write_tree(file: Any, tree_name: str, arrays: Iterable[ak.Array] | ak.Array, model: Schema,
                names: RootNames) -> None:
    enc = encode(model, names)
    titles = _titles(model, enc, names)

    def branches() -> Iterator[dict[str, Any]]:
        for flat in _chunks(arrays, model):
            yield _root_arrays(flat, model, enc)[0]

    # The next chunk is read and taken apart in a thread while uproot compresses this one (zlib,
    # outside the GIL). The tree is made from the schema (the branches of no events have the types
    # of every chunk's: _flatten_events casts to the schema) while the first chunk is read: uproot's
    # mktree costs seconds for a wide tree, in Python, and reading a chunk mostly does not need the GIL.
    with read_ahead(branches()) as ahead:
        out = _mktree(file, tree_name, *_root_arrays(_empty(model), model, enc), enc, titles)
        for chunk in ahead:
            out.extend(chunk)


def write_root(
    path: str | os.PathLike[str],
    arrays: Iterable[ak.Array] | ak.Array,
    schema: Any,
    *,
    tree: str | None = None,
    embed_schema: bool = True,
    names: RootNames | None = None,
    trees: Mapping[str, Any] | None = None,
) -> None:
    """Write events as a flat NanoAOD-style TTree, one chunk at a time.

    ``schema`` is a Schema (or its dict form); ``arrays`` yields chunks of
    events. ``names`` (recorded when a dataset was imported, see
    :func:`root_names`) spells the tree, counters and branches as the source
    file did; ``tree`` overrides the tree name (default ``Events``). Each
    ``trees`` entry (a Selection, see :func:`linked_trees`) is written as one
    more tree of that name (NanoAOD's ``Runs``). The file appears under
    ``path`` only once it is complete. With ``embed_schema`` the giod schema
    (and the names) of the events travel in the file so that an import
    restores them exactly. Documentation (``doc``) becomes branch titles.
    """
    import uproot

    model = _as_schema(schema)
    names = names or RootNames()
    encode(model, names)  # a schema that cannot be written is refused before any file is made
    target = os.fspath(path)
    try:
        with _Replacing(target) as temp, uproot.recreate(temp) as file:
            if embed_schema:
                file[SCHEMA_KEY] = model.to_yaml()
                if names != RootNames():
                    file[NAMES_KEY] = names.to_json()
            _write_tree(file, tree or names.tree, arrays, model, names)
            for name, linked in (trees or {}).items():
                _write_tree(file, name, linked.iterate(), linked.dataset.schema, root_names(linked) or RootNames())
    except GiodError:
        raise
    except OSError as exc:
        raise StorageError(f"cannot write {target}: {exc.strerror or exc}") from exc
    except (ValueError, TypeError) as exc:  # uproot's writer refusing a layout
        raise DataError(f"cannot write {target} as ROOT: {exc}") from exc


# ------------------------------------------------------------- Parquet out


def _arrow_values(values: np.ndarray | ak.Array, arrow_type: pa.DataType) -> pa.Array:
    """Flat values (one row per object, inner dimensions for fixed arrays) as ``arrow_type``."""
    import pyarrow as pa

    if isinstance(values, ak.Array):  # strings
        return ak.to_arrow(values, extensionarray=False).cast(arrow_type)
    if pa.types.is_fixed_size_list(arrow_type):
        inner = _arrow_values(values.reshape(-1, *values.shape[2:]), arrow_type.value_type)
        return pa.FixedSizeListArray.from_arrays(inner, type=arrow_type)
    return pa.array(values, type=arrow_type)


def _offsets(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def _arrow_table(flat: _FlatEvents, schema: Schema, arrow_schema: pa.Schema) -> pa.Table:
    import pyarrow as pa

    columns: list[pa.Array] = []
    for coll, counts in flat.counts.items():
        list_type = arrow_schema.field(coll).type
        struct_type = list_type.value_type
        children: list[pa.Array] = []
        for child in struct_type:
            value = flat.members[coll][child.name]
            if isinstance(value, tuple):  # a one-to-many relation
                per_object, idx = value
                offsets = pa.array(_offsets(per_object).astype(np.int32))
                children.append(pa.ListArray.from_arrays(offsets, pa.array(idx), type=child.type))
            else:
                children.append(_arrow_values(value, child.type))
        struct = pa.StructArray.from_arrays(children, fields=list(struct_type))
        offsets = pa.array(_offsets(counts).astype(np.int32))
        columns.append(pa.ListArray.from_arrays(offsets, struct, type=list_type))
    for tag, values in flat.tags.items():
        columns.append(_arrow_values(values, arrow_schema.field(tag).type))
    return pa.Table.from_arrays(columns, schema=arrow_schema)


def write_parquet(path: str | os.PathLike[str], arrays: Iterable[ak.Array] | ak.Array, schema: Any) -> None:
    """Write events to one Parquet file: a list-of-struct column per collection, one per tag.

    The columns use giod's container types (plain Arrow, no extension types),
    so pyarrow, DuckDB or polars read the file without giod; the schema YAML
    is in the file metadata under ``giod.schema``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    model = _as_schema(schema)
    fields = [pa.field(c, model.arrow_type(c), nullable=False) for c in model.collections]
    fields += [pa.field(t, f.arrow_type, nullable=False) for t, f in model.tags.items()]
    arrow_schema = pa.schema(fields, metadata={b"giod.schema": model.to_yaml().encode()})
    target = os.fspath(path)
    try:
        with (
            _Replacing(target) as temp,
            pq.ParquetWriter(temp, arrow_schema, compression="zstd") as writer,
        ):
            for flat in _chunks(arrays, model):
                writer.write_table(_arrow_table(flat, model, arrow_schema))
    except GiodError:
        raise
    except OSError as exc:
        raise StorageError(f"cannot write {target}: {exc.strerror or exc}") from exc
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise DataError(f"cannot write {target} as Parquet: {exc}") from exc
