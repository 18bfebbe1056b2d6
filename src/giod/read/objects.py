"""Objects, their ids (OIDs) and navigation along relations.

On disk a relation is a column of indices into the target collection of the
same event. In memory, :func:`link` turns it into a view: for each relation
``rel`` of a collection whose target was read, the objects get a field
``rel`` holding the target objects themselves (an awkward ``IndexedArray``
over the target's buffers, so nothing is copied) beside ``rel_index`` with the
stored indices. ``events.jets.tracks.pt`` then navigates like an attribute.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import awkward as ak
import numpy as np

from giod.errors import DataError, IntegrityError
from giod.schema import Schema

INDEX_SUFFIX = "_index"

_OID = re.compile(r"^db(\d+)/([A-Za-z][A-Za-z0-9_]*)/(\d+)#(\d+)$")


@dataclass(frozen=True, order=True)
class OID:
    """The id of one object: ``db42/tracks/1234#7`` (database, collection, entry, index).

    ``entry`` is the event's entry number in its dataset.
    """

    database: int
    collection: str
    entry: int
    index: int

    @classmethod
    def parse(cls, text: str) -> OID:
        """The OID printed as ``text`` (``db42/tracks/1234#7``); DataError when malformed."""
        m = _OID.match(text.strip())
        if m is None:
            raise DataError(f"malformed object id {text!r} (expected e.g. db42/tracks/1234#7)")
        return cls(int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4)))

    def __str__(self) -> str:
        return f"db{self.database}/{self.collection}/{self.entry}#{self.index}"


def _event_of(offsets: np.ndarray) -> np.ndarray:
    """For list offsets starting at 0: the list (event) each element belongs to."""
    return np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))


def _rename_relations(coll: ak.contents.ListOffsetArray, relations: list[str]) -> ak.contents.ListOffsetArray:
    rec = coll.content
    assert isinstance(rec, ak.contents.RecordArray)
    fields = [f + INDEX_SUFFIX if f in relations else f for f in rec.fields]
    new = ak.contents.RecordArray(rec.contents, fields, length=rec.length, parameters=rec.parameters)
    return ak.contents.ListOffsetArray(coll.offsets, new)


def _check_indices(local: np.ndarray, events: np.ndarray, counts: np.ndarray, floor: int, where: str) -> None:
    """Stored indices within their event's target objects: data from outside is checked before it is followed."""
    bad = (local < floor) | (local >= counts)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise IntegrityError(f"{where}: an object of event {int(events[i])} of the read points at object "
                             f"{int(local[i])} of its event, which has {int(counts[i])}")


def _view(
    source: ak.contents.ListOffsetArray,
    index_field: str,
    target: ak.contents.ListOffsetArray,
    many: bool,
    where: str = "relation",
) -> ak.contents.Content:
    """Objects of ``target`` referenced by ``source``'s index field, per source object."""
    src_offsets = np.asarray(source.offsets)
    tgt_offsets = np.asarray(target.offsets).astype(np.int64)
    rec = source.content
    assert isinstance(rec, ak.contents.RecordArray)
    event_of_object = _event_of(src_offsets)
    base = tgt_offsets[:-1][event_of_object] - 0  # start of the target list in each object's event
    counts = np.diff(tgt_offsets)[event_of_object]  # target objects in each object's event
    idx_layout = rec.content(index_field)
    if many:
        assert isinstance(idx_layout, ak.contents.ListOffsetArray)
        inner = np.asarray(idx_layout.offsets)
        start, stop = int(inner[0]), int(inner[-1])
        local = np.asarray(idx_layout.content.data)[start:stop].astype(np.int64)
        per = np.diff(inner)
        _check_indices(local, np.repeat(event_of_object, per), np.repeat(counts, per), 0, where)
        global_index = local + np.repeat(base, per)
        view = ak.contents.IndexedArray(ak.index.Index64(global_index), target.content)
        return ak.contents.ListOffsetArray(ak.index.Index64((inner - start).astype(np.int64)), view)
    local = np.asarray(idx_layout.data).astype(np.int64)
    _check_indices(local, event_of_object, counts, -1, where)
    global_index = np.where(local >= 0, local + base, -1)
    return ak.contents.IndexedOptionArray(ak.index.Index64(global_index), target.content)


