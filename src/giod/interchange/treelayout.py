"""What the branches of a ROOT event tree become in giod, decided from branch metadata alone."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import awkward as ak
import numpy as np

from giod.errors import DataError, GiodError
from giod.interchange.encoding import (
    DEFAULT_COUNTER_TYPE,
    NAMES_KEY,
    SCHEMA_KEY,
    RootNames,
    encode,
    identifier,
    is_name,
    relation_from_index,
)
from giod.interchange.rootfile import find_tree, open_root, root_errors
from giod.schema import STRING, Schema

_IDX = re.compile(r"^([A-Za-z][A-Za-z0-9]*?)Idx(.*)$")
_UNTAGGED = re.compile(r"^_collection[0-9]+$")  # ROOT's RNTupleImporter: one per counter group
_LEAF_LIST = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[A-Za-z0-9_]*\])*/[A-Za-z]$")  # "run/i", "Jet_pt[nJet]/F"

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
    names: RootNames = field(default_factory=RootNames, repr=False)  # the file's spelling, for the export

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
        return "scalar", STRING, (), ""
    if isinstance(interp, AsJagged):
        return "skip", None, (), f"doubly-jagged type {typename} is not supported"
    return "skip", None, (), f"unsupported type {typename}"


@dataclass
class _Draft:
    """Collections and tags found so far, before relations are linked."""

    counters: dict[str, str | None] = field(default_factory=dict)  # None: sizes from the lists
    counter_types: dict[str, str] = field(default_factory=dict)  # collection -> dtype of its counter
    fields: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)  # -> (key, dtype)
    tags: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (key, dtype)
    skipped: dict[str, str] = field(default_factory=dict)
    docs: dict[str, str] = field(default_factory=dict)  # branch -> its title, when that documents it
    titles: dict[str, str] = field(default_factory=dict)  # branch -> a title that is neither doc nor leaf list

    def add_title(self, branch: str, title: str) -> None:
        """NanoAOD documents each branch in its title; a leaf list (``run/i``) is no documentation."""
        if title.strip() and not _LEAF_LIST.match(title):
            self.docs[branch] = title
        elif not _LEAF_LIST.match(title):  # "" (NanoAOD's nLHEPdfWeight): kept for an exact export
            self.titles[branch] = title

    def add_field(self, coll: str, member: str, key: str, dtype: str) -> None:
        if dtype == STRING:
            self.skipped[key] = "strings of objects in a collection are not supported (strings per event are)"
        elif not is_name(member) or member.endswith("_index"):
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


def _count_branch(branch: Any) -> Any:
    """``branch.count_branch``: the branch of its counter leaf, or None.

    uproot finds it anew at every call, matching class names through the class
    hierarchy with regular expressions (about 0.2 ms a branch). When the counter
    leaf's parent is a TBranch (NanoAOD's trees, uproot's), that parent is what
    uproot's walk returns; anything else takes uproot's walk.
    """
    from uproot.behaviors.TBranch import TBranch

    leaves = branch.member("fLeaves")
    leaf = leaves[0].member("fLeafCount") if len(leaves) == 1 else None
    if leaf is None:
        return None
    parent = getattr(leaf, "parent", None)
    if str(getattr(leaf, "classname", "")).startswith("TLeaf") and isinstance(parent, TBranch):
        return parent
    return branch.count_branch


def _draft_ttree(tree: Any) -> _Draft:
    draft = _Draft()
    jagged: dict[str, list[tuple[str, str]]] = {}  # counter -> (branch, dtype)
    scalars: list[tuple[str, str, tuple[int, ...]]] = []
    for b in tree.branches:
        draft.add_title(b.name, b.title)
        if b.branches:
            draft.skipped[b.name] = f"object branch {b.typename} with sub-branches is not supported"
            continue
        kind, dtype, shape, reason = _describe(b.interpretation, b.typename)
        counter = _count_branch(b) if kind == "jagged" else None
        if kind == "skip" or dtype is None:
            draft.skipped[b.name] = reason
        elif kind == "jagged":
            if counter is None:
                draft.skipped[b.name] = "jagged branch without a counter (std::vector) is not supported"
            else:
                jagged.setdefault(counter.name, []).append((b.name, dtype))
        else:
            scalars.append((b.name, dtype, shape))

    for counter, members in jagged.items():
        coll = _collection_of(counter, [m for m, _ in members])
        if not is_name(coll) or coll in draft.counters:
            for m, _ in members:
                draft.skipped[m] = f"counter {counter!r} does not name a usable collection"
            continue
        draft.counters[coll] = counter
        kind, dtype, _, _ = _describe(tree[counter].interpretation, tree[counter].typename)
        if kind == "scalar" and dtype is not None:
            draft.counter_types[coll] = dtype
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
    """The giod dtype of a plain numeric RNTuple field (or ``string``), else None."""
    if isinstance(form, ak.forms.NumpyForm) and not form.inner_shape:
        return _dtype_name(np.dtype(form.primitive))
    if isinstance(form, ak.forms.ListOffsetForm) and form.parameter("__array__") == "string":
        return STRING
    return None


def _projections(ntuple: Any) -> dict[str, str]:
    """Top-level projected fields (ROOT's aliases such as ``nJet``, ``Jet_pt``) -> top-level field they alias."""
    records = list(ntuple.field_records)

    def top(i: int) -> int:
        seen = set()
        while records[i].parent_field_id != i and i not in seen:
            seen.add(i)
            i = records[i].parent_field_id
        return i

    out: dict[str, str] = {}
    for i, r in enumerate(records):
        source = getattr(r, "source_field_id", None)
        if r.parent_field_id == i and source is not None and 0 <= source < len(records):
            if int(getattr(r, "flags", 0) or 0) & 0x02:  # PROJECTED in the RNTuple specification
                out[r.field_name] = records[top(source)].field_name
    return out


def _untagged_name(name: str, subfields: list[str], counters: list[str]) -> str | None:
    """The collection an untagged ``_collectionN`` holds: ``Jet`` for subfields ``Jet_pt``, ``Jet_eta``, ...

    ROOT's importer names the group's counter (projected as ``nJet``); without
    one, the prefix every subfield shares before ``_``, or the only subfield's
    own name (``LHEPdfWeight``), is used.
    """
    for counter in counters:
        coll = _collection_of(counter, subfields)
        if all(f == coll or f.startswith(coll + "_") for f in subfields):
            return coll
    if len(subfields) == 1 and "_" not in subfields[0]:
        return subfields[0]
    prefixes = {f.split("_", 1)[0] for f in subfields}
    if len(prefixes) == 1 and all("_" in f for f in subfields):
        return prefixes.pop()
    return None


def _draft_rntuple(ntuple: Any) -> _Draft:
    form = ntuple.to_akform()[0]
    projected = _projections(ntuple)
    counters: dict[str, list[str]] = {}  # projected cardinality -> what it counts
    for alias, source in projected.items():
        counters.setdefault(source, []).append(alias)
    draft = _Draft()
    untagged: dict[str, str] = {}  # collection -> the _collectionN field it comes from
    for name, content in zip(form.fields, form.contents, strict=True):
        inner = content.content if isinstance(content, ak.forms.ListOffsetForm) else None
        coll = name
        if name in projected:  # read through the field it aliases, never twice
            continue
        if _UNTAGGED.match(name) and isinstance(inner, ak.forms.RecordForm):
            found = _untagged_name(name, list(inner.fields), [c for c in counters.get(name, []) if c[:1] in "nN"])
            if found is None or not is_name(found):
                draft.skipped[name] = (
                    f"untagged collection whose subfields ({', '.join(inner.fields[:3])}"
                    f"{', ...' if len(inner.fields) > 3 else ''}) share no collection name"
                )
                continue
            if found in draft.counters or found in draft.tags:
                draft.skipped[name] = f"untagged collection {found!r} clashes with another field"
                continue
            coll = found
        if not is_name(name) and coll == name:
            draft.skipped[name] = f"{name!r} is not a usable name"
        elif (dtype := _form_dtype(content)) is not None:
            draft.tags[name] = (name, dtype)
        elif (dtype := _form_dtype(inner)) is not None:  # a list of numbers
            draft.counters[name] = None
            draft.add_field(name, "value", name, dtype)
        elif isinstance(inner, ak.forms.RecordForm):
            draft.counters[coll] = None
            for fname, fcontent in zip(inner.fields, inner.contents, strict=True):
                key = f"{name}.{fname}"
                if (dtype := _form_dtype(fcontent)) is None:
                    draft.skipped[key] = f"unsupported field type {fcontent.type}"
                else:
                    draft.add_field(coll, _member_of(coll, fname), key, dtype)
            if not draft.fields.get(coll):
                del draft.counters[coll]
                draft.skipped[name] = "no field of a supported type"
        else:
            draft.skipped[name] = f"unsupported type {content.type}"
        if coll != name:
            untagged[coll] = name
    _drop_copies(draft, untagged)
    cardinality = _cardinality_types(ntuple)
    for coll in draft.counters:
        if f"n{coll}" in cardinality:  # ROOT's importer: nJet as RNTupleCardinality<std::uint32_t>
            draft.counter_types[coll] = cardinality[f"n{coll}"]
    return draft


_CARDINALITY = re.compile(r"^ROOT::RNTupleCardinality<std::(u?int(?:8|16|32|64))_t>$")


def _cardinality_types(ntuple: Any) -> dict[str, str]:
    """Top-level cardinality fields (``nJet``) -> their integer type (``uint32``)."""
    out: dict[str, str] = {}
    for i, r in enumerate(ntuple.field_records):
        m = _CARDINALITY.match(getattr(r, "type_name", "") or "")
        if m and r.parent_field_id == i:
            out[r.field_name] = m.group(1)
    return out


def _drop_copies(draft: _Draft, untagged: dict[str, str]) -> None:
    """Drop loose copies of an untagged collection that the file does not mark as projections.

    A list ``Jet_pt`` beside ``_collection10.Jet_pt``, or a scalar ``nJet``
    beside the collection ``Jet``, would otherwise be imported a second time.
    """
    sub = {key.split(".", 1)[1]: key for c in untagged for key, _ in draft.fields.get(c, {}).values()}
    for name in [c for c in draft.fields if c not in untagged and c in sub]:
        if list(draft.fields[name]) == ["value"]:
            del draft.fields[name], draft.counters[name]
            draft.skipped[name] = f"a copy of {sub[name]}"
    for coll in untagged:
        for counter in (f"n{coll}", f"N{coll}"):
            if counter in draft.tags:
                del draft.tags[counter]
                draft.skipped[counter] = f"the number of {coll} objects, which giod derives from the collection"


def _target(written: str, collections: list[str]) -> str | None:
    """The collection an index field points to, case- and plural-tolerant."""
    exact = [c for c in collections if c.lower() == written.lower()]
    if len(exact) == 1:
        return exact[0]
    stem = written.lower().removesuffix("s")
    loose = [c for c in collections if c.lower().removesuffix("s") == stem]
    return loose[0] if len(loose) == 1 else None


def _typed(type_name: str, doc: str) -> str | dict[str, str]:
    """A field, tag or collection in the schema's YAML form, with its documentation if it has one."""
    return {"type": type_name, "doc": doc} if doc else type_name


def _collection(coll: str, counter: str | None, docs: dict[str, str]) -> str | dict[str, str]:
    """A collection in the schema's YAML form: documented by its counter's title; a counter not called
    ``n<coll>`` (HZZ's ``NJet``) is kept as the name selections may count it by."""
    out: dict[str, str] = {"type": coll}
    if counter is not None and counter != f"n{coll}" and is_name(counter):
        out["counter"] = counter
    if docs.get(counter or ""):
        out["doc"] = docs[counter or ""]
    return out if len(out) > 1 else coll


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
                # the relation navigates; the field keeps the indices as they came, even past the target
                relations[rel] = Member((key,), target=target)
            fields[name] = Member((key,), dtype)
            mapping[key] = (coll, name)
        plans[coll] = CollectionPlan(coll, draft.counters[coll], {**fields, **relations})
        types[coll] = {"fields": {f: _typed(m.dtype, draft.docs.get(m.keys[0], "")) for f, m in fields.items()}}
        if relations:
            types[coll]["relations"] = {r: {"to": m.target} for r, m in relations.items()}
    schema_dict: dict[str, Any] = {
        "schema_version": 1,
        "name": identifier(tree_name.lower()),
        "types": types,
        "collections": {c: _collection(c, draft.counters[c], draft.docs) for c in names},
    }
    if draft.tags:
        schema_dict["tags"] = {t: _typed(dtype, draft.docs.get(key, "")) for t, (key, dtype) in draft.tags.items()}
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
        names=_names_from_draft(draft, plans, tree_name),
    )


