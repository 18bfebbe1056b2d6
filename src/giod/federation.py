"""Federation and Dataset: the public entry points.

``giod.open(PATH)`` opens an embedded federation: a directory holding
``catalog.sqlite`` and the site ``local`` in ``data/``.
``giod.open("postgresql://...")`` opens a shared catalog whose sites are
registered in it. Only ``giod init`` and ``giod.open(..., create=True)`` create
one: a mistyped path is an error, not a new empty federation.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import awkward as ak

from giod.catalog import Catalog
from giod.catalog.engine import NoCatalog
from giod.catalog.protocol import CatalogAPI
from giod.catalog.records import Bounds, DatabaseRecord, DatasetRecord, SiteRecord
from giod.catalog.remote import RemoteCatalog
from giod.errors import CatalogError, ConfigError, DataError, NotFound, deprecated
from giod.names import check_name
from giod.read.event import read_event
from giod.read.objects import OID
from giod.read.output import with_behaviour
from giod.read.selection import Selection
from giod.schema import Schema
from giod.schema.parse import check_size
from giod.storage.site import Site
from giod.store.snapshot import Snapshot, Store
from giod.write.passwriter import PassWriter
from giod.write.writer import Writer

CATALOG_FILE = "catalog.sqlite"
LOCAL_SITE = "local"
LOCAL_SITE_DIR = "data"
#: the first part of a path that is a URL's scheme: ``giod.open(Path(url))`` drops one of its slashes
_URL_SCHEMES = ("postgresql:", "postgres:", "postgresql+psycopg:", "sqlite:", "http:", "https:")
MAX_QUERY_LIMIT = 1_000_000_000  # the largest ``limit`` of a query, here and on a server


class Federation:
    """Everything one catalog knows: schemas, datasets, databases, sites, replicas.

    The public front over the store (``giod.store``): ``fed.store`` holds the
    catalog, the sites and the choice of replica on every read.
    """

    def __init__(self, catalog: CatalogAPI, root: Path | None = None):
        self.store = Store(catalog, root)

    @property
    def catalog(self) -> CatalogAPI:
        """The catalog: the federation's metadata (``giod.catalog``)."""
        return self.store.catalog

    @property
    def root(self) -> Path | None:
        """The directory of an embedded federation, if any."""
        return self.store.root

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
        scheme = text.split("/", 1)[0].lower()
        if scheme in _URL_SCHEMES:  # "postgresql:/host/db": a URL that lost a slash (a Path made of it)
            raise ConfigError(f"{text!r} looks like a URL that lost a slash: write {scheme}//… (sqlite:/// and "
                              f"a path for a catalog file), or ./{text} for a folder of that name")
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
        """Close the catalog (its connections, or the session with a server)."""
        self.store.close()  # the last reads noted (giod.store.lastread)
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
        return self.store.version

    def datasets(self, version: int | None = None) -> list[str]:
        """The names of the datasets at ``version`` (the current one when None)."""
        return self.store.datasets(version)

    def dataset(self, name: str, version: int | None = None) -> Dataset:
        """Dataset ``name``, pinned at ``version`` if given; NotFound when there is none."""
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
        self.store.remember_schema(schema_id, schema)
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
        """The schema registered under ``schema_id``."""
        return self.store.schema(schema_id)

    # ---------------------------------------------------------------- sites

    def sites(self) -> list[SiteRecord]:
        """The registered sites, nearest first."""
        return self.store.sites()

    def add_site(self, name: str, url: str, distance: int = 0) -> SiteRecord:
        """Register a site; ConfigError when ``url`` does not have the form of a site URL."""
        return self.store.add_site(name, url, distance)

    def remove_site(self, name: str, *, force: bool = False) -> int:
        """Remove a site from the catalog (its files stay); see ``Catalog.remove_site``."""
        return self.store.remove_site(name, force=force)

    def site(self, name: str | None = None) -> Site:
        """The site ``name``, or the nearest one when no name is given."""
        return self.store.site(name)

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
    pinned to the snapshot at version ``v``. The public front over a
    :class:`giod.store.snapshot.Snapshot`, which readers and writers get.
    """

    def __init__(self, federation: Federation, record: DatasetRecord, version: int | None):
        self.federation = federation
        self.snapshot = Snapshot(federation.store, record, version)

    @property
    def record(self) -> DatasetRecord:
        """The dataset's row in the catalog."""
        return self.snapshot.record

    @property
    def version(self) -> int | None:
        """The version this dataset is pinned at; None when it follows the federation."""
        return self.snapshot.version

    @property
    def name(self) -> str:
        """The dataset's name."""
        return self.snapshot.name

    @property
    def schema_id(self) -> int:
        """The id of the dataset's current schema in the catalog."""
        return self.snapshot.schema_id

    @property
    def schema(self) -> Schema:
        """The dataset's (current) schema."""
        return self.snapshot.schema

    def __repr__(self) -> str:
        at = f" at version {self.version}" if self.version is not None else ""
        return f"<giod.Dataset {self.name}{at}>"

    def __len__(self) -> int:
        return len(self.snapshot)

    def summary(self) -> dict[str, Any]:
        """The catalog's summary at this version: ``n_events``, ``n_databases`` and the rest."""
        return self.snapshot.summary()

    def at(self, version: int) -> Dataset:
        """This dataset as it was at federation version ``version``."""
        return Dataset(self.federation, self.federation.catalog.dataset(self.name, version), version)

    def pinned(self) -> Dataset:
        """This dataset if it is pinned, else the dataset at the federation's current version."""
        return self if self.version is not None else self.at(self.federation.version)

    def databases(self, overlapping: Bounds | None = None) -> list[DatabaseRecord]:
        """The databases of this dataset; a pinned snapshot never changes, so it is cached.

        ``overlapping`` (``{tag field: (lo, hi)}``) keeps only the databases whose
        tag statistics may hold a value in every range, selected in SQL.
        """
        return self.snapshot.databases(overlapping)

    # -------------------------------------------------------------- writing

    def writer(self, **options: Any) -> Writer:
        """A :class:`giod.write.writer.Writer` appending events to this dataset as new databases.

        Keywords: the write settings of ``docs/storage.md`` (``database_events``,
        ``compression``, ...) and the writer's own (``site``, ``program``, ...);
        an unknown keyword is a ConfigError naming the valid ones. ``w.commit()``
        commits, ``w.abort()`` discards; as a context manager it commits on leaving
        the block, and aborts when the block raises.
        """
        return Writer(self.snapshot, **_keywords(Writer, options, "ds.writer"))

    def add_containers(self, **options: Any) -> PassWriter:
        """A :class:`giod.write.passwriter.PassWriter` adding containers to events already committed.

        A later pass (reconstruction, new tags) writes new containers for existing databases,
        entries aligned with theirs, without rewriting the others; new events go through
        :meth:`writer`. Keywords: the encoding settings a writer takes (``compression``,
        ``cluster_bytes``, ...) and the pass's own (``replace``, ``site``, ``program``, ...).
        """
        return PassWriter(self.snapshot, **_keywords(PassWriter, options, "ds.add_containers"))

    def extend(self, **options: Any) -> PassWriter:
        """Deprecated name of :meth:`add_containers` (it adds containers; it never appends events)."""
        deprecated("Dataset.extend()", "Dataset.add_containers()")
        return self.add_containers(**options)

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
            try:
                arr = ak.from_arrow(table)
            except (ValueError, TypeError, KeyError, IndexError) as exc:  # its metadata (awkward's JSON) is a server's
                raise CatalogError(f"query on {self.name}: the server's answer does not make an array: {exc}") from exc
            return with_behaviour(arr, self.schema)
        arr = self.select(expression).read(columns)
        return arr if limit is None else arr[:limit]

    def select(self, expression: str | None = None) -> Selection:
        """The events passing a tag expression (all events when ``None``)."""
        return Selection(self.snapshot.pinned(), expression)

    def read(self, columns: Sequence[str] | None = None, *, library: str = "ak") -> Any:
        """Every event with the given collections, fields and tags (all by default).

        ``library``: ``"ak"`` (an awkward Array, four-momenta with vector's behaviour),
        ``"pa"`` (a pyarrow Table) or ``"np"`` (a dict of numpy arrays), as in uproot.
        """
        return self.select().read(columns, library=library)

    def iterate(self, columns: Sequence[str] | None = None, step_size: int | str = 100_000, *,
                library: str = "ak") -> Iterator[Any]:
        """Every event in chunks of at most ``step_size`` (never across databases).

        ``step_size`` is a number of events or a memory size (``"100 MB"``) as in uproot;
        ``library`` as for :meth:`read`.
        """
        return self.select().iterate(columns, step_size=step_size, library=library)

    def event(self, entry: int, columns: Sequence[str] | None = None) -> ak.Record:
        """One event by its entry number, relations navigable (a ``DataError`` for an entry that is not a
        whole number or an empty list of columns; ``NotFound`` for an entry the dataset does not hold)."""
        if isinstance(entry, bool) or not hasattr(entry, "__index__"):
            raise DataError(f"an entry is a whole number, not {entry!r}")
        if columns is not None and (isinstance(columns, str) or not list(columns)):
            raise DataError(f"columns is a list of names (None for every one), not {columns!r}")
        return read_event(self.snapshot, int(entry), columns)


def _query_limit(limit: Any) -> int | None:
    """``limit`` checked: a negative one would slice from the end instead of bounding the answer."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not hasattr(limit, "__index__") or not 0 <= limit <= MAX_QUERY_LIMIT:
        raise DataError(f"limit must be a whole number from 0 to {MAX_QUERY_LIMIT:,}, not {limit!r}")
    return int(limit)


@functools.cache
def _keyword_names(cls: type) -> tuple[str, ...]:
    """The keyword-only parameters of ``cls``, read once per class (a writer per commit asked each time)."""
    return tuple(p.name for p in inspect.signature(cls).parameters.values() if p.kind is p.KEYWORD_ONLY)


def _keywords(cls: type, options: dict[str, Any], call: str) -> dict[str, Any]:
    """``options`` if ``cls`` takes every one of them as a keyword; else a ConfigError listing those it takes."""
    valid = _keyword_names(cls)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        close = difflib.get_close_matches(unknown[0], valid, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{call}() got an unknown keyword {unknown[0]!r} (valid: {', '.join(valid)}){hint}")
    return options
