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

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import awkward as ak
import numpy as np

from giod.errors import (
    ConfigError,
    DataError,
    GiodError,
    IntegrityError,
    NotFound,
    SchemaError,
    StorageError,
)
from giod.interchange.export import (
    SCHEMA_KEY,
    encode,
    identifier,
    is_name,
    numpy_dtype,
    relation_from_index,
)
from giod.schema import Schema

DEFAULT_TREE = "Events"
_IDX = re.compile(r"^([A-Za-z][A-Za-z0-9]*?)Idx(.*)$")
_TREE_KINDS = ("TTree", "ROOT::RNTuple")

Mapped = tuple[str, str] | str  # (collection, field or relation) or a tag name


@dataclass(frozen=True)
class Member:
    """Where one field, relation or tag comes from and what it becomes."""

    keys: tuple[str, ...]  # one branch; the elements of a split array; or (per object, indices)
    dtype: str = "int32"
    shape: tuple[int, ...] = ()
    target: str | None = None  # the collection a relation points into
    many: bool = False


@dataclass(frozen=True)
class CollectionPlan:
    type_name: str
    counter: str | None  # None: sizes come from the first member's lists
    members: dict[str, Member]  # fields, then relations


@dataclass(frozen=True)
class TreeLayout:
    """What the branches of one event tree become in giod.

    ``mapping`` sends each branch read to ``(collection, member)`` or to a tag
    name; ``skipped`` names every branch left out and why. ``collections``
    and ``tags`` are the read plan :func:`iterate_events` follows.
    """

    tree_name: str
    n_entries: int
    schema_dict: dict[str, Any]
    mapping: dict[str, Mapped]
    skipped: dict[str, str]
    kind: str = "TTree"
    embedded: bool = False  # True when the layout follows a giod_schema stored in the file
    collections: dict[str, CollectionPlan] = field(default_factory=dict, repr=False)
    tags: dict[str, Member] = field(default_factory=dict, repr=False)

    @cached_property
    def schema(self) -> Schema:
        """The giod schema built from :attr:`schema_dict`."""
        return Schema.from_dict(self.schema_dict, source=f"tree {self.tree_name}")

    @property
    def branches(self) -> list[str]:
        """Every branch (or RNTuple field) that :func:`iterate_events` reads."""
        keys = [c.counter for c in self.collections.values() if c.counter is not None]
        for plan in self.collections.values():
            for member in plan.members.values():
                keys.extend(member.keys)
        for tag in self.tags.values():
            keys.extend(tag.keys)
        return list(dict.fromkeys(keys))


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


# ------------------------------------------------------------------ opening


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:200] + "...") if len(text) > 200 else (text or type(exc).__name__)


@contextmanager
def _reading(path: str | os.PathLike[str]) -> Iterator[None]:
    """Map what uproot and the file system raise to giod errors."""
    name = os.fspath(path)
    try:
        yield
    except (GiodError, AttributeError, NameError, TypeError):
        raise  # ours, or a bug: either way not the file's fault
    except FileNotFoundError as exc:
        raise NotFound(f"no such file: {name}") from exc
    except OSError as exc:
        if exc.errno is not None:  # the system refused; without errno, uproot found too few bytes
            raise StorageError(f"cannot read {name}: {exc.strerror}") from exc
        raise IntegrityError(f"cannot read ROOT file {name}: it is truncated or corrupt ({_one_line(exc)})") from exc
    except Exception as exc:  # uproot: ValueError, DeserializationError, zlib.error, ...
        raise IntegrityError(f"cannot read ROOT file {name}: it is truncated or corrupt ({_one_line(exc)})") from exc


def _open(path: str | os.PathLike[str]) -> Any:
    import uproot

    name = os.fspath(path)
    if "://" not in name:  # local files: say plainly what is wrong before uproot guesses
        if not os.path.exists(name):
            raise NotFound(f"no such file: {name}")
        if os.path.isdir(name):
            raise StorageError(f"{name} is a directory, not a ROOT file")
        with _reading(path), open(name, "rb") as fh:
            if fh.read(4) != b"root":
                raise StorageError(f"{name} is not a ROOT file")
    with _reading(path):
        # the {path: None} form stops uproot from reading "file:tree" out of a colon
        return uproot.open({name: None})


