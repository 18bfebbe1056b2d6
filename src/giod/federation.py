"""Federation and Dataset: the public entry points.

``giod.open(PATH)`` opens an embedded federation: a directory holding
``catalog.sqlite`` and the site ``local`` in ``data/``.
``giod.open("postgresql://...")`` opens a shared catalog whose sites are
registered in it. Only ``giod init`` and ``giod.open(..., create=True)`` create
one: a mistyped path is an error, not a new empty federation.
"""

from __future__ import annotations

import difflib
import inspect
import os
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import awkward as ak

from giod.catalog import Catalog
from giod.catalog.engine import NoCatalog
from giod.catalog.protocol import CatalogAPI
from giod.catalog.records import Bounds, ContainerRecord, DatabaseRecord, DatasetRecord, SiteRecord
from giod.catalog.remote import RemoteCatalog
from giod.errors import ConfigError, DataError, NotFound
from giod.names import check_name
from giod.objects import OID
from giod.passwriter import PassWriter
from giod.reading import read_entry
from giod.replication.reads import ReadBalancer, read_replica
from giod.schema import TAG_CONTAINER, Schema
from giod.schema.parse import check_size
from giod.selection import Selection
from giod.storage.container import ContainerReader
from giod.storage.site import Site, check_site_url, open_site
from giod.storage.validation import check_schema
from giod.writer import Writer

CATALOG_FILE = "catalog.sqlite"
LOCAL_SITE = "local"
LOCAL_SITE_DIR = "data"
SNAPSHOT_CACHE = 16  # dataset snapshots whose database lists are kept
MAX_QUERY_LIMIT = 1_000_000_000  # the largest ``limit`` of a query, here and on a server

T = TypeVar("T")


