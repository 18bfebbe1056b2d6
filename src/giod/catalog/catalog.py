"""The catalog: the federation's metadata in SQLite or PostgreSQL, behind one API.

Every mutating method is one transaction that bumps the federation version
once and logs it in ``versions``. Writers serialise on the single
``federation`` row (PostgreSQL: row lock; SQLite: ``BEGIN IMMEDIATE``), so
versions are handed out, and become visible, in commit order. Every read
takes ``version`` (None: the current state) and sees exactly the rows visible
at that version (see ``tables.visible``).

A ``Catalog`` owns one SQLAlchemy engine. It is safe to share between
threads; a child process started by fork drops the inherited connections on
first use and opens its own.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import random
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Self, TypeVar

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Engine,
    String,
    Table,
    bindparam,
    cast,
    create_engine,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.exc import IntegrityError as SAIntegrityError
from sqlalchemy.pool import QueuePool, StaticPool

from giod.catalog import migrations
from giod.catalog.records import (
    CommitResult,
    ContainerRecord,
    ContainerSpec,
    DatabaseCommit,
    DatabaseRecord,
    DatasetRecord,
    SchemaRecord,
    SiteRecord,
    VersionRecord,
)
from giod.catalog.tables import (
    REPLICA_STATES,
    commit_keys,
    containers,
    database_parents,
    databases,
    dataset_schemas,
    datasets,
    federation,
    replicas,
    schemas,
    sites,
    tag_stats,
    versions,
    visible,
)
from giod.errors import CatalogError, ConfigError, ConflictError, NotFound

__all__ = ["Catalog"]

T = TypeVar("T")

_WRITE = "giod_write"  # execution option marking the write engine (SQLite: BEGIN IMMEDIATE)
_DEFAULT_TIMEOUT = 60.0  # seconds a writer waits for the lock before giving up
_SYNCHRONOUS = ("FULL", "NORMAL")
_IN_CHUNK = 5_000  # ids per IN (...) list, well under SQLite's parameter limit
_MIGRATION_LOCK = 0x67696F64  # pg_advisory_xact_lock key ("giod")
_JITTER = random.SystemRandom()
_PG_RETRY = {"40001", "40P01", "55P03"}  # serialization failure, deadlock, lock not available


class _Unchanged(Exception):
    """Raised inside a write to roll it back (the version bump too) and return ``result``."""

    def __init__(self, result: Any):
        self.result = result


class Catalog:
    """The catalog of one federation. Open with ``Catalog.open(url)``."""

    url: str
    dialect: str

    def __init__(self, url: str, dialect: str, engine: Engine, timeout: float):
        self.url = url
        self.dialect = dialect
        self._engine = engine
        self._timeout = timeout
        self._pid = os.getpid()
        self._sites: dict[str, int] = {}  # name -> id, filled on use
        self._schemas: set[int] = set()  # ids known to exist
        self._writer: Engine
        self._reader: Engine
        if dialect == "sqlite":
            self._writer = engine.execution_options(**{_WRITE: True})
            self._reader = engine
        else:
            self._writer = engine
            # One snapshot for the several statements of a read.
            self._reader = engine.execution_options(isolation_level="REPEATABLE READ")

    # -- opening -------------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, create: bool = True) -> Catalog:
        """Open (and create or migrate) the catalog at ``url``.

        ``url`` is ``sqlite:///path.db`` (or a plain file path) or
        ``postgresql://user@host:port/db``. Query options: ``timeout`` (seconds
        a writer waits for the lock, default 60) and, for SQLite,
        ``synchronous`` (``FULL``, the default, or ``NORMAL``).
        """
        sa_url, dialect, timeout, synchronous = _parse_url(url)
        if dialect == "sqlite":
            engine = _sqlite_engine(sa_url, timeout, synchronous, create)
            url = url if "://" in url else str(sa_url)
        else:
            engine = _postgresql_engine(sa_url, timeout)
        catalog = cls(url, dialect, engine, timeout)
        try:
            catalog._migrate(create)
        except BaseException:
            engine.dispose()
            raise
        return catalog

    def close(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Catalog({self._shown!r})"

    @property
    def _shown(self) -> str:
        """The URL without its password, for messages."""
        return make_url(self.url).render_as_string(hide_password=True)

    def _migrate(self, create: bool) -> None:
        level = self._run(migrations.read_level, write=False)
        migrations.check_level(level)
        if level == migrations.latest_level():
            return
        if level is None and not create:
            raise CatalogError(f"{self._shown} holds no giod catalog (and create=False)")

        def work(conn: Connection) -> None:
            if self.dialect == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
            migrations.migrate(conn)  # re-reads the level under the lock

        self._run(work, write=True)

    # -- transactions --------------------------------------------------------

    def _run(self, work: Callable[[Connection], T], *, write: bool) -> T:
        """Run ``work`` in one transaction, retrying while the catalog is locked."""
        if os.getpid() != self._pid:  # forked: never touch the parent's sockets
            self._engine.dispose(close=False)
            self._pid = os.getpid()
        engine = self._writer if write else self._reader
        deadline = time.monotonic() + self._timeout
        delay = 0.005
        while True:
            try:
                with engine.begin() as conn:
                    return work(conn)
            except SAIntegrityError as exc:
                raise ConflictError(f"catalog change refused: {_reason(exc)}") from exc
            except DBAPIError as exc:
                if not self._transient(exc):
                    raise CatalogError(f"catalog {self._shown}: {_reason(exc)}") from exc
                if time.monotonic() >= deadline:
                    raise CatalogError(
                        f"catalog {self._shown} stayed locked by other writers for more than "
                        f"{self._timeout:g} s; try again later"
                    ) from exc
            except SQLAlchemyError as exc:
                raise CatalogError(f"catalog {self._shown}: {exc}") from exc
            time.sleep(delay * _JITTER.uniform(0.5, 1.5))  # de-synchronises retrying writers
            delay = min(delay * 2, 0.5)

    def _transient(self, exc: DBAPIError) -> bool:
        orig = exc.orig
        if isinstance(orig, sqlite3.OperationalError):
            message = str(orig).lower()
            return "locked" in message or "busy" in message
        return getattr(orig, "sqlstate", None) in _PG_RETRY

    def _write(self, work: Callable[[Connection, int], T]) -> T:
        """Run a change: ``work(conn, version)`` after bumping the version.

        The bump comes first because it takes the federation row lock that
        serialises writers (on SQLite BEGIN IMMEDIATE already holds the lock):
        every check made afterwards sees every earlier commit. ``work`` raises
        ``_Unchanged(result)`` to roll back and return ``result``.
        """
        try:
            return self._run(lambda conn: work(conn, _bump(conn)), write=True)
        except _Unchanged as unchanged:
            return unchanged.result  # type: ignore[no-any-return]

    def _read(self, work: Callable[[Connection], T]) -> T:
        return self._run(work, write=False)

    # -- versions ------------------------------------------------------------

    def version(self) -> int:
        """The current federation version (0 for a fresh catalog)."""
        return self._read(lambda conn: int(conn.execute(select(federation.c.version)).scalar_one()))

    def versions(self, limit: int = 100) -> list[VersionRecord]:
        """The latest ``limit`` versions, newest first."""
        q = select(versions).order_by(versions.c.version.desc()).limit(limit)
        rows = self._read(lambda conn: conn.execute(q).all())
        return [VersionRecord(int(r.version), float(r.created), r.description) for r in rows]

    # -- schemas -------------------------------------------------------------

    def add_schema(self, name: str, text: str, fingerprint: str) -> int:
        """Register a schema; returns its id. A known fingerprint returns the existing id."""

        def work(conn: Connection, v: int) -> int:
            q = select(schemas.c.id).where(schemas.c.fingerprint == fingerprint)
            existing = conn.execute(q).scalar_one_or_none()
            if existing is not None:
                raise _Unchanged(int(existing))
            row = {"name": name, "text": text, "fingerprint": fingerprint}
            new = conn.execute(insert(schemas).values(row).returning(schemas.c.id)).scalar_one()
            _log(conn, v, f"add schema {name} ({new})")
            return int(new)

        return self._write(work)

    def schema(self, schema_id: int) -> SchemaRecord:
        """The schema with this id; NotFound if there is none."""
        q = select(schemas).where(schemas.c.id == schema_id)
        row = self._read(lambda conn: conn.execute(q).first())
        if row is None:
            raise NotFound(f"no schema with id {schema_id}")
        return SchemaRecord(int(row.id), row.name, row.fingerprint, row.text)

    # -- datasets ------------------------------------------------------------

    def create_dataset(self, name: str, schema_id: int) -> DatasetRecord:
        """Create an empty dataset; ConflictError if a live one has this name."""
        if not name:
            raise ConfigError("a dataset needs a name")

        def work(conn: Connection, v: int) -> DatasetRecord:
            if _dataset_row(conn, name, None) is not None:
                raise ConflictError(f"dataset {name!r} already exists")
            _require_schemas(conn, {schema_id})
            now = time.time()
            row = {
                "name": name,
                "schema_id": schema_id,
                "created_version": v,
                "next_entry": 0,
                "created": now,
            }
            new = int(
                conn.execute(insert(datasets).values(row).returning(datasets.c.id)).scalar_one()
            )
            conn.execute(
                insert(dataset_schemas).values(dataset_id=new, version=v, schema_id=schema_id)
            )
            _log(conn, v, f"create dataset {name}")
            return DatasetRecord(new, name, schema_id, v, now)

        return self._write(work)

    def dataset(self, name: str, version: int | None = None) -> DatasetRecord:
        """The dataset ``name`` as it was at ``version``; NotFound names close matches."""

        def work(conn: Connection) -> DatasetRecord:
            row = _dataset_row(conn, name, version)
            if row is None:
                raise _missing_dataset(conn, name, version)
            return _dataset_record(row)

        return self._read(work)

    def datasets(self, version: int | None = None) -> list[DatasetRecord]:
        """Every dataset visible at ``version``, by name."""
        q = _dataset_select(version).order_by(datasets.c.name)
        return [_dataset_record(r) for r in self._read(lambda conn: conn.execute(q).all())]

    def set_dataset_schema(self, name: str, schema_id: int) -> int:
        """Make ``schema_id`` the dataset's schema from a new version on; returns it.

        Older versions keep the schema they had. Setting the current schema
        again changes nothing and returns the current version.
        """

        def work(conn: Connection, v: int) -> int:
            row = _dataset_row(conn, name, None)
            if row is None:
                raise _missing_dataset(conn, name, None)
            if row.schema_id == schema_id:
                raise _Unchanged(v - 1)
            _require_schemas(conn, {schema_id})
            conn.execute(
                update(datasets).where(datasets.c.id == row.id).values(schema_id=schema_id)
            )
            conn.execute(
                insert(dataset_schemas).values(dataset_id=row.id, version=v, schema_id=schema_id)
            )
            _log(conn, v, f"set schema of dataset {name} to {schema_id}")
            return v

        return self._write(work)

    def delete_dataset(self, name: str) -> int:
        """Delete the dataset and its databases from a new version on; returns it."""

        def work(conn: Connection, v: int) -> int:
            row = _dataset_row(conn, name, None)
            if row is None:
                raise _missing_dataset(conn, name, None)
            dbs = select(databases.c.id).where(
                databases.c.dataset_id == row.id, visible(databases, None)
            )
            _delete_rows(
                conn, v, containers.c.database_id.in_(dbs), tag_stats.c.database_id.in_(dbs)
            )
            conn.execute(update(databases).where(databases.c.id.in_(dbs)).values(deleted_version=v))
            conn.execute(update(datasets).where(datasets.c.id == row.id).values(deleted_version=v))
            _log(conn, v, f"delete dataset {name}")
            return v

        return self._write(work)

    def dataset_summary(self, name: str, version: int | None = None) -> dict[str, int]:
        """``{"n_events", "n_databases", "bytes"}`` of the dataset at ``version``."""
        d, c, ds = databases, containers, datasets
        size = (
            select(func.coalesce(func.sum(c.c.size), 0))
            .select_from(c.join(d, d.c.id == c.c.database_id))
            .where(d.c.dataset_id == ds.c.id, visible(d, version), visible(c, version))
            .scalar_subquery()
        )
        q = (
            select(func.count(d.c.id), func.coalesce(func.sum(d.c.n_events), 0), size)
            .select_from(ds.outerjoin(d, (d.c.dataset_id == ds.c.id) & visible(d, version)))
            .where(ds.c.name == name, visible(ds, version))
            .group_by(ds.c.id)
        )

        def work(conn: Connection) -> dict[str, int]:
            row = conn.execute(q).first()
            if row is None:
                raise _missing_dataset(conn, name, version)
            return {"n_events": int(row[1]), "n_databases": int(row[0]), "bytes": int(row[2])}

        return self._read(work)

    # -- sites ---------------------------------------------------------------

    def add_site(self, name: str, url: str, distance: int = 0) -> SiteRecord:
        """Register a site; ConflictError if the name is taken."""
        if not name:
            raise ConfigError("a site needs a name")

        def work(conn: Connection, v: int) -> SiteRecord:
            if conn.execute(select(sites.c.id).where(sites.c.name == name)).first() is not None:
                raise ConflictError(f"site {name!r} already exists")
            row = {"name": name, "url": url, "distance": distance, "created": time.time()}
            new = int(conn.execute(insert(sites).values(row).returning(sites.c.id)).scalar_one())
            _log(conn, v, f"add site {name}")
            return SiteRecord(new, name, url, distance)

        return self._write(work)

    def site(self, name: str) -> SiteRecord:
        """The site ``name``; NotFound names close matches."""

        def work(conn: Connection) -> SiteRecord:
            row = conn.execute(select(sites).where(sites.c.name == name)).first()
            if row is None:
                raise _missing(conn, "site", name, select(sites.c.name))
            return _site_record(row)

        return self._read(work)

    def sites(self) -> list[SiteRecord]:
        """Every site, nearest first."""
        q = select(sites).order_by(sites.c.distance, sites.c.name)
        return [_site_record(r) for r in self._read(lambda conn: conn.execute(q).all())]

    # -- the commit ----------------------------------------------------------

    def commit_database(self, commit: DatabaseCommit) -> CommitResult:
        """Register one database with its containers, replicas and tag statistics.

        One transaction: entries ``[first_entry, first_entry + n_events)`` are
        taken from the dataset, and the new version makes it all visible at
        once. With an ``idempotency_key`` that already landed in this dataset,
        nothing changes and the earlier result comes back with ``duplicate=True``.
        """
        if commit.n_events < 0:
            raise CatalogError(f"commit refused: n_events is {commit.n_events}")
        _check_specs(commit.containers, commit.n_events, f"commit to {commit.dataset!r}")

        def work(conn: Connection, v: int) -> CommitResult:
            ds = _dataset_row(conn, commit.dataset, None)
            if ds is None:
                raise _missing_dataset(conn, commit.dataset, None)
            if commit.idempotency_key is not None:
                d = databases
                q = select(d.c.id, d.c.first_entry, d.c.created_version).where(
                    d.c.dataset_id == ds.id, d.c.idempotency_key == commit.idempotency_key
                )
                found = conn.execute(q).first()
                if found is not None:
                    raise _Unchanged(
                        CommitResult(
                            int(found.id),
                            int(found.first_entry),
                            int(found.created_version),
                            duplicate=True,
                        )
                    )
            site_id = _site_id(conn, commit.site, self._sites)
            _require_schemas(conn, {c.schema_id for c in commit.containers}, self._schemas)
            _require_databases(conn, set(commit.parents), live=False)
            n = commit.n_events
            stop = conn.execute(_TAKE_ENTRIES, {"dataset_id": ds.id, "n": n}).scalar_one()
            first = int(stop) - n
            row = {
                "dataset_id": ds.id,
                "first_entry": first,
                "n_events": n,
                "bytes": sum(c.size for c in commit.containers),
                "created": time.time(),
                "created_version": v,
                "writer": commit.writer,
                "program": commit.program,
                "program_version": commit.program_version,
                "parameters": _dump_json(commit.parameters, "parameters"),
                "idempotency_key": commit.idempotency_key,
            }
            db_id = int(conn.execute(_INSERT_DATABASE, row).scalar_one())
            if commit.parents:
                conn.execute(
                    insert(database_parents),
                    [
                        {"database_id": db_id, "parent_id": p, "position": i}
                        for i, p in enumerate(dict.fromkeys(commit.parents))
                    ],
                )
            _insert_containers(conn, v, [(db_id, c) for c in commit.containers], site_id)
            _replace_tag_stats(conn, v, {db_id: commit.tag_stats}, fresh=True)
            _log(conn, v, f"commit {commit.dataset} db {db_id}")
            return CommitResult(db_id, first, v)

        return self._write(work)

    def add_containers(
        self,
        database_id: int,
        containers: Sequence[ContainerSpec],
        site: str,
        *,
        tag_stats: Mapping[str, tuple[float, float]] | None = None,
        replace: bool = False,
        idempotency_key: str | None = None,
    ) -> int:
        """Add containers (a later pass: "reco", "tag") to a database; returns the new version.

        ConflictError when a live container has the same name, unless
        ``replace``: then the old one is deleted at the new version (its file
        stays for snapshot readers until gc). ``tag_stats`` replace the
        statistics of the fields they name. A repeated ``idempotency_key``
        changes nothing and returns the version it landed at.
        """
        items = [(database_id, containers, tag_stats)]
        return self._add(items, site, replace=replace, idempotency_key=idempotency_key)

    def add_containers_bulk(
        self,
        items: Sequence[
            tuple[int, Sequence[ContainerSpec], Mapping[str, tuple[float, float]] | None]
        ],
        site: str,
        *,
        replace: bool = False,
    ) -> int:
        """``add_containers`` for many databases in one transaction and one version."""
        return self._add(items, site, replace=replace, idempotency_key=None)

    def _add(
        self,
        items: Sequence[
            tuple[int, Sequence[ContainerSpec], Mapping[str, tuple[float, float]] | None]
        ],
        site: str,
        *,
        replace: bool,
        idempotency_key: str | None,
    ) -> int:
        ids = [int(item[0]) for item in items]
        if len(set(ids)) != len(ids):
            twice = next(i for i, k in Counter(ids).items() if k > 1)
            raise ConflictError(
                f"database {twice} appears more than once in one add_containers call"
            )

        def work(conn: Connection, v: int) -> int:
            if idempotency_key is not None:
                q = select(commit_keys.c.version).where(commit_keys.c.key == idempotency_key)
                landed = conn.execute(q).scalar_one_or_none()
                if landed is not None:
                    raise _Unchanged(int(landed))
            if not items:
                raise _Unchanged(v - 1)
            site_id = _site_id(conn, site, self._sites)
            n_events = _require_databases(conn, set(ids), live=True)
            for db_id, specs, _ in items:
                _check_specs(specs, n_events[db_id], f"database {db_id}")
            _require_schemas(
                conn, {c.schema_id for _, specs, _ in items for c in specs}, self._schemas
            )
            wanted = {(db_id, c.name) for db_id, specs, _ in items for c in specs}
            clash = [
                (int(r.id), int(r.database_id), r.name)
                for chunk in _chunks(ids)
                for r in conn.execute(
                    select(containers.c.id, containers.c.database_id, containers.c.name).where(
                        containers.c.database_id.in_(chunk), visible(containers, None)
                    )
                )
                if (r.database_id, r.name) in wanted
            ]
            if clash and not replace:
                _, db_id, name = clash[0]
                raise ConflictError(
                    f"database {db_id} already has a container {name!r}; "
                    "pass replace=True to supersede it"
                )
            for chunk in _chunks([cid for cid, _, _ in clash]):
                conn.execute(
                    update(containers).where(containers.c.id.in_(chunk)).values(deleted_version=v)
                )
            _insert_containers(
                conn, v, [(db_id, c) for db_id, specs, _ in items for c in specs], site_id
            )
            _replace_tag_stats(conn, v, {db_id: stats for db_id, _, stats in items if stats})
            if idempotency_key is not None:
                conn.execute(
                    insert(commit_keys).values(key=idempotency_key, version=v, created=time.time())
                )
            verb = "replace" if clash else "add"
            if len(items) == 1:
                names = ", ".join(c.name for c in items[0][1]) or "tag stats"
                _log(conn, v, f"{verb} {names} in db {ids[0]}")
            else:
                _log(conn, v, f"{verb} containers in {len(items)} databases")
            return v

        return self._write(work)

    # -- databases -----------------------------------------------------------

    def databases(self, dataset: str, version: int | None = None) -> list[DatabaseRecord]:
        """The dataset's databases visible at ``version``, by first entry (three queries)."""
        ds_id = (
            select(datasets.c.id)
            .where(datasets.c.name == dataset, visible(datasets, version))
            .scalar_subquery()
        )

        def work(conn: Connection) -> list[DatabaseRecord]:
            found = _load_databases(conn, databases.c.dataset_id == ds_id, version)
            if not found and _dataset_row(conn, dataset, version) is None:
                raise _missing_dataset(conn, dataset, version)
            return found

        return self._read(work)

    def database(self, database_id: int, version: int | None = None) -> DatabaseRecord:
        """One database as it was at ``version``; NotFound if not visible there."""
        found = self._read(
            lambda conn: _load_databases(conn, databases.c.id == database_id, version)
        )
        if not found:
            at = "" if version is None else f" at version {version}"
            raise NotFound(f"no database {database_id}{at}")
        return found[0]

    def delete_database(self, database_id: int) -> int:
        """Delete a database from a new version on; returns it."""

        def work(conn: Connection, v: int) -> int:
            _require_databases(conn, {database_id}, live=True)
            _delete_rows(
                conn,
                v,
                containers.c.database_id == database_id,
                tag_stats.c.database_id == database_id,
            )
            conn.execute(
                update(databases).where(databases.c.id == database_id).values(deleted_version=v)
            )
            _log(conn, v, f"delete db {database_id}")
            return v

        return self._write(work)

    # -- storage bookkeeping -------------------------------------------------

    def container_paths(self, site: str | None = None) -> set[str]:
        """Every container path any row references (deleted ones too, until purged).

        With ``site``: only paths with a replica row (in any state) at that site.
        """

        def work(conn: Connection) -> set[str]:
            q = select(containers.c.path).distinct()
            if site is not None:
                site_id = _site_id(conn, site)
                q = q.join(replicas, replicas.c.container_id == containers.c.id).where(
                    replicas.c.site_id == site_id
                )
            return set(conn.execute(q).scalars())

        return self._read(work)

    def set_replica_state(self, container_id: int, site: str, state: str) -> None:
        """Record the state of a container's copy at ``site`` (adding the replica if new)."""
        if state not in REPLICA_STATES:
            raise ConfigError(f"replica state {state!r} is not one of {', '.join(REPLICA_STATES)}")

        def work(conn: Connection, v: int) -> None:
            site_id = _site_id(conn, site)
            if (
                conn.execute(select(containers.c.id).where(containers.c.id == container_id)).first()
                is None
            ):
                raise NotFound(f"no container {container_id}")
            now = time.time()
            key = (replicas.c.container_id == container_id) & (replicas.c.site_id == site_id)
            done = conn.execute(update(replicas).where(key).values(state=state, checked=now))
            if done.rowcount == 0:
                conn.execute(
                    insert(replicas).values(
                        container_id=container_id, site_id=site_id, state=state, checked=now
                    )
                )
            _log(conn, v, f"replica of container {container_id} at {site}: {state}")

        self._write(work)

    def replicas(self, container_id: int) -> list[tuple[SiteRecord, str]]:
        """The sites holding a copy of the container and its state there, nearest first."""
        q = (
            select(sites, replicas.c.state)
            .join(replicas, replicas.c.site_id == sites.c.id)
            .where(replicas.c.container_id == container_id)
            .order_by(sites.c.distance, sites.c.name)
        )

        def work(conn: Connection) -> list[tuple[SiteRecord, str]]:
            rows = conn.execute(q).all()
            if (
                not rows
                and conn.execute(
                    select(containers.c.id).where(containers.c.id == container_id)
                ).first()
                is None
            ):
                raise NotFound(f"no container {container_id}")
            return [(_site_record(r), r.state) for r in rows]

        return self._read(work)

    def purge_deleted(self, before_version: int) -> list[str]:
        """Remove the rows deleted at a version below ``before_version``.

        Snapshots at ``before_version`` and later are untouched. Returns the
        paths no row references any more (gc deletes those files). Bumps the
        version only when something was removed.
        """
        c, d, ds = containers, databases, datasets

        def gone(table: Table) -> ColumnElement[bool]:
            deleted: ColumnElement[int] = table.c.deleted_version
            return deleted < before_version

        def work(conn: Connection, v: int) -> list[str]:
            paths = set(conn.execute(select(c.c.path).where(gone(c))).scalars())
            counts = [
                conn.execute(select(func.count()).select_from(t).where(gone(t))).scalar_one()
                for t in (c, tag_stats, d, ds)
            ]
            if not any(counts):
                raise _Unchanged([])
            conn.execute(
                replicas.delete().where(replicas.c.container_id.in_(select(c.c.id).where(gone(c))))
            )
            conn.execute(c.delete().where(gone(c)))
            conn.execute(tag_stats.delete().where(gone(tag_stats)))
            conn.execute(
                database_parents.delete().where(
                    database_parents.c.database_id.in_(select(d.c.id).where(gone(d)))
                )
            )
            conn.execute(d.delete().where(gone(d)))
            conn.execute(
                dataset_schemas.delete().where(
                    dataset_schemas.c.dataset_id.in_(select(ds.c.id).where(gone(ds)))
                )
            )
            conn.execute(ds.delete().where(gone(ds)))
            still: set[str] = set()
            for chunk in _chunks(sorted(paths)):
                still.update(conn.execute(select(c.c.path).where(c.c.path.in_(chunk))).scalars())
            _log(conn, v, f"purge rows deleted before version {before_version}")
            return sorted(paths - still)

        return self._write(work)