def _find_tree(file: Any, path: str | os.PathLike[str], tree: str | None) -> tuple[str, Any]:
    with _reading(path):
        found = {k.rsplit(";", 1)[0]: v for k, v in file.classnames().items() if v in _TREE_KINDS}
        if tree is not None:
            if tree not in found:
                have = ", ".join(sorted(found)) or "none"
                raise NotFound(f"{os.fspath(path)} has no tree {tree!r} (trees: {have})")
            name = tree
        elif DEFAULT_TREE in found:
            name = DEFAULT_TREE
        elif len(found) == 1:
            name = next(iter(found))
        else:
            lowered = [k for k in found if k.lower() == DEFAULT_TREE.lower()]
            if len(lowered) == 1:
                name = lowered[0]
            elif not found:
                raise NotFound(f"{os.fspath(path)} holds no TTree or RNTuple")
            else:
                raise ConfigError(
                    f"{os.fspath(path)} holds several trees ({', '.join(sorted(found))}); choose one with tree=NAME"
                )
        return name, file[name]


# ------------------------------------------------------------ branch types


def _dtype_name(dtype: np.dtype) -> str | None:
    base = dtype.base
    if base.kind == "b":
        return "bool"
    if base.kind in "iu" and base.itemsize in (1, 2, 4, 8):
        return f"{'int' if base.kind == 'i' else 'uint'}{8 * base.itemsize}"
    if base.kind == "f" and base.itemsize in (4, 8):
        return f"float{8 * base.itemsize}"
    return None


def _describe(interp: Any, typename: str) -> tuple[str, str | None, tuple[int, ...], str]:
    """(kind, dtype, inner shape, reason) of a branch: kind is scalar, jagged or skip."""
    from uproot.interpretation.jagged import AsJagged
    from uproot.interpretation.numerical import AsDtype

    if isinstance(interp, AsDtype):
        name = _dtype_name(interp.to_dtype)
        if name is None:
            return "skip", None, (), f"unsupported type {typename}"
        return "scalar", name, tuple(interp.to_dtype.shape), ""
    if isinstance(interp, AsJagged) and isinstance(interp.content, AsDtype):
        name = _dtype_name(interp.content.to_dtype)
        if name is None:
            return "skip", None, (), f"unsupported type {typename}"
        if interp.content.to_dtype.shape:
            return "skip", None, (), f"jagged fixed-size arrays ({typename}) are not supported"
        return "jagged", name, (), ""
    if type(interp).__name__ == "AsStrings":
        return "skip", None, (), "strings are not supported"
    if isinstance(interp, AsJagged):
        return "skip", None, (), f"doubly-jagged type {typename} is not supported"
    return "skip", None, (), f"unsupported type {typename}"


@dataclass
class _Draft:
    """Collections and tags found so far, before relations are linked."""

    counters: dict[str, str | None] = field(default_factory=dict)  # None: sizes from the lists
    fields: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)  # -> (key, dtype)
    tags: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (key, dtype)
    skipped: dict[str, str] = field(default_factory=dict)

    def add_field(self, coll: str, member: str, key: str, dtype: str) -> None:
        if not is_name(member) or member.endswith("_index"):
            self.skipped[key] = f"{member!r} is not a usable field name"
        elif member in self.fields.setdefault(coll, {}):
            self.skipped[key] = f"field {member!r} of {coll} already comes from another branch"
        else:
            self.fields[coll][member] = (key, dtype)


def _collection_of(counter: str, members: list[str]) -> str:
    """Collection name for a counter branch (``nJet``/``NJet`` -> ``Jet``)."""
    guess = counter[1:] if counter[:1] in "nN" and len(counter) > 1 else counter
    guess = guess.rstrip("_") or guess  # giod writes nJet_ when a tag is called nJet
    for m in members:  # prefer the spelling the counted branches use
        if m.lower().startswith(guess.lower() + "_") or m.lower() == guess.lower():
            return m[: len(guess)]
    return guess


def _member_of(coll: str, branch: str) -> str:
    if branch.lower() == coll.lower():
        return "value"
    if branch.lower().startswith(coll.lower() + "_"):
        return branch[len(coll) + 1 :]
    return branch