class Federation:
    """Everything one catalog knows: schemas, datasets, databases, sites, replicas."""

    def __init__(self, catalog: CatalogAPI, root: Path | None = None):
        self.catalog = catalog
        self.root = root  # the directory of an embedded federation, if any
        self._sites: dict[str, Site] = {}
        self._schemas: dict[int, Schema] = {}
        self._snapshots: dict[tuple[Any, ...], list[DatabaseRecord]] = {}
        self._site_ids: dict[int, SiteRecord] | None = None
        self.reads = ReadBalancer()  # reads in flight per site, sites found down

    # -------------------------------------------------------------- opening

    @classmethod
    def open(cls, target: str | os.PathLike[str], *, create: bool = False, token: str | None = None,
             verify: bool | str = True) -> Federation:
        """The federation at ``target`` (see ``giod.open``); NotFound if there is none and not ``create``."""
        text = os.fspath(target)
        if text.startswith(("postgresql://", "postgres://", "postgresql+psycopg://", "sqlite:///")):
            try:
                return cls(Catalog.open(text, create=create))
            except NoCatalog as exc:
                raise NotFound(f"no giod federation at {exc.shown} (giod init {exc.shown} creates one)") from exc
        if text.startswith(("http://", "https://")):
            return cls(RemoteCatalog.open(text, token=token, verify=verify))
        root = Path(text).expanduser().resolve()
        db = root / CATALOG_FILE
        if not db.exists():
            if not create:
                raise NotFound(f"no giod federation at {text} (giod init {text} creates one)")
            if root.exists() and not root.is_dir():
                raise ConfigError(f"{text} exists and is not a directory")
            root.mkdir(parents=True, exist_ok=True)
        fed = cls(Catalog.open(f"sqlite:///{db}", create=create), root)
        if not fed.catalog.sites():
            try:
                fed.catalog.add_site(LOCAL_SITE, LOCAL_SITE_DIR, 0)
            except Exception:
                if not fed.catalog.sites():
                    raise
        return fed

    def close(self) -> None:
        self.catalog.close()

    def __enter__(self) -> Federation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = str(self.root) if self.root else self.catalog.url
        return f"<giod.Federation {where} version={self.version}>"

    # -------------------------------------------------------------- catalog

    @property
    def version(self) -> int:
        """The federation's current version (commit counter)."""
        return self.catalog.version()

    def datasets(self, version: int | None = None) -> list[str]:
        return [d.name for d in self.catalog.datasets(version)]

    def dataset(self, name: str, version: int | None = None) -> Dataset:
        return Dataset(self, self.catalog.dataset(name, version), version)

    def __getitem__(self, name: str) -> Dataset:
        return self.dataset(name)

    def create_dataset(self, name: str, schema: Schema, *, exist_ok: bool = False,
                       container_format: str | None = None) -> Dataset:
        """Create a dataset of events that follow ``schema``.

        ``container_format`` (``arrow`` or ``parquet``) fixes the format of every container any
        writer adds to the dataset; None leaves it to each writer's settings. ConfigError for a
        name outside the name grammar (``giod.names``) or an unknown format.
        """
        if exist_ok and name in self.datasets():
            ds = self.dataset(name)
            if ds.schema.fingerprint != schema.fingerprint:
                raise ConfigError(f"dataset {name} exists with another schema")
            return ds
        check_name(name, "dataset")  # before the schema is registered for it
        schema_id = self._register(schema)
        self._schemas[schema_id] = schema
        if container_format is None:  # a catalog (or server) of an older level knows no formats
            return Dataset(self, self.catalog.create_dataset(name, schema_id), None)
        return Dataset(self, self.catalog.create_dataset(name, schema_id, container_format), None)

    def evolve_dataset(self, name: str, schema: Schema) -> list[str]:
        """Move a dataset to a new schema version; old databases stay readable."""
        current = self.dataset(name).schema
        changes = schema.check_evolution(current)
        self.catalog.set_dataset_schema(name, self._register(schema))
        return changes

    def _register(self, schema: Schema) -> int:
        text = schema.to_yaml()
        # what is stored is read back with Schema.from_text, under its bound on the text
        check_size(len(text.encode("utf-8")), f"model {schema.name}")
        return self.catalog.add_schema(schema.name, text, schema.fingerprint)

    def schema(self, schema_id: int) -> Schema:
        if schema_id not in self._schemas:
            rec = self.catalog.schema(schema_id)
            self._schemas[schema_id] = Schema.from_text(rec.text, source=f"catalog schema {schema_id}")
        return self._schemas[schema_id]

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

    def _holders(self, container: ContainerRecord) -> list[SiteRecord]:
        # sites are listed once per federation object, not once per file; a site
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
        schema = self.schema(container.schema_id)
        if container.name not in schema.containers and container.name != TAG_CONTAINER:
            return read_replica(self.catalog, self.site, self._holders(container), container, read, self.reads)
        expected = schema.arrow_schema(container.name)

        def checked(reader: ContainerReader) -> T:
            check_schema(reader.arrow_schema, expected, f"container {container.path}")
            return read(reader)

        return read_replica(self.catalog, self.site, self._holders(container), container, checked, self.reads)

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

    # -------------------------------------------------------------- objects

    def dataset_of(self, database: DatabaseRecord) -> str:
        """The name of the (live) dataset a database belongs to."""
        for d in self.catalog.datasets():
            if d.id == database.dataset_id:
                return d.name
        raise NotFound(f"database {database.id}: its dataset no longer exists")

    def object(self, oid: str | OID) -> ak.Record:
        """The object with id ``oid`` (e.g. ``db42/tracks/1234#7``), relations navigable."""
        o = OID.parse(oid) if isinstance(oid, str) else oid
        db = self.catalog.database(o.database)
        ds_name = self.dataset_of(db)
        if not db.first_entry <= o.entry < db.stop_entry:
            raise NotFound(f"object {o}: database {db.id} holds entries {db.first_entry}..{db.stop_entry - 1}")
        event = self.dataset(ds_name).event(o.entry)
        if o.collection not in event.fields:
            raise NotFound(f"object {o}: no collection {o.collection!r} in that event")
        coll = event[o.collection]
        if not 0 <= o.index < len(coll):
            raise NotFound(f"object {o}: the event has {len(coll)} {o.collection}")
        return coll[o.index]


