"""Copying a dataset from one federation to another, incrementally, with its provenance.

``copy_dataset(src, dst, "raw")`` pins the source at its current version V,
lists the source databases committed after the exchange's cursor (kept in
the destination: ``Catalog.exchange_cursor``), and copies them one at a time
in commit order:

- a plain copy copies each container file (the chosen containers only)
  from the nearest site holding a good replica, verified against the size
  and CRC-32C the source catalog recorded before it is published, exactly as
  replication copies (``giod.replication.transfer``); a right file already
  at the destination (an interrupted run) is read, checked and kept, not
  copied again;
- a skim (``select=``) reads the events of the database that pass the
  selection and writes them as a new database with a writer: a skim is a
  database of the destination's own.

Each database is then registered with ``commit_database``: all its
containers or none. Containers a later pass added to a source database
already copied are copied and added to the copy (``add_containers``). Its idempotency key names the source federation,
dataset and database and the exchange's selection, so a database lands once
however often the copy is interrupted and run again, and whichever of two
concurrent copies finishes first. After each database the cursor moves to
its version: versions become visible in commit order, so every database
still to come from the source has a version above it.

Provenance crosses over: each copied database's parameters hold
``copied_from`` (source federation, dataset, database, version, selection),
and the source database's own ``copied_from`` nested inside it, so the chain
reaches back to the first federation (``giod show DATASET --database N``).
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from giod import config
from giod.catalog.leases import hold_lease, writer_host
from giod.catalog.records import ContainerRecord, ContainerSpec, DatabaseCommit, DatabaseRecord
from giod.errors import ConfigError, DataError, GiodError, IntegrityError, NotFound, SchemaError, StorageError
from giod.exchange.provenance import PROVENANCE
from giod.exchange.source import destination_path, folders, read_records, registered, skim_containers, vet
from giod.exchange.staging import copy_reads, staged
from giod.names import check_name
from giod.read import tagindex
from giod.replication.transfer import file_checksum, file_state, place
from giod.schema import TAG_CONTAINER, Schema
from giod.storage.admission import check_files
from giod.storage.checksum import Checksum
from giod.storage.site import Site
from giod.store.consistency import COPY_HOLDER
from giod.store.expected import stored_relations, stored_schemas

__all__ = ["PROGRAM", "ExchangeReport", "copy_dataset", "federation_name"]

log = logging.getLogger("giod.exchange")

PROGRAM = "giod.exchange"  # the program of a skim's databases
CHUNK = 8 << 20


@dataclass
class ExchangeReport:
    """What one ``copy_dataset`` did."""

    source: str  # the source federation, as provenance names it
    dataset: str
    target: str
    since: int | None  # the cursor before the run (None: the first run)
    until: int = 0  # the source version copied up to (the cursor after the run)
    planned: int = 0  # source databases (and later passes' containers) this run has to look at
    done: int = 0  # of those, looked at
    copied: int = 0  # databases registered in the destination
    already: int = 0  # databases that had landed before (an earlier, interrupted run)
    empty: int = 0  # source databases of which no event passes the skim's selection
    events: int = 0  # events in the databases registered
    extended: int = 0  # containers a later pass added in the source, added to earlier copies
    files_copied: int = 0
    files_adopted: int = 0  # right files found at the destination, kept without a copy
    bytes: int = 0  # bytes copied
    seconds: float = 0.0
    databases: list[int] = field(default_factory=list)  # ids in the destination of those registered
    latencies: list[float] = field(default_factory=list)  # per database: source commit to registration
    source_version: int = 0  # the source version the run pinned
    pending: str = ""  # why a skim stopped before a source database it cannot read yet

    def summary(self) -> str:
        skim = f", {self.empty} with no event passing" if self.empty else ""
        skim += f", {self.extended} containers added to earlier copies" if self.extended else ""
        return (f"{self.copied} databases ({self.events:,} events) copied from {self.source} "
                f"{self.dataset} to {self.target}, {self.already} already there{skim}; "
                f"{self.files_copied} files copied ({self.bytes:,} bytes), {self.files_adopted} found in place; "
                f"source version {self.until}" + (f"; stopped: {self.pending}" if self.pending else ""))


def federation_name(fed: Any) -> str:
    """How provenance names a federation: its directory, its catalog URL (no password) or its server."""
    if fed.root is not None:
        return str(fed.root)
    from sqlalchemy.engine import make_url

    url = str(fed.catalog.url)
    if url.startswith(("http://", "https://")):
        return url
    return make_url(url).render_as_string(hide_password=True)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class _Plan:
    source: str
    dataset: str
    target: str
    select: str | None
    containers: tuple[str, ...] | None

    @property
    def cursor(self) -> str:
        return f"x{_digest(self.source, self.dataset, self.target, self.select, self.containers)}"

    def key(self, db: DatabaseRecord) -> str:
        """The idempotency key of the copy of ``db`` (a skim's writer adds ``:0``)."""
        return f"{self.cursor}:{db.id}" + (":0" if self.select is not None else "")


def copy_dataset(src: Any, dst: Any, dataset: str, *, select: str | None = None,
                 containers: Sequence[str] | None = None, as_name: str | None = None, site: str | None = None,
                 at: int | None = None, stop: threading.Event | None = None,
                 on_database: Callable[[ExchangeReport], None] | None = None) -> ExchangeReport:
    """Copy what ``dataset`` of federation ``src`` committed since the last exchange into ``dst``.

    ``select``: a selection (tag/object expression): only passing events,
    as new databases (a skim). ``containers``: copy only these. ``as_name``:
    the dataset's name in ``dst`` (default: the same). ``site``: the
    destination site (default: its nearest). ``at``: the source version to
    copy up to (default: its current one). ``stop`` set: return after the
    database being copied. SchemaError when the two datasets' models are no
    evolution of one another; NotFound for an unknown dataset or container;
    ConfigError for a skim whose containers miss a relation's target;
    DataError for a source database whose records are refused
    (``giod.exchange.source``). All of these come before anything is
    written; a copy that fails later leaves its registered databases and
    nothing else (no target dataset if it made none).

    A skim stops before a source database that lacks a container its
    selection reads (not reconstructed yet): ``ExchangeReport.pending`` says
    which, and the cursor stays before it.
    """
    t0 = time.perf_counter()
    stop = stop or threading.Event()
    target = as_name or dataset
    check_name(target, "dataset")
    version = int(src.version) if at is None else at
    source_ds = src.dataset(dataset).at(version)
    schema = source_ds.schema
    chosen = _containers(schema, containers)
    plan = _Plan(federation_name(src), dataset, target, select or None, chosen)
    if target == dataset and plan.source == federation_name(dst):
        raise ConfigError(f"dataset {dataset} would be copied into itself: give --as another name")
    reads: set[str] = set()
    if select is not None:  # "" is refused by the parser, not read as "no selection"
        reads = _selection_reads(schema, select)  # a bad selection fails before anything is made
        skim_containers(schema, chosen)
    exists = target in dst.datasets()
    if exists:
        _check_models(schema, dst.dataset(target).schema, target)
    since = dst.catalog.exchange_cursor(plan.cursor, target)
    report = ExchangeReport(plan.source, dataset, target, since, until=since or 0, source_version=version)
    # only what changed since the cursor, and only the copies those could have: a follower's pass
    # costs what is new, not the size of either dataset
    changed = read_records(f"dataset {dataset}", source_ds.databases if since is None else
                           lambda: src.catalog.databases(dataset, version, changed_since=since))
    todo = _work(changed, since, plan)
    report.planned = len(todo)
    keys = None if since is None else [plan.key(db) for _, db, _ in todo]  # a first run copies everything
    landed = {db.idempotency_key: db for db in dst.catalog.databases(target, keys=keys)} if todo and exists else {}
    parameters = vet(schema, plan, todo, dst, landed, lambda name: _chosen(chosen, name))
    made = _Target(schema, dst, target)
    dst_site = dst.site(site)
    schema_ids = _SchemaMap(src, dst)
    reading = copy_reads(todo, skim_reads=reads if select else None, chosen=lambda name: _chosen(chosen, name),
                         landed=lambda db: plan.key(db) in landed)
    try:
        with staged(src, reading):  # every tape file the copy reads, in one request
            for upto, db, added in todo:
                if stop.is_set():
                    break
                if added:
                    _extend(src, dst, db, added, landed.get(plan.key(db)), plan, dst_site, schema_ids, report, made)
                elif plan.key(db) in landed:
                    report.already += 1
                elif select:
                    missing = sorted(reads - {c.name for c in db.containers})
                    if missing:
                        report.pending = f"source database {db.id} has no container {', '.join(missing)} yet"
                        break
                    _skim(src, source_ds, made, db, plan, dst_site.name, report, parameters[db.id])
                else:
                    _copy(src, dst, db, plan, dst_site, schema_ids, report, made, parameters[db.id])
                report.until = dst.catalog.advance_exchange_cursor(plan.cursor, plan.source, target, upto)
                report.done += 1
                if on_database is not None:
                    on_database(report)
            else:
                made.ready()  # a copy of nothing new still leaves the target, set up to follow the source
                report.until = dst.catalog.advance_exchange_cursor(plan.cursor, plan.source, target, version)
    except BaseException:
        made.undo()
        raise
    report.seconds = time.perf_counter() - t0
    return report


def _selection_reads(schema: Schema, select: str) -> set[str]:
    """The containers a selection reads (each source database must have them to be skimmed)."""
    from giod.read.selection import parse_selection

    tags, objects = parse_selection(schema, select).split()
    reads = {TAG_CONTAINER} if tags.fields else set()
    return reads | {schema.container_of(name) for name in objects.objects}


class _Target:
    """The target dataset: created (or moved to the source's model) once, right before the first thing is
    registered in it, so that a copy refused or failed before that leaves no dataset behind."""

    def __init__(self, schema: Schema, dst: Any, name: str):
        self.schema, self.dst, self.name = schema, dst, name
        self.done = False
        self.created = False

    def ready(self) -> Any:
        if not self.done:
            self.created = _prepare_target(self.schema, self.dst, self.name)
            self.done = True
        return self.dst.dataset(self.name)

    def undo(self) -> None:
        """Delete the target again if this run created it and nothing landed in it (a failed first copy)."""
        if self.created and not self.dst.catalog.databases(self.name):
            with contextlib.suppress(GiodError):  # the first error is the one to tell
                self.dst.catalog.delete_dataset(self.name)


def _work(databases: list[DatabaseRecord], since: int | None, plan: _Plan
          ) -> list[tuple[int, DatabaseRecord, list[ContainerRecord]]]:
    """``(version, database, containers)`` in version order: databases committed after ``since`` (no
    containers), and containers a later pass added after ``since`` to databases copied before (plain
    copies only; one item per version, so the cursor never passes a container not yet copied)."""
    out: list[tuple[int, DatabaseRecord, list[ContainerRecord]]] = []
    for db in databases:
        if since is None or db.created_version > since:
            out.append((db.created_version, db, []))
        elif plan.select is None:
            later: dict[int, list[ContainerRecord]] = {}
            for c in db.containers:
                if c.created_version > since and _chosen(plan.containers, c.name):
                    later.setdefault(c.created_version, []).append(c)
            out += [(v, db, cs) for v, cs in later.items()]
    return sorted(out, key=lambda item: (item[0], item[1].id))


def _containers(schema: Schema, names: Sequence[str] | None) -> tuple[str, ...] | None:
    if names is None:
        return None
    known = [*schema.containers, TAG_CONTAINER]
    for n in names:
        if n not in known:
            close = difflib.get_close_matches(n, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise NotFound(f"no container {n!r} in model {schema.name} (it has {', '.join(known)}){hint}")
    return tuple(sorted(set(names)))


class _SchemaMap:
    """Source schema ids to the destination's, registering each model there once."""

    def __init__(self, src: Any, dst: Any):
        self.src, self.dst = src, dst
        self.ids: dict[int, int] = {}
        self.models: dict[int, Schema] = {}  # by destination id: what the copied files must hold

    def model(self, dst_id: int) -> Schema:
        """The model registered as the destination's schema ``dst_id`` by this copy (parsed from the source's
        text, so a destination that does not show its schemas to this copy's token is not asked)."""
        return self.models[dst_id] if dst_id in self.models else self.dst.schema(dst_id)

    def __call__(self, schema_id: int) -> int:
        if schema_id not in self.ids:
            rec = self.src.catalog.schema(schema_id)
            try:
                parsed = Schema.from_text(rec.text)
            except SchemaError as exc:
                raise DataError(f"the source's schema {schema_id} refused: {exc}") from exc
            if parsed.fingerprint != rec.fingerprint:  # the fingerprint names the model: it must be the text's
                raise DataError(f"the source's schema {schema_id} refused: its fingerprint is not its text's")
            self.ids[schema_id] = int(self.dst.catalog.add_schema(rec.name, rec.text, rec.fingerprint))
            self.models[self.ids[schema_id]] = parsed
        return self.ids[schema_id]


def _check_models(schema: Schema, current: Schema, target: str) -> bool:
    """Whether the destination's model must move to the source's (True) or stays (False); SchemaError when
    they are no evolution of one another. Nothing is changed here."""
    if current.fingerprint == schema.fingerprint:
        return False
    try:
        schema.check_evolution(current)  # the source is newer: the destination follows it
    except SchemaError as newer:
        try:
            current.check_evolution(schema)  # the destination is newer: the copies stay readable
        except SchemaError:
            raise SchemaError(
                f"cannot copy into dataset {target}: its model {current.name} and the source's model "
                f"{schema.name} are no evolution of one another ({newer})") from newer
        return False
    return True


def _prepare_target(schema: Schema, dst: Any, target: str) -> bool:
    """Create the target dataset (True), or match its model to the source's by the evolution rules."""
    if target not in dst.datasets():
        try:
            dst.create_dataset(target, schema)
        except GiodError:
            if target not in dst.datasets():  # not a concurrent copy that created it first
                raise
            return False
        return True
    if _check_models(schema, dst.dataset(target).schema, target):
        dst.evolve_dataset(target, schema)
    return False


def _holders(src: Any, container: ContainerRecord) -> list[str]:
    by_id = {s.id: s for s in src.sites()}
    held = [by_id[i] for i in container.site_ids if i in by_id]
    return [s.name for s in sorted(held, key=lambda s: (s.distance, s.name))]


def _copy(src: Any, dst: Any, db: DatabaseRecord, plan: _Plan, dst_site: Site, schema_ids: _SchemaMap,
          report: ExchangeReport, made: _Target, parameters: dict[str, Any]) -> None:
    """Copy the chosen container files of ``db``, verified, then register them as one database."""
    wanted = [c for c in db.containers if _chosen(plan.containers, c.name)]
    params = {**parameters, PROVENANCE: _provenance(plan, db, parameters.get(PROVENANCE))}
    with _placing(dst, dst_site, plan, db, wanted) as (placed, confirm):
        specs = _place_all(src, dst, wanted, plan, dst_site, schema_ids, report, placed)
        # checksums prove transport, no more
        check_files(dst_site, specs, stored_relations(made.schema), stored_schemas(specs, schema_ids.model))
        commit = DatabaseCommit(plan.target, db.n_events, dst_site.name, tuple(specs),
                                tag_stats=dict(db.tag_stats), writer=db.writer, program=db.program,
                                program_version=db.program_version, parameters=params,
                                idempotency_key=plan.key(db))
        made.ready()
        confirm()
        result = dst.catalog.commit_database(commit)
    _landed(report, db, result.database_id, result.duplicate)


@contextlib.contextmanager
def _placing(dst: Any, site: Site, plan: _Plan, db: DatabaseRecord, wanted: list[ContainerRecord]
             ) -> Iterator[tuple[list[str], Callable[[], None]]]:
    """While the files of one source database are placed and registered: leases on their folders, held in
    the copy's name (``consistency.COPY_HOLDER``), so that files a killed copy leaves are known as its own
    (fsck, gc and recover leave them to the copy, which adopts them when run again). If anything fails
    before the registration, the files placed (the list yielded, filled by the caller) are removed again.
    The callable yielded confirms the leases right before the registration."""
    paths = [destination_path(plan.dataset, plan.target, c) for c in wanted]
    seconds = float(config.load(dst.root)["lease_seconds"])
    holder = f"{COPY_HOLDER} {plan.key(db)} on {writer_host()}"
    leases = [hold_lease(dst.catalog, site.name, prefix, holder, seconds) for prefix in folders(paths)]
    placed: list[str] = []

    def confirm() -> None:
        for lease in leases:
            lease.confirm()

    try:
        yield placed, confirm
    except BaseException:
        try:
            for path in placed:
                if registered(dst, path) is None:  # a registration that went through after all stays
                    site.remove(path)
        except (GiodError, OSError) as exc:
            log.warning("files of the failed copy of database %s stay at %s, under an expiring lease: %s",
                        db.id, site.name, exc)
            for lease in leases:
                lease.lost = True  # not renewed, not released: it expires, and names the files as the copy's
            raise
        for lease in leases:
            lease.release()
        raise
    for lease in leases:
        lease.release()


def _place_all(src: Any, dst: Any, wanted: list[ContainerRecord], plan: _Plan, dst_site: Site,
               schema_ids: _SchemaMap, report: ExchangeReport, placed: list[str]) -> list[ContainerSpec]:
    specs = []
    for c in wanted:
        path = destination_path(plan.dataset, plan.target, c)
        known = registered(dst, path)
        if known is not None and known != c.checksum:  # registered since the copy started: never replaced
            raise DataError(f"source database {c.database_id} refused: its container {c.name} would be placed "
                            f"at {path}, a file registered in the destination by another database")
        how, moved = ("adopted", 0) if known is not None else _fetch(src, c, dst_site, path)
        if known is None:
            placed.append(path)
        report.files_copied += how == "copied"
        report.files_adopted += how == "adopted"
        report.bytes += moved
        specs.append(ContainerSpec(c.name, path, c.checksum, c.size, c.cluster_entries, schema_ids(c.schema_id),
                                   program=c.program, program_version=c.program_version,
                                   parameters=dict(c.parameters), format=c.format,
                                   cluster_checksums=c.cluster_checksums))
    return specs


def _extend(src: Any, dst: Any, db: DatabaseRecord, added: list[ContainerRecord], copy: DatabaseRecord | None,
            plan: _Plan, dst_site: Site, schema_ids: _SchemaMap, report: ExchangeReport, made: _Target) -> None:
    """Add to the copy of ``db`` the containers a later pass added to ``db`` in the source."""
    if copy is None:  # not copied by this exchange (copied before it existed, or deleted since)
        return
    there = {(c.name, c.checksum) for c in copy.containers}
    added = [c for c in added if (c.name, c.checksum) not in there]  # copied with the database already
    if not added:
        return
    with _placing(dst, dst_site, plan, db, added) as (placed, confirm):
        specs = _place_all(src, dst, added, plan, dst_site, schema_ids, report, placed)
        # checksums prove transport, no more
        check_files(dst_site, specs, stored_relations(made.schema), stored_schemas(specs, schema_ids.model))
        stats = dict(db.tag_stats) if any(c.name == TAG_CONTAINER for c in added) else None
        key = f"{plan.key(db)}+{_digest(sorted(c.id for c in added))}"
        made.ready()
        confirm()
        dst.catalog.add_containers(copy.id, specs, dst_site.name, tag_stats=stats, replace=True,
                                   idempotency_key=key)
    report.extended += len(added)


def _chosen(containers: tuple[str, ...] | None, name: str) -> bool:
    if containers is None:
        return True
    # the tag index belongs to the tag container: it goes where the tags go
    return name in containers or (name == tagindex.TAG_INDEX and TAG_CONTAINER in containers)


def _landed(report: ExchangeReport, db: DatabaseRecord, new_id: int, duplicate: bool) -> None:
    if duplicate:  # a concurrent copy registered it first
        report.already += 1
        return
    report.copied += 1
    report.events += db.n_events
    report.databases.append(new_id)
    report.latencies.append(max(0.0, time.time() - db.created))


def _provenance(plan: _Plan, db: DatabaseRecord, chain: dict[str, Any] | None) -> dict[str, Any]:
    """This copy's step of the chain, before the source's own (``chain``, parsed by ``giod.exchange.source``)."""
    return {"federation": plan.source, "dataset": plan.dataset, "database": db.id,
            "version": db.created_version, "selection": plan.select,
            "containers": list(plan.containers) if plan.containers is not None else None,
            "from": chain}


def _fetch(src: Any, c: ContainerRecord, dst: Site, path: str) -> tuple[str, int]:
    """Place container ``c`` at ``path`` on ``dst`` from the nearest source site that serves it right."""
    holders = _holders(src, c)
    if not holders:
        raise StorageError(f"container {c.path} has no good replica in the source federation")
    failures = []
    for name in holders:
        moved = 0

        def advance(n: int) -> None:
            nonlocal moved
            moved += n

        try:
            site = src.site(name)
            if path == c.path:
                how = place(site, dst, c.path, c.size, c.checksum, advance=advance)
            else:
                how = _place_as(site, dst, c, path, advance)
            return how, moved if how == "copied" else 0
        except (NotFound, IntegrityError, StorageError, OSError) as exc:
            log.warning("copy of %s from site %s failed: %s", c.path, name, exc)
            failures.append(f"{name}: {exc}")
    raise StorageError(f"container {c.path} could not be copied: " + "; ".join(failures))


def _place_as(src: Site, dst: Site, c: ContainerRecord, path: str, advance: Callable[[int], None]) -> str:
    """``place`` under another name (the dataset renamed): verified on the way and read back."""
    found = file_state(dst, path, c.size, c.checksum)
    if found.intact:
        return "adopted"
    if found.present:
        dst.remove(path)
    summer = Checksum()
    pending = dst.create(path)
    try:
        with src.open(c.path) as fh:
            while block := fh.read(CHUNK):
                summer.update(block)
                pending.write(block)
                advance(len(block))
        if summer.size != c.size or summer.hexdigest() != c.checksum:
            raise IntegrityError(f"{c.path} from site {src.name} arrived as {summer.size} bytes with "
                                 f"{summer.hexdigest()}, the catalog recorded {c.size} bytes with {c.checksum}")
        pending.publish()
    except BaseException:
        pending.discard()
        raise
    value, n = file_checksum(dst, path)
    if value != c.checksum or n != c.size:
        dst.remove(path)
        raise IntegrityError(f"{path} read back at site {dst.name} as {n} bytes with {value}")
    return "copied"


def _skim(src: Any, source_ds: Any, made: _Target, db: DatabaseRecord, plan: _Plan, site: str,
          report: ExchangeReport, parameters: dict[str, Any]) -> None:
    """Write the events of ``db`` that pass the selection as a new database of the target."""
    from giod.read.objects import unlink
    from giod.read.projection import assemble, read_database, resolve_columns
    from giod.read.selection import parse_selection, select_local

    schema = source_ds.schema
    local = select_local(source_ds.snapshot, db, parse_selection(schema, plan.select))
    n = db.n_events if local is None else len(local)
    if n == 0:
        report.empty += 1
        return
    available = {c.name for c in db.containers}
    columns = None
    if plan.containers is not None:
        available &= set(plan.containers)
        columns = [c for c in sorted(schema.collections) if schema.container_of(c) in available]
        columns += list(schema.tags) if TAG_CONTAINER in available else []
    proj = resolve_columns(schema, columns, available)
    rows = None if local is None else np.asarray(local, dtype=np.int64)
    # relations as stored (index columns), as a writer takes them
    events = unlink(assemble(schema, proj, read_database(source_ds.snapshot, db, proj, rows)), schema)
    writer = made.ready().writer(site=site, database_events=n, database_bytes=1 << 62,
                                 idempotency_key=plan.key(db).removesuffix(":0"), program=PROGRAM,
                                 parameters={PROVENANCE: _provenance(plan, db, parameters.get(PROVENANCE))})
    with writer:
        writer.append(events)
    if not writer.commits:
        raise ConfigError(f"skim of database {db.id} wrote nothing")
    result = writer.commits[0]
    _landed(report, db, result.database_id, result.duplicate)
    if not result.duplicate:
        report.events += n - db.n_events  # a skim registers only the events that passed