def _source_branch(key: str) -> str | None:
    """The TTree branch a key stands for: itself, an importer-style subfield's name, or None (native RNTuple)."""
    if "." not in key:
        return key
    top, sub = key.split(".", 1)
    return sub if _UNTAGGED.match(top) else None


def _read_keys(draft: _Draft, plans: dict[str, CollectionPlan]) -> set[str]:
    """The branches an import reads (counters included)."""
    keys = {c for c in draft.counters.values() if c is not None} | {k for k, _ in draft.tags.values()}
    return keys | {k for plan in plans.values() for m in plan.members.values() for k in m.keys}


def _names_from_draft(draft: _Draft, plans: dict[str, CollectionPlan], tree_name: str) -> RootNames:
    """What an export needs to spell the file as it was: only what differs from the default encoding."""
    counters = {c: k for c, k in draft.counters.items() if k is not None and k != f"n{c}"}
    types = {c: t for c, t in draft.counter_types.items() if t != DEFAULT_COUNTER_TYPE}
    branches: dict[str, str] = {}
    for coll, plan in plans.items():
        for member, m in plan.members.items():
            source = _source_branch(m.keys[0])
            if m.target is None and source is not None and source != f"{coll}_{member}":
                branches[f"{coll}.{member}"] = source
    read = _read_keys(draft, plans)
    titles = {b: t for b, t in draft.titles.items() if b in read}
    return RootNames(tree_name, counters, types, branches, titles)


