"""The store: one catalog, its sites and the replica router; and a dataset's snapshot in it.

:class:`Store` is what the readers (``giod.read``), the writers
(``giod.write``) and the checks (``giod.store.consistency``) work with: the
catalog, the sites opened once each, the schemas parsed once each, and the
choice of replica on every read. :class:`Snapshot` is one dataset of a store
at one version. Neither knows the public ``giod.Federation`` and ``Dataset``,
which are a thin front over them: nothing here calls back up.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from giod.catalog.leases import IdleLeases
from giod.catalog.protocol import CatalogAPI
from giod.catalog.records import Bounds, ContainerRecord, DatabaseRecord, DatasetRecord, SiteRecord
from giod.errors import ConfigError, GiodError, IntegrityError, StorageError
from giod.replication.reads import ReadBalancer, read_replica
from giod.schema import TAG_CONTAINER, Schema
from giod.storage import validation
from giod.storage.container import ContainerReader, gather
from giod.storage.site import Site, check_site_url, open_site
from giod.storage.validation import check_schema
from giod.store.lastread import ReadLog

__all__ = ["SNAPSHOT_CACHE", "Snapshot", "Store"]

SNAPSHOT_CACHE = 16  # dataset snapshots whose database lists are kept
#: readers of local container files kept open (their footers parsed, their memory maps made) per store
OPEN_READERS = 1024

T = TypeVar("T")
log = logging.getLogger("giod.store")


#: schemas parsed from their text, kept per process (a freshly opened federation's first read parsed its
#: YAML again: 15 ms)
PARSED_SCHEMAS = 64
_PARSED: OrderedDict[str, Schema] = OrderedDict()
_PARSED_LOCK = threading.Lock()


def _parsed(text: str, source: str) -> Schema:
    """``Schema.from_text(text)``, parsed once per process; a schema is not changed once built."""
    with _PARSED_LOCK:
        found = _PARSED.get(text)
        if found is not None:
            _PARSED.move_to_end(text)
            return found
    schema = Schema.from_text(text, source=source)
    with _PARSED_LOCK:
        _PARSED[text] = schema
        while len(_PARSED) > PARSED_SCHEMAS:
            _PARSED.popitem(last=False)
    return schema


class Store:
    """A catalog with its sites: sites and schemas opened once, reads routed to the best replica.

    ``root`` is the directory of an embedded federation, against which
    relative site URLs resolve; None for a catalog database or a server.
    """

    def __init__(self, catalog: CatalogAPI, root: Path | None = None):
        self.catalog = catalog
        self.root = root
        self.reads = ReadBalancer()  # reads in flight per site, sites found down
        self._sites: dict[str, Site] = {}
        self._schemas: dict[int, Schema] = {}
        self._snapshots: dict[tuple[Any, ...], list[DatabaseRecord]] = {}
        self._records: dict[tuple[str, int], DatasetRecord] = {}
        self._site_ids: dict[int, SiteRecord] | None = None
        self._readers: OrderedDict[tuple[str, int, str], ContainerReader] = OrderedDict()
        self._readers_lock = threading.Lock()
        self._read_log: ReadLog | None = None
        #: writers' leases left by their last commit for the next writer (``giod.catalog.leases.IdleLeases``)
        self.idle_leases = IdleLeases()

    @property
    def read_log(self) -> ReadLog:
        """The databases read, written to the catalog in batches (``giod.store.lastread``), made on first use."""
        if self._read_log is None:
            from giod import config

            self._read_log = ReadLog(self.catalog, enabled=bool(config.load(self.root)["record_reads"]))
        return self._read_log

    def close(self) -> None:
        """Release the idle writers' leases and write the reads noted and not written yet (the catalog
        itself is the caller's to close)."""
        self.idle_leases.release_all()
        if self._read_log is not None:
            self._read_log.close()

    @property
    def version(self) -> int:
        """The catalog's current version (commit counter)."""
        return self.catalog.version()

    # ------------------------------------------------------------- datasets

    def datasets(self, version: int | None = None) -> list[str]:
        """The names of the datasets at ``version`` (the current one when None)."""
        return [d.name for d in self.catalog.datasets(version)]

    def dataset(self, name: str, version: int | None = None) -> Snapshot:
        """Dataset ``name`` at ``version`` (None: as it grows); NotFound when there is none."""
        return Snapshot(self, self.catalog.dataset(name, version), version)

    def schema(self, schema_id: int) -> Schema:
        """The schema registered under ``schema_id``, parsed once per process (by its text)."""
        if schema_id not in self._schemas:
            rec = self.catalog.schema(schema_id)
            self._schemas[schema_id] = _parsed(rec.text, f"catalog schema {schema_id}")
        return self._schemas[schema_id]

    def remember_schema(self, schema_id: int, schema: Schema) -> None:
        """Keep ``schema``, just registered as ``schema_id``, instead of parsing it back."""
        self._schemas[schema_id] = schema

    def dataset_record(self, name: str, version: int) -> DatasetRecord:
        """The record of dataset ``name`` at ``version``, asked once per version (versions are immutable)."""
        key = (name, version)
        found = self._records.get(key)
        if found is None:
            found = self._records[key] = self.catalog.dataset(name, version)
            while len(self._records) > SNAPSHOT_CACHE:
                self._records.pop(next(iter(self._records)))
        return found

    def snapshot_databases(self, dataset: str, version: int, overlapping: Bounds | None = None
                           ) -> list[DatabaseRecord]:
        """Databases of ``dataset`` at ``version``, listed once per snapshot (versions are immutable).

        ``overlapping`` keeps only those whose tag statistics overlap the ranges (pruned in SQL).
        """
        key = (dataset, version, tuple(sorted((overlapping or {}).items())))
        found = self._snapshots.get(key)
        if found is None:
            found = (self.catalog.databases(dataset, version, overlapping=overlapping) if overlapping
                     else self.catalog.databases(dataset, version))
            self._snapshots[key] = found
            while len(self._snapshots) > SNAPSHOT_CACHE:
                self._snapshots.pop(next(iter(self._snapshots)))
        return list(found)

    # ---------------------------------------------------------------- sites

    def sites(self) -> list[SiteRecord]:
        """The registered sites, nearest first."""
        return sorted(self.catalog.sites(), key=lambda s: (s.distance, s.name))

    def add_site(self, name: str, url: str, distance: int = 0) -> SiteRecord:
        """Register a site; ConfigError when ``url`` does not have the form of a site URL."""
        check_site_url(name, url)
        self._site_ids = None
        return self.catalog.add_site(name, url, distance)

    def remove_site(self, name: str, *, force: bool = False) -> int:
        """Remove a site from the catalog (its files stay); see ``Catalog.remove_site``."""
        version = self.catalog.remove_site(name, force=force)
        self._sites.pop(name, None)
        self._site_ids = None
        return version

    def site(self, name: str | None = None) -> Site:
        """The site ``name``, or the nearest one when no name is given."""
        if name is None:
            sites = self.sites()
            if not sites:
                raise ConfigError("this federation has no site to write to: giod site add NAME PATH")
            name = sites[0].name
        if name not in self._sites:
            rec = self.catalog.site(name)
            self._sites[name] = open_site(rec.name, self._resolve(rec.url))
        return self._sites[name]

    def _resolve(self, url: str) -> str:
        if "://" in url or os.path.isabs(url):
            return url
        if self.root is None:
            raise ConfigError(f"site URL {url!r} is relative but the catalog is not in a directory")
        return str(self.root / url)

    # ---------------------------------------------------------- the router

    def _holders(self, container: ContainerRecord) -> list[SiteRecord]:
        # sites are listed once per store, not once per file; a site
        # registered meanwhile by another process triggers one fresh listing
        if self._site_ids is None or not set(container.site_ids) <= set(self._site_ids):
            self._site_ids = {s.id: s for s in self.sites()}
        return [self._site_ids[i] for i in container.site_ids if i in self._site_ids]

    def read_container(self, container: ContainerRecord, read: Callable[[ContainerReader], T]) -> T:
        """``read(reader)`` on the best good replica (nearest healthy site, then least loaded).

        Fails over to the next replica when a site is down or a file is
        missing or corrupt, also when the damage shows only while reading; a
        damaged replica is marked (see ``giod.replication.reads``). A file whose own schema is not its
        container's in the data model it was written with is damaged too (``check_schema``).
        """
        (self._read_log or self.read_log).note(container.database_id)  # written later, by another thread
        schema = self.schema(container.schema_id)
        if container.name not in schema.containers and container.name != TAG_CONTAINER:
            return self._read_kept(container, read)
        expected = schema.arrow_schema(container.name)
        # an Arrow footer is checked against the catalog's CRC-32C on every opening: a file whose schema passed
        # once stays passed (a comparison per opening was ~45 µs a container, paid on every database read)
        vouched = container.format == "arrow" and bool(container.cluster_checksums)

        def checked(reader: ContainerReader) -> T:
            key = ("schema", reader.site.name, container.path, container.cluster_checksums[-1] if vouched else None,
                   container.schema_id)
            if not vouched or key not in validation.SEEN:
                check_schema(reader.arrow_schema, expected, f"container {container.path}")
                if vouched:
                    validation.SEEN.add(key)
            return read(reader)

        return self._read_kept(container, checked)

    def _read_kept(self, container: ContainerRecord, read: Callable[[ContainerReader], T]) -> T:
        """``read`` on the reader of ``container`` kept open from an earlier read, else through the router.

        Opening a container (its size, footer, checksums, memory map) cost about a millisecond, paid
        again by every read of every database. A local file is immutable under its path and checksum, so
        its reader is kept (least recently used dropped first) and used while its site is the one the
        router would choose (nearest, up, least loaded); a failure through it forgets it and goes to
        the router, which fails over and marks damage as before. Remote files are not kept: their
        sites cache what they fetched.
        """
        key = (container.path, container.size, container.checksum)
        with self._readers_lock:
            kept = self._readers.get(key)
            if kept is not None:
                self._readers.move_to_end(key)
        if kept is not None:
            name = kept.site.name
            chosen = self.reads.order(self._holders(container))
            if chosen and chosen[0].name == name:  # where the router would read it: nearest, least loaded
                self.reads.begin(name)
                try:
                    result = read(kept)
                except (IntegrityError, StorageError):
                    with self._readers_lock:
                        self._readers.pop(key, None)
                    # the router reads it again, elsewhere if need be, and marks what is damaged
                else:
                    self.reads.up(name)  # the site answered, as the router counts it (a task's read sites)
                    return result
                finally:
                    self.reads.end(name)

        def kept_after(reader: ContainerReader) -> bool:
            # the router's reader, kept once it has read a local file (its memory map mapped afresh, so that
            # the pages this read touched are not held; a remote file's reader refuses): not opened a second
            # time to be kept
            if not reader.refresh():
                return False
            with self._readers_lock:
                self._readers[key] = reader
                while len(self._readers) > OPEN_READERS:
                    self._readers.popitem(last=False)
            return True

        return read_replica(self.catalog, self.site, self._holders(container), container, read, self.reads,
                            keep=kept_after)

    def prefetch(self, items: Sequence[tuple[ContainerRecord, Sequence[str] | None]]) -> None:
        """Announce container reads in reading order (``columns=None``: whole files).

        Remote sites start fetching at once, many requests in flight; local
        sites ignore it.
        """
        plans: dict[str, list[tuple[str, int, Sequence[str] | None]]] = {}
        for container, columns in items:
            held = self._holders(container)
            if held:
                nearest = self.reads.order(held)[0]  # where read_container will read it
                plans.setdefault(nearest.name, []).append((container.path, container.size, columns))
        for name, plan in plans.items():
            self.site(name).prefetch(plan)


    def _gathering(self, containers: Sequence[ContainerRecord]) -> Site | None:
        """The site a dense read of ``containers`` (one container of many databases, in reading order) is
        gathered from (:meth:`gather`), or None: they are read one by one."""
        if len(containers) < 2:
            return None
        first = containers[0]

        def nearest(c: ContainerRecord) -> str | None:
            held = self._holders(c)
            return self.reads.order(held)[0].name if held else None  # where read_container will read it

        name = nearest(first)
        site = self.site(name) if name is not None else None
        # the first file decides for a local read: no look at every database's replicas
        if site is None or not getattr(site, "gathers", False):
            return None
        if any((c.format, c.schema_id) != (first.format, first.schema_id) or nearest(c) != name
               for c in containers[1:]):
            return None
        return site

    def gather(self, containers: Sequence[ContainerRecord], names: Sequence[str], schema: pa.Schema
               ) -> pa.Table | None:
        """Columns ``names`` of ``containers`` (one container of many databases, in reading order) in one
        table, each buffer received where the joined column holds it (the format's ``gather``); None when the
        format does not gather these files, or anything failed: the ordinary read then reads them, fails over
        and reports."""
        site = self._gathering(containers)
        if site is None:
            return None
        try:
            heads = site.read_heads([(c.path, c.size) for c in containers])  # type: ignore[attr-defined]
            layouts = ([self.read_container(c, lambda reader: reader.layout()) for c in containers]
                       if all(parts is not None for parts in heads.values()) else None)
            planned = None if layouts is None else gather(containers[0].format, layouts, names, schema)
            if planned is None:  # the ordinary read plans from the footers and metadata that came
                for path, parts in heads.items():
                    if parts is not None:
                        site.hold(path, parts)  # type: ignore[attr-defined]
                return None
            return planned.run(site.endpoint.streams, site.max_request)  # type: ignore[attr-defined]
        except GiodError as exc:
            log.info("gathering %d containers from site %s failed, read one by one: %s", len(containers),
                     site.name, exc)
            for c in containers:
                site.release(c.path)
            return None


