"""The ROOT encoding of a schema: how giod events lie in a flat NanoAOD-style tree.

:mod:`giod.interchange.export` writes it, and :mod:`giod.interchange.nanoaod`
expects it when it reads such a file back:

- collection ``X``: counter ``nX`` (or the collection's ``counter`` in the
  schema, HZZ's ``NJet``) and one branch ``X_f`` per field; a
  fixed-size field ``f`` of shape ``(3,)`` is split into ``X_f_0 .. X_f_2``
  (row-major for more dimensions), because uproot cannot read jagged
  fixed-size branches back reliably;
- one-to-one relation ``r`` to collection ``T``: int32 branch ``X_tIdxS``
  where ``t`` is ``T`` with a lower-case first letter and ``r == t + S``
  (NanoAOD's ``Jet_muonIdx1`` for relation ``muon1`` to ``Muon``); a relation
  not named after its target becomes ``X_tIdx_r``;
- one-to-many relation ``r``: the number of indices per object as ``X_r_n``
  (in collection ``X``) and all indices of the event, object after object,
  as collection ``X_r`` (counter ``nX_r``, branch ``X_r_idx``);
- tag ``t``: a scalar branch ``t``;
- a counter whose name a tag or field already has moves aside: ``nX_``;
- a one-to-one relation whose index branch is also the name of an integer
  field of the same collection is not written twice: the field holds the
  indices as they came (NanoAOD's ``Jet_genJetIdx``, which may point past
  ``nGenJet``) and the relation is read back from it, out-of-range indices
  as "none";
- the schema itself as YAML in the TObjString ``giod_schema``.

:class:`RootNames` overrides these defaults with the spelling of the file a
dataset was imported from (tree ``events``, counter ``NJet`` of type int32,
the plain jagged branch ``LHEPdfWeight`` for field ``value`` of collection
``LHEPdfWeight``), so that an export reproduces the file; it travels as JSON
in the TObjString ``giod_root_names`` and in the provenance of imported
databases.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from giod.errors import SchemaError
from giod.interchange.rootfile import DEFAULT_TREE
from giod.schema import Schema

SCHEMA_KEY = "giod_schema"
NAMES_KEY = "giod_root_names"
ROOT_NAMES = "root_names"  # provenance key of imported databases: RootNames.to_dict()
TREES_KEY = "trees"  # provenance key of imported databases: {tree: the linked dataset holding it (ttbar.Runs)}
DEFAULT_COUNTER_TYPE = "int32"  # what uproot writes unless told otherwise
_COUNTER_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


# ------------------------------------------------------------- the naming


def is_name(text: str) -> bool:
    """Whether ``text`` is usable as a giod field, relation, collection or tag name."""
    return bool(_NAME.match(text))


def identifier(text: str) -> str:
    """``text`` turned into a name giod accepts (schema names from tree names)."""
    out = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return out if out[:1].isalpha() else f"t{out}"


def numpy_dtype(dtype: str) -> np.dtype:
    return np.dtype(dtype)  # the schema's dtype names are numpy's


def index_field(relation: str, target: str) -> str:
    """The NanoAOD-style name of a one-to-one relation's index (``muon1`` -> ``muonIdx1``)."""
    stem = target[:1].lower() + target[1:]
    rest = relation[len(stem) :]
    if relation.startswith(stem) and not rest.startswith("_"):
        return f"{stem}Idx{rest}"
    return f"{stem}Idx_{relation}"


def relation_from_index(written_target: str, suffix: str) -> str:
    """Inverse of :func:`index_field`: relation name from ``<target>Idx<suffix>``."""
    return suffix[1:] if suffix.startswith("_") else written_target + suffix