# -- engines ---------------------------------------------------------------------


def _parse_url(url: str) -> tuple[URL, str, float, str]:
    """(SQLAlchemy URL, dialect, lock timeout, SQLite synchronous mode)."""
    try:
        sa_url = (
            make_url(url)
            if "://" in url
            else URL.create("sqlite", database=str(Path(url).absolute()))
        )
    except ArgumentError as exc:
        raise CatalogError(f"not a catalog URL: {url!r}") from exc
    query = dict(sa_url.query)
    try:
        timeout = float(str(query.pop("timeout", _DEFAULT_TIMEOUT)))
    except ValueError as exc:
        raise ConfigError(
            f"catalog URL option timeout must be a number of seconds: {url!r}"
        ) from exc
    synchronous = str(query.pop("synchronous", "FULL")).upper()
    if synchronous not in _SYNCHRONOUS:
        raise ConfigError(
            f"catalog URL option synchronous must be FULL or NORMAL, not {synchronous!r}"
        )
    backend = sa_url.get_backend_name()
    if backend in ("postgresql", "postgres"):
        sa_url = sa_url.set(drivername="postgresql+psycopg", query=query)
        return sa_url, "postgresql", timeout, synchronous
    if backend == "sqlite":
        return sa_url.set(drivername="sqlite", query=query), "sqlite", timeout, synchronous
    raise CatalogError(
        f"unsupported catalog URL {url!r}: use sqlite:///path.db or postgresql://..."
    )