def link(events: ak.Array, schema: Schema) -> ak.Array:
    """Turn stored relation indices into navigable views (see module docstring)."""
    layout = events.layout
    if not isinstance(layout, ak.contents.RecordArray):
        return events
    present = {f: layout.content(f) for f in layout.fields}
    colls = {
        name: content
        for name, content in present.items()
        if name in schema.collections and isinstance(content, ak.contents.ListOffsetArray)
    }
    # first the plain objects, with indices renamed to rel_index
    for name, content in colls.items():
        rels = list(schema.collection_type(name).relations)
        if rels:
            colls[name] = _rename_relations(content, rels)
    # then the views, targets before sources where the relation graph allows
    order = _link_order(schema, list(colls))
    for name in order:
        tdef = schema.collection_type(name)
        content = colls[name]
        rec = content.content
        assert isinstance(rec, ak.contents.RecordArray)
        contents = list(rec.contents)
        fields = list(rec.fields)
        for rname, rdef in tdef.relations.items():
            if rdef.target in colls and rname + INDEX_SUFFIX in fields:
                where = (f"container {schema.container_of(name)}, relation {name}.{rname} to {rdef.target} "
                         f"(container {schema.container_of(rdef.target)})")
                contents.append(_view(content, rname + INDEX_SUFFIX, colls[rdef.target], rdef.many, where))
                fields.append(rname)
        if len(fields) != len(rec.fields):
            rec = ak.contents.RecordArray(contents, fields, length=rec.length, parameters=rec.parameters)
            colls[name] = ak.contents.ListOffsetArray(content.offsets, rec)
    out = [colls.get(f, present[f]) for f in layout.fields]
    return ak.Array(ak.contents.RecordArray(out, layout.fields, length=layout.length),
                    behavior=events.behavior)


def _link_order(schema: Schema, names: list[str]) -> list[str]:
    """Collections ordered so that relation targets come before their sources."""
    done: list[str] = []
    visiting: set[str] = set()

    def visit(n: str) -> None:
        if n in done or n in visiting:
            return  # a cycle: that direction navigates one level deep
        visiting.add(n)
        for rdef in schema.collection_type(n).relations.values():
            if rdef.target in names and rdef.target != n:
                visit(rdef.target)
        visiting.discard(n)
        done.append(n)

    for n in names:
        visit(n)
    return done


def unlink(events: ak.Array, schema: Schema) -> ak.Array:
    """The stored form of linked events: views dropped, ``rel_index`` back to ``rel``."""
    return _drop_views(events, schema, restore_names=True)


def without_views(events: ak.Array, schema: Schema) -> ak.Array:
    """Linked events without the relation views (the ``<relation>_index`` fields stay)."""
    return _drop_views(events, schema, restore_names=False)


def _drop_views(events: ak.Array, schema: Schema, *, restore_names: bool) -> ak.Array:
    layout = events.layout
    if not isinstance(layout, ak.contents.RecordArray):
        return events
    out = []
    for name in layout.fields:
        content = layout.content(name)
        if name in schema.collections and isinstance(content, ak.contents.ListOffsetArray) \
                and isinstance(content.content, ak.contents.RecordArray):
            rec = content.content
            rels = set(schema.collection_type(name).relations)
            keep = [f for f in rec.fields if f not in rels]
            fields = keep
            if restore_names:
                fields = [f[: -len(INDEX_SUFFIX)] if f.endswith(INDEX_SUFFIX) and f[: -len(INDEX_SUFFIX)] in rels
                          else f for f in keep]
            if fields != rec.fields:
                rec = ak.contents.RecordArray([rec.content(f) for f in keep], fields, length=rec.length,
                                              parameters=rec.parameters)
                content = ak.contents.ListOffsetArray(content.offsets, rec)
        out.append(content)
    return ak.Array(ak.contents.RecordArray(out, layout.fields, length=layout.length), behavior=events.behavior)