class Dataset:
    """A named, growing collection of events sharing one schema.

    ``version=None`` follows the federation as it grows; ``ds.at(v)`` is
    pinned to the snapshot at version ``v``.
    """

    def __init__(self, federation: Federation, record: DatasetRecord, version: int | None):
        self.federation = federation
        self.record = record
        self.version = version

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def schema_id(self) -> int:
        return self.record.schema_id

    @cached_property
    def schema(self) -> Schema:
        return self.federation.schema(self.schema_id)

    def __repr__(self) -> str:
        at = f" at version {self.version}" if self.version is not None else ""
        return f"<giod.Dataset {self.name}{at}>"

    def __len__(self) -> int:
        return int(self.federation.catalog.dataset_summary(self.name, self.version)["n_events"])

    def summary(self) -> dict[str, Any]:
        return dict(self.federation.catalog.dataset_summary(self.name, self.version))

    def at(self, version: int) -> Dataset:
        """This dataset as it was at federation version ``version``."""
        return Dataset(self.federation, self.federation.catalog.dataset(self.name, version), version)

    def pinned(self) -> Dataset:
        return self if self.version is not None else self.at(self.federation.version)

    def databases(self, overlapping: Bounds | None = None) -> list[DatabaseRecord]:
        """The databases of this dataset; a pinned snapshot never changes, so it is cached.

        ``overlapping`` (``{tag field: (lo, hi)}``) keeps only the databases whose
        tag statistics may hold a value in every range, selected in SQL.
        """
        if self.version is None:
            if overlapping:
                return self.federation.catalog.databases(self.name, None, overlapping=overlapping)
            return self.federation.catalog.databases(self.name, None)
        return self.federation.snapshot_databases(self.name, self.version, overlapping)

    # -------------------------------------------------------------- writing

    def writer(self, **options: Any) -> Writer:
        """A :class:`giod.writer.Writer` appending to this dataset.

        Keywords: the write settings of ``docs/storage.md`` (``database_events``,
        ``compression``, ...) and the writer's own (``site``, ``program``, ...);
        an unknown keyword is a ConfigError naming the valid ones.
        """
        return Writer(self, **_keywords(Writer, options, "ds.writer"))

    def extend(self, **options: Any) -> PassWriter:
        """A :class:`giod.writer.PassWriter` adding containers to existing databases."""
        return PassWriter(self, **_keywords(PassWriter, options, "ds.extend"))

    # -------------------------------------------------------------- reading

    def query(self, expression: str | None = None, columns: Sequence[str] | None = None,
              limit: int | None = None) -> ak.Array:
        """Selected events with the given columns, computed where the data are.

        On a remote federation the server selects and projects (only the
        answer crosses the link, and a shared cache answers repeated
        queries); locally it is ``select(expression).read(columns)[:limit]``.
        ``limit`` is None (every event) or a whole number from 0 to
        ``MAX_QUERY_LIMIT``; anything else is a ``DataError``.
        """
        limit = _query_limit(limit)
        table = self.federation.catalog.query(self.name, expression, columns, limit, self.version)
        if table is not None:  # a server's catalog selected where the data are
            return ak.from_arrow(table)
        arr = self.select(expression).read(columns)
        return arr if limit is None else arr[:limit]

    def select(self, expression: str | None = None) -> Selection:
        """The events passing a tag expression (all events when ``None``)."""
        return Selection(self.pinned(), expression)

    def read(self, columns: Sequence[str] | None = None) -> ak.Array:
        return self.select().read(columns)

    def iterate(self, columns: Sequence[str] | None = None, step_size: int = 100_000) -> Iterator[ak.Array]:
        return self.select().iterate(columns, step_size=step_size)

    def event(self, entry: int, columns: Sequence[str] | None = None) -> ak.Record:
        """One event by its entry number, relations navigable."""
        return read_entry(self.pinned(), entry, columns)


def _query_limit(limit: Any) -> int | None:
    """``limit`` checked: a negative one would slice from the end instead of bounding the answer."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not hasattr(limit, "__index__") or not 0 <= limit <= MAX_QUERY_LIMIT:
        raise DataError(f"limit must be a whole number from 0 to {MAX_QUERY_LIMIT:,}, not {limit!r}")
    return int(limit)


def _keywords(cls: type, options: dict[str, Any], call: str) -> dict[str, Any]:
    """``options`` if ``cls`` takes every one of them as a keyword; else a ConfigError listing those it takes."""
    valid = [p.name for p in inspect.signature(cls).parameters.values() if p.kind is p.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        close = difflib.get_close_matches(unknown[0], valid, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{call}() got an unknown keyword {unknown[0]!r} (valid: {', '.join(valid)}){hint}")
    return options