def _layout_from_embedded(tree: Any, tree_name: str, text: str, names_text: str | None) -> TreeLayout | None:
    """Follow the schema giod wrote into the file, if every branch it names is there."""
    try:
        schema = Schema.from_text(text, source=SCHEMA_KEY)
        names = RootNames.from_json(names_text) if names_text is not None else RootNames(tree_name)
        names = RootNames(tree_name, names.counters, names.counter_types, names.branches, names.titles)
        enc = encode(schema, names)
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
        names=names,
    )


def inspect_tree(path: str | os.PathLike[str], tree: str | None = None) -> TreeLayout:
    """Decide how the event tree in ``path`` maps onto collections, relations and tags.

    The tree is ``tree``, else ``Events``, else the file's only TTree or RNTuple.
    Raises NotFound (no file, no tree), StorageError (not a readable ROOT file)
    or ConfigError (several trees and none chosen).
    """
    with open_root(path) as file:
        name, obj = find_tree(file, path, tree)
        return layout_of(file, name, obj, path)


def layout_of(file: Any, name: str, obj: Any, path: str | os.PathLike[str]) -> TreeLayout:
    """:func:`inspect_tree` of a tree already open (``obj``, named ``name`` in ``file``).

    Reading a wide tree's metadata is most of what opening it costs (seconds for
    about 1,000 branches): an import inspects and reads the one tree it opened.
    """
    with root_errors(path):
        kind = "RNTuple" if "RNTuple" in type(obj).__name__ else "TTree"
        if kind == "TTree" and SCHEMA_KEY in file:
            names_text = str(file[NAMES_KEY]) if NAMES_KEY in file else None
            layout = _layout_from_embedded(obj, name, str(file[SCHEMA_KEY]), names_text)
            if layout is not None:
                return layout
        draft = _draft_rntuple(obj) if kind == "RNTuple" else _draft_ttree(obj)
        n = int(obj.num_entries)
    if not draft.fields and not draft.tags:
        why = "; ".join(f"{k}: {v}" for k, v in list(draft.skipped.items())[:5])
        more = f"; and {len(draft.skipped) - 5} more" if len(draft.skipped) > 5 else ""
        detail = f" (skipped {why}{more})" if why else ""
        raise DataError(f"tree {name!r} in {os.fspath(path)} has no branch giod can read{detail}")
    return _layout_from_draft(draft, name, n, kind)