def _draft_ttree(tree: Any) -> _Draft:
    draft = _Draft()
    jagged: dict[str, list[tuple[str, str]]] = {}  # counter -> (branch, dtype)
    scalars: list[tuple[str, str, tuple[int, ...]]] = []
    for b in tree.branches:
        if b.branches:
            draft.skipped[b.name] = f"object branch {b.typename} with sub-branches is not supported"
            continue
        kind, dtype, shape, reason = _describe(b.interpretation, b.typename)
        if kind == "skip" or dtype is None:
            draft.skipped[b.name] = reason
        elif kind == "jagged" and b.count_branch is None:
            draft.skipped[b.name] = "jagged branch without a counter (std::vector) is not supported"
        elif kind == "jagged":
            jagged.setdefault(b.count_branch.name, []).append((b.name, dtype))
        else:
            scalars.append((b.name, dtype, shape))

    for counter, members in jagged.items():
        coll = _collection_of(counter, [m for m, _ in members])
        if not is_name(coll) or coll in draft.counters:
            for m, _ in members:
                draft.skipped[m] = f"counter {counter!r} does not name a usable collection"
            continue
        draft.counters[coll] = counter
        for m, dtype in members:
            draft.add_field(coll, _member_of(coll, m), m, dtype)
    empty = [c for c in draft.counters if not draft.fields.get(c)]
    used = {draft.counters[c] for c in draft.counters if draft.fields.get(c)}
    for c in empty:  # a counter with nothing left to count is just a number
        del draft.counters[c]
        draft.fields.pop(c, None)
    for name, dtype, shape in scalars:
        if name in used:
            continue
        if shape:
            draft.skipped[name] = "fixed-size arrays cannot be tags (tags are scalars)"
        elif not is_name(name):
            draft.skipped[name] = f"{name!r} is not a usable tag name"
        elif name in draft.counters:
            draft.skipped[name] = f"tag name {name!r} clashes with a collection"
        else:
            draft.tags[name] = (name, dtype)
    return draft


def _form_dtype(form: Any) -> str | None:
    """The giod dtype of a plain numeric RNTuple field, else None."""
    if isinstance(form, ak.forms.NumpyForm) and not form.inner_shape:
        return _dtype_name(np.dtype(form.primitive))
    return None


def _draft_rntuple(ntuple: Any) -> _Draft:
    form = ntuple.to_akform()[0]
    draft = _Draft()
    for name, content in zip(form.fields, form.contents, strict=True):
        inner = content.content if isinstance(content, ak.forms.ListOffsetForm) else None
        if not is_name(name):
            draft.skipped[name] = f"{name!r} is not a usable name"
        elif (dtype := _form_dtype(content)) is not None:
            draft.tags[name] = (name, dtype)
        elif (dtype := _form_dtype(inner)) is not None:  # a list of numbers
            draft.counters[name] = None
            draft.add_field(name, "value", name, dtype)
        elif isinstance(inner, ak.forms.RecordForm):
            draft.counters[name] = None
            for fname, fcontent in zip(inner.fields, inner.contents, strict=True):
                key = f"{name}.{fname}"
                if (dtype := _form_dtype(fcontent)) is None:
                    draft.skipped[key] = f"unsupported field type {fcontent.type}"
                else:
                    draft.add_field(name, _member_of(name, fname), key, dtype)
            if not draft.fields.get(name):
                del draft.counters[name]
                draft.skipped[name] = "no field of a supported type"
        else:
            draft.skipped[name] = f"unsupported type {content.type}"
    return draft


def _target(written: str, collections: list[str]) -> str | None:
    """The collection an index field points to, case- and plural-tolerant."""
    exact = [c for c in collections if c.lower() == written.lower()]
    if len(exact) == 1:
        return exact[0]
    stem = written.lower().removesuffix("s")
    loose = [c for c in collections if c.lower().removesuffix("s") == stem]
    return loose[0] if len(loose) == 1 else None


def _layout_from_draft(draft: _Draft, tree_name: str, n: int, kind: str) -> TreeLayout:
    names = sorted(draft.fields)  # the order giod's schema gives collections
    plans: dict[str, CollectionPlan] = {}
    types: dict[str, Any] = {}
    mapping: dict[str, Mapped] = {}
    for coll in names:
        found = draft.fields[coll]
        fields: dict[str, Member] = {}
        relations: dict[str, Member] = {}
        for name, (key, dtype) in found.items():
            m = _IDX.match(name) if dtype.startswith(("int", "uint")) else None
            target = _target(m.group(1), names) if m else None
            rel = relation_from_index(m.group(1), m.group(2)) if m and target else ""
            if target and is_name(rel) and rel not in found and rel not in relations:
                relations[rel] = Member((key,), target=target)
                mapping[key] = (coll, rel)
            else:
                fields[name] = Member((key,), dtype)
                mapping[key] = (coll, name)
        plans[coll] = CollectionPlan(coll, draft.counters[coll], {**fields, **relations})
        types[coll] = {"fields": {f: m.dtype for f, m in fields.items()}}
        if relations:
            types[coll]["relations"] = {r: {"to": m.target} for r, m in relations.items()}
    schema_dict: dict[str, Any] = {
        "schema_version": 1,
        "name": identifier(tree_name.lower()),
        "types": types,
        "collections": {c: c for c in names},
    }
    if draft.tags:
        schema_dict["tags"] = {t: dtype for t, (_, dtype) in draft.tags.items()}
    mapping.update({key: t for t, (key, _) in draft.tags.items()})
    return TreeLayout(
        tree_name=tree_name,
        n_entries=n,
        schema_dict=schema_dict,
        mapping=mapping,
        skipped=dict(draft.skipped),
        kind=kind,
        collections=plans,
        tags={t: Member((key,), dtype) for t, (key, dtype) in draft.tags.items()},
    )


