"""Later passes: new containers for databases already committed, entries aligned with theirs."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import awkward as ak
import numpy as np
import pyarrow.compute as pc

from giod import config
from giod.catalog.leases import Lease, hold_lease, writer_host
from giod.catalog.records import ContainerSpec, DatabaseRecord
from giod.columns import as_events, containers_in, field_width, to_tables
from giod.errors import ConflictError, DataError, deprecated
from giod.read import tagindex
from giod.read.projection import read_database, resolve_columns
from giod.schema import TAG_CONTAINER, Schema
from giod.storage.container import SUFFIX, ContainerWriter, WriteOptions, object_counts
from giod.store.tagstats import merge_stats
from giod.write.clusters import ContainerBuffer, commit_record, recordable, seen_version
from giod.write.writeoptions import DEFAULT_CLUSTER_BYTES, dataset_options, encoding, options_for, write_options

if TYPE_CHECKING:
    from giod.store.snapshot import Snapshot


@dataclass(frozen=True)
class PassOutput:
    """Containers written for one database by a later pass, ready to register."""

    database_id: int
    containers: tuple[ContainerSpec, ...]
    tag_stats: dict[str, tuple[float, float]]


def write_pass(
    dataset: Snapshot,
    database: DatabaseRecord,
    events: Any,
    *,
    containers: Sequence[str] | None = None,
    replace: bool = False,
    site: str | None = None,
    options: WriteOptions | None = None,
    cluster_bytes: int = DEFAULT_CLUSTER_BYTES,
    cluster_events: int | None = None,
    program: str = "",
    program_version: str = "",
    parameters: Mapping[str, Any] | None = None,
) -> PassOutput:
    """Write new containers for an existing database (entries aligned), not yet registered."""
    schema = dataset.schema
    parameters = recordable(parameters)
    arr = as_events(events, schema)
    if len(arr) != database.n_events:
        raise DataError(
            f"database {database.id} has {database.n_events} events, the pass gave {len(arr)}"
        )
    present = containers_in(arr, schema)
    if containers is None:
        existing = {c.name for c in database.containers}
        wanted = [c for c in present if replace or c not in existing]
    else:
        wanted = list(containers)
        missing = sorted(set(wanted) - set(present))
        if missing:
            raise DataError(f"the events carry no data for container {missing[0]}")
    if not replace:
        clash = sorted({c.name for c in database.containers} & set(wanted))
        if clash:
            raise ConflictError(
                f"database {database.id} already has container {clash[0]}; use replace=True (--force)"
            )
    if not wanted and present:
        raise ConflictError(f"database {database.id} already has container {present[0]}; "
                            "use replace=True (--force)")
    if not wanted:
        raise DataError("the pass writes no new container")
    tables = to_tables(arr, schema, wanted, _stored_counts(dataset, database, arr, wanted))
    first = database.containers[0].path if database.containers else f"{dataset.name}/{uuid.uuid4().hex}/x"
    directory = first.rsplit("/", 1)[0]
    target = dataset.store.site(site)
    if options is None:
        options = dataset_options(dataset.record, write_options(config.load(dataset.store.root)))
    specs: list[ContainerSpec] = []
    stats: dict[str, tuple[float, float]] = {}
    # what a catalog that lost the pass's commit needs to add its containers again (giod recover)
    record = {"pass": True, "dataset": dataset.name, "schema": schema.fingerprint, "replace": replace,
              "program": program, "program_version": program_version, "parameters": dict(parameters or {}),
              "seen_version": seen_version(dataset.store.catalog), "containers": sorted(tables)}
    for c, table in tables.items():
        w = ContainerWriter(target, f"{directory}/{c}.{uuid.uuid4().hex[:8]}{SUFFIX[options.container_format]}",
                            schema.arrow_schema(c), options_for(c, options), commit_record(record, c))
        try:
            buf = ContainerBuffer(w, None if c == TAG_CONTAINER else cluster_events, cluster_bytes)
            buf.add(table)
            buf.finish()
            out = w.close()
        except BaseException:
            w.abort()
            for s in specs:
                target.remove(s.path)
            raise
        specs.append(ContainerSpec(c, out.path, out.checksum, out.size, out.cluster_entries, dataset.schema_id,
                                   program=program, program_version=program_version,
                                   parameters=dict(parameters or {}), format=out.format,
                                   cluster_checksums=out.cluster_checksums))
        if c == TAG_CONTAINER:
            merge_stats(stats, table)
            try:  # new tags get their index (replacing the one of the tags they replace)
                index = tagindex.write(target, f"{directory}/{tagindex.TAG_INDEX}.{uuid.uuid4().hex[:8]}.arrow",
                                       table, out.path, out.checksum, options,
                                       commit_record(record, tagindex.TAG_INDEX))
            except BaseException:
                for s in specs:
                    target.remove(s.path)
                raise
            if index is not None:
                specs.append(ContainerSpec(tagindex.TAG_INDEX, index.path, index.checksum, index.size,
                                           index.cluster_entries, dataset.schema_id, program=program,
                                           program_version=program_version, parameters=dict(parameters or {}),
                                           format=index.format, cluster_checksums=index.cluster_checksums))
    return PassOutput(database.id, tuple(specs), stats)


def _stored_counts(dataset: Snapshot, database: DatabaseRecord, events: ak.Array,
                   containers: Sequence[str]) -> dict[str, np.ndarray]:
    """Objects per event of relation targets that the pass does not carry itself."""
    schema = dataset.schema
    have = set(ak.fields(events))
    targets: set[str] = {r.target for c in containers if c != TAG_CONTAINER for coll in schema.containers[c]
                         for r in schema.collection_type(coll).relations.values()} - have
    out: dict[str, np.ndarray] = {}
    for t in sorted(targets):
        # the pass has usually just read these containers (a reconstruction reads the raw hits): their counts
        # come from that read
        rec = database.container(schema.container_of(t))
        if rec is not None and rec.schema_id == dataset.schema_id:
            known = object_counts(rec.path, rec.size, t)
            if known is not None and len(known) == database.n_events:
                out[t] = known
    targets -= set(out)
    if not targets:
        return out
    # otherwise one leaf per collection is decoded, only for its list lengths: the narrowest is the cheapest
    cheapest = {t: _narrowest(schema, t) for t in targets}
    proj = resolve_columns(schema, [f"{t}.{f}" for t, f in cheapest.items()],
                           {c.name for c in database.containers})
    tables = read_database(dataset, database, proj, None)
    for t in targets:
        col = tables[schema.container_of(t)].column(t)
        out[t] = pc.list_value_length(col).to_numpy(zero_copy_only=False)
    return out


def _narrowest(schema: Schema, collection: str) -> str:
    """The field (or relation) of ``collection`` with the fewest bytes per object."""
    tdef = schema.collection_type(collection)
    if not tdef.fields:
        return next(iter(tdef.relations))
    return min(tdef.fields, key=lambda f: field_width(tdef.fields[f]))


class PassWriter:
    """Adds containers to existing databases; everything lands in one commit (``ds.add_containers()``).

    ``with ds.add_containers(program="reco") as p: p.write(db, events)`` — or
    write in worker processes with :func:`write_pass` and hand the outputs to
    :meth:`add`. The verbs are those of :class:`~giod.write.writer.Writer`:
    :meth:`commit` and :meth:`abort`; leaving a ``with`` block normally commits,
    leaving it by an exception aborts.

    The encoding keywords are a writer's (``compression``, ``compression_level``,
    ``min_savings``, ``byte_stream_split``, ``page_checksums``, ``container_format``,
    ``cluster_bytes``, ``cluster_events`` or ``options``); a pass writes no new
    database, so ``database_events`` and the idempotency keys do not apply.

    From its creation until it commits or aborts, it holds a lease on the
    dataset's folder at its site, so that gc leaves alone the containers the
    pass (or its workers) wrote and has not registered yet.
    """

    def __init__(self, dataset: Snapshot, *, replace: bool = False, site: str | None = None,
                 compression: str | None = None, compression_level: int | None = None,
                 min_savings: float | None = None,
                 byte_stream_split: bool | None = None, page_checksums: bool | None = None,
                 container_format: str | None = None, cluster_bytes: int | None = None,
                 cluster_events: int | None = None, options: WriteOptions | None = None,
                 program: str = "", program_version: str = "", parameters: Mapping[str, Any] | None = None):
        self.dataset = dataset
        self.program = program
        self.program_version = program_version
        self.parameters = dict(parameters or {})
        self.replace = replace
        self.site = dataset.store.site(site)
        self.options, cfg = encoding(dataset.store.root, dataset.record, options, container_format=container_format,
                                     compression=compression, compression_level=compression_level,
                                     min_savings=min_savings, byte_stream_split=byte_stream_split,
                                     page_checksums=page_checksums,
                                     cluster_bytes=cluster_bytes)
        if cluster_events is not None and cluster_events <= 0:
            raise DataError("cluster_events must be positive")
        self.cluster_bytes = int(cfg["cluster_bytes"])
        self.cluster_events = cluster_events
        self.outputs: list[PassOutput] = []
        self.version: int | None = None
        self._closed = False
        if not cfg["lease_seconds"] > 0:
            raise DataError("lease_seconds must be positive")
        self._lease: Lease | None = hold_lease(dataset.store.catalog, self.site.name, f"{dataset.name}/",
                                               writer_host(), float(cfg["lease_seconds"]))

    def write(self, database: DatabaseRecord, events: Any, containers: Sequence[str] | None = None) -> PassOutput:
        """Write containers for ``database`` from ``events`` (one per event of it); registered at commit."""
        self._check_open()
        out = write_pass(self.dataset, database, events, containers=containers, replace=self.replace,
                         site=self.site.name, options=self.options, cluster_bytes=self.cluster_bytes,
                         cluster_events=self.cluster_events, program=self.program,
                         program_version=self.program_version, parameters=self.parameters)
        self.outputs.append(out)
        return out

    def add(self, output: PassOutput) -> None:
        """Register at commit the containers a :func:`write_pass` elsewhere (a worker process) wrote."""
        self._check_open()
        self.outputs.append(output)

    def commit(self) -> int | None:
        """Register every container written in one catalog commit and finish.

        Returns the federation version of that commit (None when nothing was written).
        """
        if self._closed:
            return self.version
        self._closed = True
        if not self.outputs:
            self._release()
            return None
        items = [(o.database_id, tuple(self._provenance(c) for c in o.containers), o.tag_stats or None)
                 for o in self.outputs]
        try:
            if self._lease is not None:
                self._lease.confirm()  # the files are safe from gc for a whole term from here
            self.version = self.dataset.store.catalog.add_containers_bulk(
                items, self.site.name, replace=self.replace
            )
        finally:
            self._release()
        self.outputs = []
        return self.version

    def abort(self) -> None:
        """Remove the containers written and not committed, and finish."""
        for o in self.outputs:
            for spec in o.containers:
                self.site.remove(spec.path)
        self.outputs = []
        self._closed = True
        self._release()

    def discard(self) -> None:
        """Deprecated name of :meth:`abort`."""
        deprecated("PassWriter.discard()", "PassWriter.abort()")
        self.abort()

    def _check_open(self) -> None:
        if self._closed:
            raise DataError("this pass writer has committed or aborted; open another with ds.add_containers()")

    def _release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()

    def _provenance(self, spec: ContainerSpec) -> ContainerSpec:
        """Containers written elsewhere (worker processes) get this pass's provenance."""
        if spec.program or not self.program:
            return spec
        return dataclasses.replace(spec, program=self.program, program_version=self.program_version,
                                   parameters=dict(self.parameters))

    def __enter__(self) -> PassWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()
