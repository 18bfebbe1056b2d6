"""coffea on giod: a selection as NanoAOD events with coffea's behaviours.

The bridge is the ROOT encoding of :mod:`giod.interchange.encoding`: coffea
is handed the flat branches an export would write (``nJet``, ``Jet_pt``,
``Jet_genJetIdx`` with its values as the file had them), spelled as the
imported file was (:class:`~giod.interchange.RootNames`), so that coffea's
``NanoAODSchema`` builds the same collections and cross-references
(``Muon.matched_jet``, ``Jet.matched_muons``, ``GenPart.parent``) as on the
original file. Branches are read lazily: coffea asks for a branch when a
computation touches it, and only then is the giod column behind it read, so
``events.Muon.pt`` reads ``Muon.pt`` and nothing else.

- :func:`nanoevents`: the whole selection, in memory (coffea's virtual mode);
- :func:`dask_nanoevents`: a ``dask_awkward.Array``, one partition per
  database (or database range), as ``giod.dask.from_selection`` plans them;
- :func:`apply_to_selections` and :func:`run`: a coffea ``ProcessorABC``
  over giod selections, the way coffea's ``apply_to_fileset`` (lazy, Dask)
  and ``Runner`` (chunk by chunk, outputs accumulated) run it over files;
- :func:`to_fileset`: the selections exported as NanoAOD ROOT files, one per
  partition, in coffea's fileset form, for coffea's own ``Runner`` and other
  tools that read files only (a copy of the data, unlike the above).
"""

from __future__ import annotations

import os
import types
import uuid as uuidlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import awkward as ak
import numpy as np

from giod.distributed import Job, Partition, plan, read_partition
from giod.errors import DataError, MissingDependency
from giod.interchange.encoding import Encoding, RootNames, encode
from giod.interchange.export import root_names
from giod.read.objects import INDEX_SUFFIX, without_views
from giod.schema import STRING, Schema

if TYPE_CHECKING:
    from giod.read.selection import Selection

__all__ = ["apply_to_selections", "dask_nanoevents", "nanoevents", "run", "to_fileset"]

_INSTALL = "coffea is not installed: pip install 'giod[coffea]'"


def _coffea() -> Any:
    try:
        from coffea import nanoevents
    except ImportError as exc:
        raise MissingDependency(_INSTALL) from exc
    return nanoevents


# ------------------------------------------------------ branches of a schema


@dataclass(frozen=True)
class Branch:
    """Where one flat branch comes from: a tag, the size of a collection, or a member of one."""

    name: str
    kind: str  # "tag", "counter" or "member"
    dtype: str
    collection: str = ""
    member: str = ""  # a field, or a relation read as its indices
    relation: bool = False
    doc: str = ""  # the branch's title: coffea's __doc__

    @property
    def column(self) -> str:
        """The giod column read for it (a counter reads the collection's first field)."""
        return self.name if self.kind == "tag" else f"{self.collection}.{self.member}"

    def form(self) -> ak.forms.Form:
        if self.dtype == STRING:
            leaf: ak.forms.Form = ak.forms.ListOffsetForm(
                "i64", ak.forms.NumpyForm("uint8", parameters={"__array__": "char"}),
                parameters={"__array__": "string"})
        else:
            leaf = ak.forms.NumpyForm(self.dtype)
        return ak.forms.ListOffsetForm("i64", leaf) if self.kind == "member" else leaf


def branches(schema: Schema, names: RootNames | None = None) -> dict[str, Branch]:
    """The flat branches that stand for ``schema`` in NanoAOD spelling (what an export would write).

    One-to-many relations and fixed-size fields have no NanoAOD branch and are left out.
    """
    enc: Encoding = encode(schema, names)
    out: dict[str, Branch] = {t: Branch(b, "tag", schema.tags[t].dtype, doc=schema.tags[t].doc)
                              for t, b in enc.tags.items()}
    for coll in schema.collections:
        tdef = schema.collection_type(coll)
        first = next(iter(tdef.fields), None) or next(iter(tdef.relations))
        counter = enc.counters[coll]
        out[counter] = Branch(counter, "counter", enc.counter_types.get(counter, "int32"), coll, first,
                              first in tdef.relations, schema.collections[coll].doc)
        for name, keys in enc.sources[coll].items():
            rdef = tdef.relations.get(name)
            if (coll, name) in enc.from_field or len(keys) != 1 or (rdef is not None and rdef.many):
                continue
            member = rdef if rdef is not None else tdef.fields[name]
            dtype = "int32" if rdef is not None else tdef.fields[name].dtype
            out[keys[0]] = Branch(keys[0], "member", dtype, coll, name, rdef is not None, member.doc)
    return out