def _layout_from_embedded(tree: Any, tree_name: str, text: str) -> TreeLayout | None:
    """Follow the schema giod wrote into the file, if every branch it names is there."""
    try:
        schema = Schema.from_text(text, source=SCHEMA_KEY)
        enc = encode(schema)
    except GiodError:
        return None
    have = set(tree.keys())
    if not set(enc.branches()) <= have:
        return None
    plans: dict[str, CollectionPlan] = {}
    mapping: dict[str, Mapped] = {}
    for coll, sources in enc.sources.items():
        tdef = schema.collection_type(coll)
        members = {n: Member(sources[n], f.dtype, f.shape) for n, f in tdef.fields.items()} | {
            n: Member(sources[n], target=r.target, many=r.many) for n, r in tdef.relations.items()
        }
        plans[coll] = CollectionPlan(tdef.name, enc.counters[coll], members)
        mapping.update({k: (coll, n) for n, m in members.items() for k in m.keys})
    mapping.update({key: t for t, key in enc.tags.items()})
    unread = have - set(enc.branches())
    return TreeLayout(
        tree_name=tree_name,
        n_entries=int(tree.num_entries),
        schema_dict=schema.to_dict(),
        mapping=mapping,
        skipped={b: "not in the giod schema stored in the file" for b in unread},
        embedded=True,
        collections=plans,
        tags={t: Member((enc.tags[t],), f.dtype) for t, f in schema.tags.items()},
    )


def inspect_tree(path: str | os.PathLike[str], tree: str | None = None) -> TreeLayout:
    """Decide how the event tree in ``path`` maps onto collections, relations and tags.

    The tree is ``tree``, else ``Events``, else the file's only TTree or RNTuple.
    Raises NotFound (no file, no tree), StorageError (not a readable ROOT file)
    or ConfigError (several trees and none chosen).
    """
    with _open(path) as file:
        name, obj = _find_tree(file, path, tree)
        with _reading(path):
            kind = "RNTuple" if "RNTuple" in type(obj).__name__ else "TTree"
            if kind == "TTree" and SCHEMA_KEY in file:
                layout = _layout_from_embedded(obj, name, str(file[SCHEMA_KEY]))
                if layout is not None:
                    return layout
            draft = _draft_rntuple(obj) if kind == "RNTuple" else _draft_ttree(obj)
            n = int(obj.num_entries)
    if not draft.fields and not draft.tags:
        raise DataError(f"tree {name!r} in {os.fspath(path)} has no branch giod can read")
    return _layout_from_draft(draft, name, n, kind)


# ---------------------------------------------------------------- reading


def _column(chunk: ak.Array, key: str) -> ak.contents.Content:
    if "." in key:  # a field inside an RNTuple collection
        return chunk[tuple(key.split("."))].layout
    # straight to the layout: high-level field access costs more than the conversion
    return chunk.layout.content(key)


def _flat(chunk: ak.Array, key: str, where: str) -> np.ndarray:
    """All values of one branch in the chunk, as one numpy array."""
    layout = _column(chunk, key)
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


def _counts(chunk: ak.Array, plan: CollectionPlan) -> np.ndarray:
    if plan.counter is not None:
        return np.asarray(chunk[plan.counter], dtype=np.int64)
    first = next(iter(plan.members.values())).keys[0]
    return np.asarray(ak.num(ak.Array(_column(chunk, first)), axis=1), dtype=np.int64)


