"""The ROOT encoding of a schema: how giod events lie in a flat NanoAOD-style tree.

:mod:`giod.interchange.export` writes it, and :mod:`giod.interchange.nanoaod`
expects it when it reads such a file back:

- collection ``X``: counter ``nX`` and one branch ``X_f`` per field; a
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
- the schema itself as YAML in the TObjString ``giod_schema``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from giod.errors import SchemaError
from giod.schema import Schema

SCHEMA_KEY = "giod_schema"
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
class Encoding:
    """The branches that hold each member of a schema in a flat tree."""

    counters: dict[str, str]  # collection, or index list "X_r" of a one-to-many relation -> counter
    sources: dict[str, dict[str, tuple[str, ...]]]  # collection -> member -> branches
    tags: dict[str, str]  # tag -> branch

    def branches(self) -> list[str]:
        """Every branch the tree has, counters of index lists included."""
        keys = list(self.counters.values())
        for members in self.sources.values():
            for member_keys in members.values():
                keys.extend(member_keys)
        keys.extend(self.tags.values())
        return keys


def encode(schema: Schema) -> Encoding:
    """Branch names for ``schema`` (see the module docstring)."""
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
    for coll in schema.collections:
        claim(coll, f"collection {coll}", lists)
        tdef = schema.collection_type(coll)
        members: dict[str, tuple[str, ...]] = {}
        for name, fdef in tdef.fields.items():
            size = int(np.prod(fdef.shape)) if fdef.shape else 0
            names = [f"{coll}_{name}_{i}" for i in range(size)] if size else [f"{coll}_{name}"]
            members[name] = tuple(claim(b, f"{coll}.{name}") for b in names)
        for name, rdef in tdef.relations.items():
            if rdef.many:
                claim(f"{coll}_{name}", f"the indices of {coll}.{name}", lists)
                members[name] = (
                    claim(f"{coll}_{name}_n", f"{coll}.{name}"),
                    claim(f"{coll}_{name}_idx", f"{coll}.{name}"),
                )
            else:
                b = f"{coll}_{index_field(name, rdef.target)}"
                members[name] = (claim(b, f"{coll}.{name}"),)
        sources[coll] = members
    counted = list(lists)
    tags: dict[str, str] = {}
    for t in schema.tags:
        claim(t, f"tag {t}", lists)
        tags[t] = claim(t, f"tag {t}")
    # counters last: their names are free to move aside ("nJet_") for a tag called nJet
    counters: dict[str, str] = {}
    for name in counted:
        counter = f"n{name}"
        while counter in owners:
            counter += "_"
        counters[name] = claim(counter, f"the size of {name}")
    return Encoding(counters, sources, tags)