@dataclass(frozen=True)
class RootNames:
    """How a ROOT file spelled what giod stores, where it differs from the default encoding.

    ``counters`` and ``counter_types`` are keyed by collection; ``branches``
    by ``"collection.member"`` or tag name; ``titles`` by branch: the titles
    that are neither documentation (the schema's ``doc``) nor uproot's leaf
    list, such as NanoAOD's empty ones. Recorded at import, used by the
    export; unknown keys are ignored so that a schema can evolve.
    """

    tree: str = DEFAULT_TREE
    counters: dict[str, str] = field(default_factory=dict)
    counter_types: dict[str, str] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)  # branch -> title that is not the schema's doc

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (only what differs from the defaults)."""
        out: dict[str, Any] = {"tree": self.tree}
        for key in ("counters", "counter_types", "branches", "titles"):
            if getattr(self, key):
                out[key] = dict(getattr(self, key))
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RootNames:
        """The inverse of :meth:`to_dict`; SchemaError for anything malformed."""
        try:
            tree = str(data.get("tree", DEFAULT_TREE))
            maps = [{str(k): str(v) for k, v in dict(data.get(key) or {}).items()}
                    for key in ("counters", "counter_types", "branches", "titles")]
        except (AttributeError, TypeError, ValueError) as exc:
            raise SchemaError(f"malformed ROOT names: {exc}") from exc
        bad = sorted(set(maps[1].values()) - set(_COUNTER_TYPES))
        if bad:
            raise SchemaError(f"malformed ROOT names: counter type {bad[0]!r} is not an integer type")
        return cls(tree, *maps)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RootNames:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SchemaError(f"malformed ROOT names: {exc}") from exc
        if not isinstance(data, dict):
            raise SchemaError("malformed ROOT names: expected a JSON object")
        return cls.from_dict(data)


@dataclass(frozen=True)
class Encoding:
    """The branches that hold each member of a schema in a flat tree."""

    counters: dict[str, str]  # collection, or index list "X_r" of a one-to-many relation -> counter
    sources: dict[str, dict[str, tuple[str, ...]]]  # collection -> member -> branches
    tags: dict[str, str]  # tag -> branch
    counter_types: dict[str, str] = field(default_factory=dict)  # counter branch -> dtype, int32 if absent
    from_field: frozenset[tuple[str, str]] = frozenset()  # (collection, relation) read from a field's branch

    def branches(self) -> list[str]:
        """Every branch the tree has, counters of index lists included."""
        keys = list(self.counters.values())
        for members in self.sources.values():
            for member_keys in members.values():
                keys.extend(member_keys)
        keys.extend(self.tags.values())
        return list(dict.fromkeys(keys))  # a relation read from a field's branch shares it


def encode(schema: Schema, names: RootNames | None = None) -> Encoding:
    """Branch names for ``schema`` (see the module docstring), spelled as ``names`` says where it does."""
    names = names or RootNames()
    owners: dict[str, str] = {}

    def claim(branch: str, owner: str, names: dict[str, str] = owners) -> str:
        if branch in names:
            raise SchemaError(
                f"cannot write schema {schema.name} as a flat tree: {branch!r} "
                f"would hold both {names[branch]} and {owner}"
            )
        names[branch] = owner
        return branch

    lists: dict[str, str] = {}  # the names uproot sees: collections, index lists, tags
    sources: dict[str, dict[str, tuple[str, ...]]] = {}
    from_field: set[tuple[str, str]] = set()
    for coll in schema.collections:
        claim(coll, f"collection {coll}", lists)
        tdef = schema.collection_type(coll)
        members: dict[str, tuple[str, ...]] = {}
        plain: dict[str, str] = {}  # branch -> integer scalar field that holds it
        for name, fdef in tdef.fields.items():
            size = int(np.prod(fdef.shape)) if fdef.shape else 0
            given = names.branches.get(f"{coll}.{name}")
            keys = [given] if given and not size else (
                [f"{coll}_{name}_{i}" for i in range(size)] if size else [f"{coll}_{name}"])
            members[name] = tuple(claim(b, f"{coll}.{name}") for b in keys)
            if not size and fdef.dtype.startswith(("int", "uint")):
                plain[keys[0]] = name
        for name, rdef in tdef.relations.items():
            if rdef.many:
                claim(f"{coll}_{name}", f"the indices of {coll}.{name}", lists)
                members[name] = (
                    claim(f"{coll}_{name}_n", f"{coll}.{name}"),
                    claim(f"{coll}_{name}_idx", f"{coll}.{name}"),
                )
            else:
                b = names.branches.get(f"{coll}.{name}") or f"{coll}_{index_field(name, rdef.target)}"
                if b in plain and owners.get(b) == f"{coll}.{plain[b]}":
                    from_field.add((coll, name))  # the field's raw indices; the relation reads them
                    members[name] = (b,)
                else:
                    members[name] = (claim(b, f"{coll}.{name}"),)
        sources[coll] = members
    counted = list(lists)
    tags: dict[str, str] = {}
    for t in schema.tags:
        claim(t, f"tag {t}", lists)
        tags[t] = claim(names.branches.get(t, t), f"tag {t}")
    # counters last: their names are free to move aside ("nJet_") for a tag called nJet
    counters: dict[str, str] = {}
    counter_types: dict[str, str] = {}
    for name in counted:
        cdef = schema.collections.get(name)  # None for the index list of a one-to-many relation
        counter = names.counters.get(name) or (cdef.counter if cdef is not None else "") or f"n{name}"
        while counter in owners:
            counter += "_"
        counters[name] = claim(counter, f"the size of {name}")
        if name in names.counter_types:
            counter_types[counter] = names.counter_types[name]
    return Encoding(counters, sources, tags, counter_types, frozenset(from_field))