def _sqlite_engine(sa_url: URL, timeout: float, synchronous: str, create: bool) -> Engine:
    memory = sa_url.database in (None, "", ":memory:")
    if not memory:
        path = Path(str(sa_url.database))
        if not path.exists():
            if not create:
                raise CatalogError(f"no catalog at {path} (and create=False)")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CatalogError(
                    f"cannot create the catalog directory {path.parent}: {exc}"
                ) from exc
    engine = create_engine(
        sa_url,
        poolclass=StaticPool if memory else QueuePool,
        connect_args={"timeout": timeout, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # The documented pysqlite recipe: sqlite3 emits no BEGIN; _begin does.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            if not memory and cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute(f"PRAGMA synchronous = {synchronous}")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        # IMMEDIATE takes the write lock up front: a deferred transaction that
        # upgrades from read to write could fail with SQLITE_BUSY at any statement.
        immediate = conn.get_execution_options().get(_WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _postgresql_engine(sa_url: URL, timeout: float) -> Engine:
    # lock_timeout bounds the wait for the federation row, as busy_timeout does on SQLite
    options = f"{sa_url.query.get('options', '')} -c lock_timeout={max(1, int(timeout * 1000))}"
    connect_args: dict[str, Any] = {"options": options.strip()}
    if "connect_timeout" not in sa_url.query:
        connect_args["connect_timeout"] = 10
    return create_engine(sa_url, pool_size=5, max_overflow=10, connect_args=connect_args)


def _reason(exc: DBAPIError) -> str:
    lines = str(exc.orig).strip().splitlines()
    return lines[0] if lines else type(exc.orig).__name__


# -- statements shared by several methods -----------------------------------------


# Statements on the commit path are built once: a commit runs about ten of them.
_BUMP = update(federation).values(version=federation.c.version + 1).returning(federation.c.version)
_LOG = insert(versions)
_SITE_ID = select(sites.c.id).where(sites.c.name == bindparam("name"))
_SCHEMA_IDS = select(schemas.c.id).where(schemas.c.id.in_(bindparam("ids", expanding=True)))
_TAKE_ENTRIES = (
    update(datasets)
    .where(datasets.c.id == bindparam("dataset_id"))
    .values(next_entry=datasets.c.next_entry + bindparam("n", type_=BigInteger))
    .returning(datasets.c.next_entry)
)
_INSERT_DATABASE = insert(databases).returning(databases.c.id)
_INSERT_CONTAINERS = insert(containers).returning(containers.c.id, sort_by_parameter_order=True)
_INSERT_REPLICAS = insert(replicas)
_INSERT_TAG_STATS = insert(tag_stats)
_RETIRE_TAG_STATS = (
    update(tag_stats)
    .where(
        tag_stats.c.database_id == bindparam("db"),
        tag_stats.c.field == bindparam("f"),
        visible(tag_stats, None),
    )
    .values(deleted_version=bindparam("v"))
)


def _bump(conn: Connection) -> int:
    return int(conn.execute(_BUMP).scalar_one())


def _log(conn: Connection, version: int, description: str) -> None:
    conn.execute(_LOG, {"version": version, "created": time.time(), "description": description})


def _chunks(values: Iterable[T]) -> Iterator[list[T]]:
    """Lists of at most _IN_CHUNK values, for IN (...) conditions."""
    listed = list(values)
    for i in range(0, len(listed), _IN_CHUNK):
        yield listed[i : i + _IN_CHUNK]


def _dataset_select(version: int | None) -> Any:
    if version is None:
        schema_id: Any = datasets.c.schema_id
    else:
        ds = dataset_schemas
        schema_id = (
            select(ds.c.schema_id)
            .where(ds.c.dataset_id == datasets.c.id, ds.c.version <= version)
            .order_by(ds.c.version.desc())
            .limit(1)
            .scalar_subquery()
        )
    return select(
        datasets.c.id,
        datasets.c.name,
        schema_id.label("schema_id"),
        datasets.c.created_version,
        datasets.c.created,
    ).where(visible(datasets, version))


_LIVE_DATASET = _dataset_select(None).where(datasets.c.name == bindparam("name"))


def _dataset_row(conn: Connection, name: str, version: int | None) -> Any:
    if version is None:
        return conn.execute(_LIVE_DATASET, {"name": name}).first()
    return conn.execute(_dataset_select(version).where(datasets.c.name == name)).first()


def _dataset_record(row: Any) -> DatasetRecord:
    return DatasetRecord(
        int(row.id), row.name, int(row.schema_id), int(row.created_version), float(row.created)
    )


def _site_record(row: Any) -> SiteRecord:
    return SiteRecord(int(row.id), row.name, row.url, int(row.distance))


def _missing(conn: Connection, kind: str, name: str, names: Any) -> NotFound:
    candidates = list(conn.execute(names).scalars())
    close = difflib.get_close_matches(name, candidates, n=3)
    # "qcd" for "qcd_multijet" (and back) is too short a match for difflib alone
    close += [c for c in candidates if c not in close and (c in name or name in c)][
        : 3 - len(close)
    ]
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return NotFound(f"no {kind} named {name!r}{hint}")


def _missing_dataset(conn: Connection, name: str, version: int | None) -> NotFound:
    names = select(datasets.c.name).where(visible(datasets, version))
    error = _missing(conn, "dataset", name, names)
    if version is not None:
        return NotFound(f"{error} at version {version}")
    return error


def _site_id(conn: Connection, name: str, known: dict[str, int] | None = None) -> int:
    """The site's id; ``known`` caches ids (sites are never renamed or deleted)."""
    if known is not None and name in known:
        return known[name]
    found = conn.execute(_SITE_ID, {"name": name}).scalar_one_or_none()
    if found is None:
        raise _missing(conn, "site", name, select(sites.c.name))
    if known is not None:
        known[name] = int(found)
    return int(found)


def _require_schemas(conn: Connection, ids: set[int], known: set[int] | None = None) -> None:
    """NotFound unless every schema exists; ``known`` caches ids (schemas are never deleted)."""
    if known is not None:
        ids = ids - known
    if not ids:
        return
    found = set(conn.execute(_SCHEMA_IDS, {"ids": sorted(ids)}).scalars())
    if ids - found:
        raise NotFound(f"no schema with id {min(ids - found)}")
    if known is not None:
        known.update(found)


def _require_databases(conn: Connection, ids: set[int], *, live: bool) -> dict[int, int]:
    """{id: n_events} of the databases; NotFound for any that does not exist (or is deleted)."""
    d = databases
    found: dict[int, int] = {}
    for chunk in _chunks(sorted(ids)):
        q = select(d.c.id, d.c.n_events).where(d.c.id.in_(chunk))
        if live:
            q = q.where(visible(d, None))
        found.update((int(r.id), int(r.n_events)) for r in conn.execute(q))
    if ids - found.keys():
        raise NotFound(f"no database {min(ids - found.keys())}")
    return found


def _check_specs(specs: Sequence[ContainerSpec], n_events: int, where: str) -> None:
    names = [c.name for c in specs]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ConflictError(f"{where}: two containers named {twice!r}")
    for c in specs:
        if not c.name or not c.path:
            raise CatalogError(f"{where}: a container needs a name and a path")
        if c.size < 0:
            raise CatalogError(f"{where}: container {c.name!r} has size {c.size}")
        if c.cluster_entries and sum(c.cluster_entries) != n_events:
            raise CatalogError(
                f"{where}: container {c.name!r} holds {sum(c.cluster_entries)} entries "
                f"in its clusters but the database has {n_events} events"
            )


def _dump_json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise CatalogError(f"commit refused: {what} are not JSON-serialisable: {exc}") from exc


def _insert_containers(
    conn: Connection, version: int, items: list[tuple[int, ContainerSpec]], site_id: int
) -> None:
    if not items:
        return
    rows = [
        {
            "database_id": db_id,
            "name": c.name,
            "path": c.path,
            "checksum": c.checksum,
            "size": c.size,
            "cluster_entries": json.dumps([int(n) for n in c.cluster_entries]),
            "schema_id": c.schema_id,
            "created_version": version,
        }
        for db_id, c in items
    ]
    ids = conn.execute(_INSERT_CONTAINERS, rows).scalars().all()
    now = time.time()
    conn.execute(
        _INSERT_REPLICAS,
        [{"container_id": cid, "site_id": site_id, "state": "good", "checked": now} for cid in ids],
    )


def _bound(value: float) -> float | None:
    """A finite float, or None: NaN and infinities mean "unknown, may match"."""
    value = float(value)
    return value if math.isfinite(value) else None


def _replace_tag_stats(
    conn: Connection,
    version: int,
    stats: Mapping[int, Mapping[str, tuple[float, float]]],
    *,
    fresh: bool = False,
) -> None:
    """Insert statistics at ``version``, retiring the live ones they replace (none if ``fresh``)."""
    rows = [
        {
            "database_id": db_id,
            "field": f,
            "created_version": version,
            "min": _bound(lo),
            "max": _bound(hi),
        }
        for db_id, fields in stats.items()
        for f, (lo, hi) in fields.items()
    ]
    if not rows:
        return
    if not fresh:
        conn.execute(
            _RETIRE_TAG_STATS,
            [{"db": r["database_id"], "f": r["field"], "v": version} for r in rows],
        )
    conn.execute(_INSERT_TAG_STATS, rows)


def _delete_rows(conn: Connection, version: int, container_cond: Any, stats_cond: Any) -> None:
    conn.execute(
        update(containers)
        .where(container_cond, visible(containers, None))
        .values(deleted_version=version)
    )
    conn.execute(
        update(tag_stats)
        .where(stats_cond, visible(tag_stats, None))
        .values(deleted_version=version)
    )


def _load_databases(
    conn: Connection, where: ColumnElement[bool], version: int | None
) -> list[DatabaseRecord]:
    """The databases matching ``where`` at ``version``, with containers and tag stats.

    Three queries whatever the number of databases. Rows are read as plain
    tuples and JSON texts shared by many rows are parsed once: building the
    records is the cost of listing a large dataset.
    """
    d, p, c, r, t = databases, database_parents, containers, replicas, tag_stats
    cond = where & visible(d, version)
    rows = conn.execute(
        select(
            d.c.id,
            d.c.dataset_id,
            d.c.first_entry,
            d.c.n_events,
            d.c.created,
            d.c.created_version,
            d.c.writer,
            d.c.program,
            d.c.program_version,
            d.c.parameters,
            d.c.idempotency_key,
            p.c.parent_id,
        )
        .select_from(d.outerjoin(p, p.c.database_id == d.c.id))
        .where(cond)
        .order_by(d.c.first_entry, d.c.id, p.c.position)
    ).all()
    if not rows:
        return []
    heads: dict[int, Any] = {}
    parents: dict[int, list[int]] = {}
    for row in rows:
        if row[0] not in heads:
            heads[row[0]] = row
            parents[row[0]] = []
        if row[11] is not None:
            parents[row[0]].append(row[11])

    held: dict[int, list[ContainerRecord]] = {db_id: [] for db_id in heads}
    entries: dict[str, tuple[int, ...]] = {}
    holders: dict[str | None, tuple[int, ...]] = {None: ()}
    good = (r.c.container_id == c.c.id) & (r.c.state == "good")
    for cid, db_id, name, path, checksum, size, text, schema_id, created, site_ids in conn.execute(
        select(
            c.c.id,
            c.c.database_id,
            c.c.name,
            c.c.path,
            c.c.checksum,
            c.c.size,
            c.c.cluster_entries,
            c.c.schema_id,
            c.c.created_version,
            func.aggregate_strings(cast(r.c.site_id, String), ","),
        )
        .select_from(c.join(d, d.c.id == c.c.database_id).outerjoin(r, good))
        .where(cond, visible(c, version))
        .group_by(c.c.id)  # the other columns depend on the primary key
        .order_by(c.c.id)
    ).all():
        if text not in entries:
            entries[text] = tuple(json.loads(text))
        if site_ids not in holders:
            holders[site_ids] = tuple(sorted(int(x) for x in site_ids.split(",")))
        held[db_id].append(
            ContainerRecord(
                cid,
                db_id,
                name,
                path,
                checksum,
                size,
                entries[text],
                schema_id,
                created,
                holders[site_ids],
            )
        )

    stats: dict[int, dict[str, tuple[float, float]]] = {db_id: {} for db_id in heads}
    inf = math.inf
    for db_id, field, lo, hi in conn.execute(
        select(t.c.database_id, t.c.field, t.c.min, t.c.max)
        .select_from(t.join(d, d.c.id == t.c.database_id))
        .where(cond, visible(t, version))
    ).all():
        stats[db_id][field] = (-inf if lo is None else lo, inf if hi is None else hi)

    parameters: dict[str, dict[str, Any]] = {}
    out = []
    for db_id, row in heads.items():
        if row[9] not in parameters:
            parameters[row[9]] = json.loads(row[9])
        out.append(
            DatabaseRecord(
                id=db_id,
                dataset_id=row[1],
                first_entry=row[2],
                n_events=row[3],
                bytes=sum(x.size for x in held[db_id]),
                created=row[4],
                created_version=row[5],
                writer=row[6],
                program=row[7],
                program_version=row[8],
                # a copy each: records share no mutable state
                parameters=dict(parameters[row[9]]),
                parents=tuple(parents[db_id]),
                idempotency_key=row[10],
                containers=tuple(held[db_id]),
                tag_stats=stats[db_id],
            )
        )
    return out