def _documented(form: dict[str, Any], doc: str) -> dict[str, Any]:
    """A branch's lazy form with its title as ``__doc__`` at every level, as coffea's ROOT mapping gives it."""
    if doc:
        form.setdefault("parameters", {})["__doc__"] = doc
        if "content" in form:
            _documented(form["content"], doc)
    return form


def _branch_values(events: ak.Array, branch: Branch) -> ak.Array:
    """One branch of giod events (read without relation views) as coffea expects it."""
    if branch.kind == "tag":
        return events[branch.name]
    coll = events[branch.collection]
    if branch.kind == "counter":
        return ak.values_astype(ak.num(coll, axis=1), np.dtype(branch.dtype))
    member = branch.member + INDEX_SUFFIX if branch.relation else branch.member
    values = coll[member]
    layout = values.layout
    if isinstance(layout, ak.contents.ListOffsetArray):
        layout = layout.to_ListOffsetArray64(True)
    return ak.Array(layout)


class _Reader:
    """Reads giod columns on demand (once each) for the branches coffea asks for."""

    def __init__(self, load: Any, schema: Schema):
        self.load = load  # columns -> giod events without relation views
        self.schema = schema
        self.read: list[str] = []  # the giod columns read, in order: what a computation touched
        self._cache: dict[str, ak.Array] = {}

    def values(self, branch: Branch) -> ak.Array:
        if branch.name not in self._cache:
            if branch.column not in self.read:
                self.read.append(branch.column)
            events = self.load((branch.column,))
            self._cache[branch.name] = _branch_values(events, branch)
        return self._cache[branch.name]


class _Column:
    """One branch as coffea's preloaded mapping wants it: a form up front, values when sliced."""

    def __init__(self, reader: _Reader, branch: Branch):
        self.reader = reader
        self.branch = branch
        self.layout = types.SimpleNamespace(form=branch.form())

    def __getitem__(self, where: slice) -> ak.Array:
        return self.reader.values(self.branch)[where]


class _Source(Mapping[str, _Column]):
    """Every branch of one piece of a selection, read lazily (coffea's ``array_source``)."""

    def __init__(self, reader: _Reader, plan_: dict[str, Branch], n_events: int, key: str):
        self.reader = reader
        self.columns = {name: _Column(reader, b) for name, b in plan_.items()}
        self.metadata = {"uuid": key, "num_rows": n_events, "object_path": "Events"}

    def __getitem__(self, name: str) -> _Column:
        return self.columns[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)


def _events(source: _Source, metadata: dict[str, Any] | None, schemaclass: Any) -> ak.Array:
    """coffea NanoEvents over ``source`` in virtual mode: a branch is read when first touched."""
    coffea = _coffea()
    from coffea.nanoevents.mapping.preloaded import PreloadedOpener, PreloadedSourceMapping

    schemaclass = schemaclass or coffea.NanoAODSchema
    key = source.metadata["uuid"]
    n = source.metadata["num_rows"]
    mapping = PreloadedSourceMapping(PreloadedOpener({key: source}), 0, n)
    mapping._virtual = True  # hand out loaders, not arrays (coffea's preloaded mapping has no option for it)
    mapping.preload_column_source(key, "Events", source)
    partition = (key, "Events", f"0-{n}")
    base = PreloadedSourceMapping._extract_base_form(source)
    # coffea's preloaded mapping drops the branches' documentation: put the titles back
    base["contents"] = [_documented(form, source.columns[name].branch.doc)
                        for name, form in zip(base["fields"], base["contents"], strict=True)]
    # coffea's from_preloaded is eager: the same factory in virtual mode reads only what is touched
    factory = coffea.NanoEventsFactory._from_mapping(mapping, partition, base, schemaclass, metadata,
                                                     mode="virtual")
    return factory.events()


# ------------------------------------------------------------ in memory


def nanoevents(sel: Selection, *, metadata: dict[str, Any] | None = None, schemaclass: Any = None) -> ak.Array:
    """The selected events as coffea NanoEvents (``NanoAODSchema`` unless ``schemaclass`` is given).

    Columns are read from giod when a computation first touches them;
    ``events.attrs["giod_reader"].read`` lists the giod columns read so far.
    """
    schema = sel.dataset.schema
    plan_ = branches(schema, root_names(sel))
    reader = _Reader(lambda columns: without_views(sel.read(list(columns)), schema), schema)
    key = f"giod:{sel.dataset.name}@{sel.version}:{sel.expression}"
    events = _events(_Source(reader, plan_, len(sel), _uuid(key)), metadata, schemaclass)
    events.attrs["giod_reader"] = reader
    return events


def _uuid(text: str) -> str:
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, text))


# --------------------------------------------------------------- Dask