def _in_range(idx: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Indices as int32, with those outside ``0 <= idx < limit`` replaced by -1."""
    idx = idx.astype(np.int64, copy=False)
    return np.where((idx >= 0) & (idx < limit), idx, -1).astype(np.int32)


def _offsets(counts: np.ndarray) -> ak.index.Index64:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return ak.index.Index64(out)


def _member(chunk: ak.Array, m: Member, n_obj: int, limit: np.ndarray | None, where: str) -> ak.contents.Content:
    """One field, relation or tag of one chunk; ``limit``: size of the target per object."""
    if m.many:
        per_object = _flat(chunk, m.keys[0], where).astype(np.int64)
        idx = _flat(chunk, m.keys[1], where)
        if len(per_object) != n_obj or int(per_object.sum()) != len(idx) or limit is None:
            raise DataError(f"{where}: list lengths do not match the stored indices")
        values = _in_range(idx, np.repeat(limit, per_object))
        return ak.contents.ListOffsetArray(_offsets(per_object), ak.contents.NumpyArray(values))
    flats = [_flat(chunk, k, where) for k in m.keys]
    values = flats[0] if len(flats) == 1 else np.stack(flats, axis=-1)
    if len(values) != n_obj:  # a broken file
        raise DataError(f"{where}: {len(values)} values for {n_obj} objects")
    if limit is not None:
        return ak.contents.NumpyArray(_in_range(values, limit))
    values = values.reshape((n_obj, *m.shape)).astype(numpy_dtype(m.dtype), copy=False)
    return ak.from_numpy(values, regulararray=True, highlevel=False)


def _events_from_chunk(chunk: ak.Array, layout: TreeLayout) -> ak.Array:
    """One chunk of branches as giod events, built from whole numpy buffers."""
    n_events = len(chunk)
    counts = {coll: _counts(chunk, plan) for coll, plan in layout.collections.items()}
    columns: dict[str, ak.contents.Content] = {}
    for coll, plan in layout.collections.items():
        n_obj = int(counts[coll].sum())
        event_of = np.repeat(np.arange(n_events), counts[coll])
        parts = [
            _member(chunk, m, n_obj, None if m.target is None else counts[m.target][event_of], f"{coll}.{n}")
            for n, m in plan.members.items()
        ]
        records = ak.contents.RecordArray(
            parts, list(plan.members), length=n_obj, parameters={"__record__": plan.type_name}
        )
        columns[coll] = ak.contents.ListOffsetArray(_offsets(counts[coll]), records)
    for tag, m in layout.tags.items():
        columns[tag] = _member(chunk, m, n_events, None, f"tag {tag}")
    return ak.Array(ak.contents.RecordArray(list(columns.values()), list(columns), length=n_events))


def iterate_events(
    path: str | os.PathLike[str], layout: TreeLayout, step_size: int | str = "100 MB"
) -> Iterator[ak.Array]:
    """Read the tree chunk by chunk as giod events (see :class:`TreeLayout`).

    Relation indices are int32; indices outside the target collection of
    their event become -1.
    """
    wanted = layout.branches
    with _open(path) as file, _reading(path):
        chunks = file[layout.tree_name].iterate(filter_name=wanted, step_size=step_size, library="ak")
        for chunk in chunks:
            yield _events_from_chunk(chunk, layout)


# ---------------------------------------------------------------- importing


def _dataset_for(target: Any, name: str, schema: Schema) -> tuple[Any, bool]:
    if not hasattr(target, "create_dataset"):  # a Dataset was given
        if getattr(target, "name", name) != name:
            raise ConfigError(f"dataset {target.name!r} was given but {name!r} was named")
        if target.schema != schema:
            raise SchemaError(f"dataset {name} has a schema different from the file's")
        return target, False
    try:
        ds = target.dataset(name)
    except NotFound:
        return target.create_dataset(name, schema), True
    if ds.schema != schema:
        raise SchemaError(
            f"dataset {name} exists with a schema different from the file's; "
            "import into a new dataset or evolve it first"
        )
    return ds, False


def import_root(
    fed_or_dataset: Any,
    path: str | os.PathLike[str],
    dataset_name: str,
    *,
    tree: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    step_size: int | str = "100 MB",
) -> ImportReport:
    """Import every event of a ROOT tree into a dataset, creating it if needed.

    ``fed_or_dataset`` is a Federation (the dataset is created with the file's
    schema unless it exists with the same one) or a Dataset. ``progress`` is
    called with (events done, events in the file) after every chunk.
    """
    layout = inspect_tree(path, tree)
    ds, created = _dataset_for(fed_or_dataset, dataset_name, layout.schema)
    done = chunks = 0
    try:
        with ds.writer() as writer:
            for events in iterate_events(path, layout, step_size=step_size):
                writer.append(events)
                done += len(events)
                chunks += 1
                if progress is not None:
                    progress(done, layout.n_entries)
    except BaseException:
        if created:  # an import that created its dataset lands whole or not at all
            ds.federation.catalog.delete_dataset(dataset_name)
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
    )