class Snapshot:
    """One dataset of a store at one version; ``version=None`` follows it as it grows.

    Readers get a pinned snapshot (:meth:`pinned`): what they read never
    changes while writers commit. Writers get the growing one.
    """

    def __init__(self, store: Store, record: DatasetRecord, version: int | None):
        self.store = store
        self.record = record
        self.version = version

    @property
    def name(self) -> str:
        """The dataset's name."""
        return self.record.name

    @property
    def schema_id(self) -> int:
        """The id of the dataset's current schema in the catalog."""
        return self.record.schema_id

    @cached_property
    def schema(self) -> Schema:
        """The dataset's (current) schema."""
        return self.store.schema(self.schema_id)

    def __repr__(self) -> str:
        at = f" at version {self.version}" if self.version is not None else ""
        return f"<giod.store.Snapshot {self.name}{at}>"

    def __len__(self) -> int:
        return int(self.summary()["n_events"])

    def summary(self) -> dict[str, Any]:
        """The catalog's summary of the dataset at this version (``n_events``, ``n_databases``, ...)."""
        return dict(self.store.catalog.dataset_summary(self.name, self.version))

    def at(self, version: int) -> Snapshot:
        """This dataset as it was at version ``version``."""
        return Snapshot(self.store, self.store.dataset_record(self.name, version), version)

    def pinned(self) -> Snapshot:
        """This snapshot if it is pinned, else the dataset at the store's current version."""
        return self if self.version is not None else self.at(self.store.version)

    def databases(self, overlapping: Bounds | None = None) -> list[DatabaseRecord]:
        """The databases of this dataset; a pinned snapshot never changes, so it is cached.

        ``overlapping`` (``{tag field: (lo, hi)}``) keeps only the databases whose
        tag statistics may hold a value in every range, selected in SQL.
        """
        if self.version is None:
            if overlapping:
                return self.store.catalog.databases(self.name, None, overlapping=overlapping)
            return self.store.catalog.databases(self.name, None)
        return self.store.snapshot_databases(self.name, self.version, overlapping)