class _PartitionEvents:
    """Reads one partition of a selection as NanoEvents (a small picklable task for dask-awkward)."""

    def __init__(self, job: Job, schema_text: str, names: RootNames | None, metadata: dict[str, Any] | None,
                 schemaclass: Any):
        self.job = job
        self.schema_text = schema_text
        self.names = names
        self.metadata = metadata
        self.schemaclass = schemaclass

    def __call__(self, part: Partition) -> ak.Array:
        schema = Schema.from_text(self.schema_text)
        reader = _Reader(lambda columns: without_views(read_partition(self.job, part, columns=columns)[0], schema),
                         schema)
        plan_ = branches(schema, self.names)
        # how many events the selection keeps here: known once one branch is read (it stays cached)
        n = len(reader.values(next(iter(plan_.values()))))
        key = _uuid(f"giod:{self.job.dataset}@{self.job.version}:{part.database.id}:{part.start}-{part.stop}")
        return _events(_Source(reader, plan_, n, key), self.metadata, self.schemaclass)


def dask_nanoevents(sel: Selection, *, partition_events: int | None = None, metadata: dict[str, Any] | None = None,
                    schemaclass: Any = None) -> Any:
    """The selected events as a ``dask_awkward.Array`` of coffea NanoEvents, one partition per database.

    Each partition reads only the giod columns its computation touches
    (coffea reads branches lazily), so ``events.Muon.pt`` reads ``Muon.pt``
    alone, on any Dask scheduler.
    """
    try:
        import dask_awkward as dak
    except ImportError as exc:
        raise MissingDependency("dask-awkward is not installed: pip install 'giod[dask]'") from exc
    schema = sel.dataset.schema
    names = root_names(sel)
    job, parts = plan(sel, None, partition_events=partition_events)
    if not parts:
        raise DataError(f"{sel!r} selects no event: there is nothing to partition")
    task = _PartitionEvents(job, schema.to_yaml(), names, metadata, schemaclass)
    # the form of every partition, from the first event alone
    first = parts[0]
    sample = task(Partition(first.index, first.database, first.start, first.start, 0, first.sites))
    meta = ak.Array(sample.layout.form.length_zero_array().to_typetracer(forget_length=True),
                    behavior=sample.behavior)
    events = dak.from_map(task, parts, label="giod-nanoevents", meta=meta)
    events._meta.attrs["@original_array"] = events  # coffea's cross-references find the events here
    return events


# ------------------------------------------------------- processors


def apply_to_selections(processor: Any, selections: Mapping[str, Selection], *,
                        partition_events: int | None = None) -> dict[str, Any]:
    """``processor.process(events)`` per selection, lazily (Dask), as coffea's ``apply_to_fileset`` does.

    The events carry ``metadata["dataset"]``; compute the result with ``dask.compute``.
    """
    out = {}
    for name, sel in selections.items():
        events = dask_nanoevents(sel, partition_events=partition_events, metadata={"dataset": name})
        out[name] = processor.process(events)
    return out


def run(processor: Any, selections: Mapping[str, Selection], *, partition_events: int | None = None) -> Any:
    """``processor.process`` on every partition of every selection, outputs added up (coffea's ``Runner``).

    Partitions are processed one after the other in this process; for many
    cores or a cluster use :func:`apply_to_selections` with a Dask scheduler.
    """
    from coffea.processor import accumulate

    outputs = []
    for name, sel in selections.items():
        if not len(sel):
            continue
        job, parts = plan(sel, None, partition_events=partition_events)
        task = _PartitionEvents(job, sel.dataset.schema.to_yaml(), root_names(sel), {"dataset": name}, None)
        for part in parts:
            outputs.append(processor.process(task(part)))
    return processor.postprocess(accumulate(outputs))


def to_fileset(selections: Mapping[str, Selection], directory: str | os.PathLike[str], *,
               partition_events: int | None = None) -> dict[str, dict[str, Any]]:
    """Export each selection as NanoAOD ROOT files, one per partition, and describe them as a coffea fileset.

    Returns ``{name: {"files": {path: tree}, "metadata": {...}}}``, what
    coffea's ``Runner`` and ``apply_to_fileset`` take. The files are exact
    exports (:func:`~giod.interchange.write_root` with the dataset's
    :func:`~giod.interchange.root_names`), written under ``directory``.
    """
    from giod.interchange.export import write_root

    out: dict[str, dict[str, Any]] = {}
    for name, sel in selections.items():
        names = root_names(sel) or RootNames()
        files: dict[str, str] = {}
        job, parts = plan(sel, None, partition_events=partition_events)
        for part in parts:
            events, _ = read_partition(job, part)
            path = os.path.join(os.fspath(directory), f"{name}-db{part.database.id}-{part.start}-{part.stop}.root")
            write_root(path, events, sel.dataset.schema, names=names)
            files[path] = names.tree
        out[name] = {"files": files, "metadata": {"giod_dataset": sel.dataset.name, "giod_version": sel.version,
                                                   "giod_selection": str(sel.expression)}}
    return out
