"""The catalog: the federation's metadata in SQLite or PostgreSQL, behind one API.

Every mutating method is one transaction that bumps the federation version
once and logs it in ``versions``. Writers serialise on the single
``federation`` row (PostgreSQL: row lock; SQLite: ``BEGIN IMMEDIATE``), so
versions are handed out, and become visible, in commit order. Every read
takes ``version`` (None: the current state) and sees exactly the rows visible
at that version (see ``tables.visible``).

The module holds the read methods and the small writes; the commit path
(``commit_database``, ``add_containers``) lives in ``giod.catalog.commits``,
the bearer tokens in ``giod.catalog.tokens``, replication rules and bulk
replica queries in ``giod.catalog.rules``, container paths, replica states and
purging in ``giod.catalog.bookkeeping``, writers' leases in ``giod.catalog.leases``, transactions and engines in
``giod.catalog.engine``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from sqlalchemy import BigInteger, ColumnElement, Connection, Dialect, bindparam, func, insert, select, update

from giod.catalog import entries, migrations, planning, rebuild
from giod.catalog.bookkeeping import BookkeepingMethods
from giod.catalog.commits import CommitMethods
from giod.catalog.engine import NoCatalog, Unchanged, acquire_engine, parse_url
from giod.catalog.exchanges import ExchangeMethods
from giod.catalog.leases import LeaseMethods
from giod.catalog.listed import Parsed
from giod.catalog.prepared import Prepared, add_totals, execute
from giod.catalog.protocol import MAX_KEYS
from giod.catalog.queries import (
    IN_CHUNK,
    chunks,
    dataset_record,
    dataset_row,
    dataset_select,
    delete_rows,
    load_databases,
    load_kept,
    log,
    missing,
    missing_dataset,
    require_databases,
    require_schemas,
    uncollected,
)
from giod.catalog.records import (
    Bounds,
    DatabaseRecord,
    DatabaseRow,
    DatasetRecord,
    SchemaRecord,
    SiteRecord,
    VersionRecord,
    built,
)
from giod.catalog.rows import BadRow, bad_rows, parse_rows, site_record
from giod.catalog.rules import RuleMethods
from giod.catalog.tables import (
    containers,
    database_summaries,
    databases,
    dataset_schemas,
    dataset_totals,
    datasets,
    federation,
    schemas,
    sites,
    tag_coverage,
    tag_stats,
    versions,
    visible,
)
from giod.catalog.tiers import TierMethods
from giod.catalog.tokens import TokenMethods
from giod.errors import ConfigError, ConflictError, NotFound
from giod.names import check_name
from giod.storage.container import check_dataset_format

__all__ = ["Catalog"]


class _SiteRow(NamedTuple):
    """A ``sites`` row read on a SQLite file's own connection (``Catalog.sites``), as ``site_record`` reads it."""

    id: Any
    name: Any
    url: Any
    distance: Any
    created: Any

_MIGRATION_LOCK = 0x67696F64  # pg_advisory_xact_lock key ("giod")


_SUMMARIES: dict[tuple[str, bool], Prepared] = {}


def _summary_statement(dialect: Dialect, *, pinned: bool) -> Prepared:
    """``dataset_summary``'s statement, compiled once per process: each federation opened
    anew has an engine of its own, whose compile cache starts empty (milliseconds a call)."""
    key = (dialect.name, pinned)
    if key not in _SUMMARIES:
        ds, t = datasets, dataset_totals
        before = t.alias("before")
        last = select(func.max(before.c.version)).where(before.c.dataset_id == ds.c.id)
        seen: ColumnElement[bool] = ds.c.deleted_version.is_(None)
        if pinned:
            at = bindparam("version", type_=BigInteger)
            last = last.where(before.c.version <= at)
            seen = (ds.c.created_version <= at) & (seen | (ds.c.deleted_version > at))
        _SUMMARIES[key] = Prepared(
            select(t.c.n_databases, t.c.n_events, t.c.bytes)
            .select_from(ds.outerjoin(t, (t.c.dataset_id == ds.c.id) & (t.c.version == last.scalar_subquery())))
            .where(ds.c.name == bindparam("name"), seen),
            dialect,
        )
    return _SUMMARIES[key]


class Catalog(CommitMethods, TokenMethods, RuleMethods, BookkeepingMethods, LeaseMethods, ExchangeMethods,
              TierMethods):
    """The catalog of one federation. Open with ``Catalog.open(url)``.

    Safe to share between threads; a child process started by fork drops the
    inherited connections on first use and opens its own.
    """

    # -- opening -------------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, create: bool = True) -> Catalog:
        """Open (and create or migrate) the catalog at ``url``.

        ``url`` is ``sqlite:///path.db`` (or a plain file path) or
        ``postgresql://user@host:port/db``. Query options: ``timeout`` (seconds
        a writer waits for the lock, default 60) and, for SQLite,
        ``synchronous`` (``FULL``, the default, or ``NORMAL``).
        """
        target = parse_url(url)
        engine = acquire_engine(target, create=create)
        if target.dialect == "sqlite" and "://" not in url:
            url = str(target.url)
        catalog = cls(url, target.dialect, engine, target.timeout)
        try:
            catalog._migrate(create)
        except BaseException:
            catalog.close()
            raise
        return catalog

    def _migrate(self, create: bool) -> None:
        level = self._run(migrations.read_level, write=False)
        migrations.check_level(level)
        if level == migrations.latest_level():
            return
        if level is None and not create:
            raise NoCatalog(f"{self._shown} holds no giod catalog (and create=False)", self._shown)

        def work(conn: Connection) -> None:
            if self.dialect == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
            migrations.migrate(conn)  # re-reads the level under the lock

        self._run(work, write=True)

    # -- versions ------------------------------------------------------------

    def version(self) -> int:
        """The current federation version (0 for a fresh catalog).

        On a SQLite file read again only when another connection committed (``VersionWatch``).
        """
        if self._watch is not None:
            found = self._watch.version()
            if found is not None:
                return found
        # one statement: on PostgreSQL outside a transaction, one round trip instead of three
        return self._read_statement(lambda conn: int(conn.execute(select(federation.c.version)).scalar_one()))

    def versions(self, limit: int = 100) -> list[VersionRecord]:
        """The latest ``limit`` versions, newest first.

        The newest alone (every writer's footer asks it) is kept on a SQLite file while no connection
        commits (``_kept``)."""
        q = select(versions).order_by(versions.c.version.desc()).limit(limit)

        def read() -> tuple[VersionRecord, ...]:
            rows = self._read_statement(lambda conn: conn.execute(q).all())
            return tuple(VersionRecord(int(r.version), float(r.created), r.description) for r in rows)

        if limit != 1:
            return list(read())
        newest = "SELECT version, created, description FROM versions ORDER BY version DESC LIMIT 1"
        return list(self._kept("versions:1", read, newest,
                               lambda rows: tuple(VersionRecord(int(v), float(c), d) for v, c, d in rows)))

    # -- schemas -------------------------------------------------------------

    def add_schema(self, name: str, text: str, fingerprint: str) -> int:
        """Register a schema; returns its id. A known fingerprint returns the existing id."""

        def work(conn: Connection, v: int) -> int:
            q = select(schemas.c.id).where(schemas.c.fingerprint == fingerprint)
            existing = conn.execute(q).scalar_one_or_none()
            if existing is not None:
                raise Unchanged(int(existing))
            row = {"name": name, "text": text, "fingerprint": fingerprint}
            new = conn.execute(insert(schemas).values(row).returning(schemas.c.id)).scalar_one()
            log(conn, v, f"add schema {name} ({new})")
            return int(new)

        return self._write(work)

    def schema(self, schema_id: int) -> SchemaRecord:
        """The schema with this id; NotFound if there is none."""
        q = select(schemas).where(schemas.c.id == schema_id)
        row = self._read_statement(lambda conn: conn.execute(q).first())
        if row is None:
            raise NotFound(f"no schema with id {schema_id}")
        return SchemaRecord(int(row.id), row.name, row.fingerprint, row.text)

    # -- datasets ------------------------------------------------------------

    def create_dataset(self, name: str, schema_id: int, container_format: str | None = None) -> DatasetRecord:
        """Create an empty dataset; ConflictError if a live one has this name.

        ``container_format`` fixes the format of every container of the dataset (None: each
        writer's setting). ConfigError for a name outside the name grammar (``giod.names``) or an
        unknown format; ConflictError too for a name that differs from another dataset's only in case.
        """
        check_name(name, "dataset")
        check_dataset_format(container_format)

        def work(conn: Connection, v: int) -> DatasetRecord:
            if dataset_row(conn, name, None) is not None:
                raise ConflictError(f"dataset {name!r} already exists")
            # on a case-insensitive file system (macOS, Windows) the two would share one directory
            twin = select(datasets.c.name).where(
                func.lower(datasets.c.name) == name.lower(), datasets.c.name != name
            )
            other = conn.execute(twin.limit(1)).scalar()
            if other is not None:
                raise ConflictError(f"dataset {name!r} differs from dataset {other!r} only in case")
            require_schemas(conn, {schema_id})
            now = time.time()
            row = {
                "name": name,
                "schema_id": schema_id,
                "created_version": v,
                "next_entry": 0,
                "created": now,
                "container_format": container_format,
            }
            new = int(
                conn.execute(insert(datasets).values(row).returning(datasets.c.id)).scalar_one()
            )
            conn.execute(
                insert(dataset_schemas).values(dataset_id=new, version=v, schema_id=schema_id)
            )
            conn.execute(insert(dataset_totals).values(
                dataset_id=new, version=v, n_databases=0, n_events=0, bytes=0))
            log(conn, v, f"create dataset {name}")
            return DatasetRecord(new, name, schema_id, v, now, container_format)

        return self._write(work)

    def dataset(self, name: str, version: int | None = None) -> DatasetRecord:
        """The dataset ``name`` as it was at ``version``; NotFound names close matches."""

        def work(conn: Connection) -> DatasetRecord:
            row = dataset_row(conn, name, version)
            if row is None:  # the names offered instead may come from a later snapshot: a message
                raise missing_dataset(conn, name, version)
            return dataset_record(row)

        return self._read_statement(work)  # every selection and event asks: one round trip

    def datasets(self, version: int | None = None) -> list[DatasetRecord]:
        """Every dataset visible at ``version``, by name."""
        q = dataset_select(version).order_by(datasets.c.name)
        return self._read_statement(lambda conn: [dataset_record(r) for r in conn.execute(q).all()])

    def set_dataset_schema(self, name: str, schema_id: int) -> int:
        """Make ``schema_id`` the dataset's schema from a new version on; returns it.

        Older versions keep the schema they had. Setting the current schema
        again changes nothing and returns the current version.
        """

        def work(conn: Connection, v: int) -> int:
            row = dataset_row(conn, name, None)
            if row is None:
                raise missing_dataset(conn, name, None)
            if row.schema_id == schema_id:
                raise Unchanged(v - 1)
            require_schemas(conn, {schema_id})
            conn.execute(
                update(datasets).where(datasets.c.id == row.id).values(schema_id=schema_id)
            )
            conn.execute(
                insert(dataset_schemas).values(dataset_id=row.id, version=v, schema_id=schema_id)
            )
            log(conn, v, f"set schema of dataset {name} to {schema_id}")
            return v

        return self._write(work)

    def delete_dataset(self, name: str) -> int:
        """Delete the dataset and its databases from a new version on; returns it."""

        def work(conn: Connection, v: int) -> int:
            row = dataset_row(conn, name, None)
            if row is None:
                raise missing_dataset(conn, name, None)
            dbs = select(databases.c.id).where(
                databases.c.dataset_id == row.id, visible(databases, None)
            )
            delete_rows(
                conn, v, containers.c.database_id.in_(dbs), tag_stats.c.database_id.in_(dbs)
            )
            conn.execute(update(databases).where(databases.c.id.in_(dbs)).values(deleted_version=v))
            m = database_summaries
            conn.execute(update(m).where(m.c.dataset_id == row.id, visible(m, None)).values(deleted_version=v))
            conn.execute(update(datasets).where(datasets.c.id == row.id).values(deleted_version=v))
            log(conn, v, f"delete dataset {name}")
            return v

        return self._write(work)

    def dataset_summary(self, name: str, version: int | None = None) -> dict[str, int]:
        """``{"n_events", "n_databases", "bytes"}`` of the dataset at ``version``.

        One index lookup: the totals the latest change at or before ``version`` kept
        (``dataset_totals``), found with the dataset in one statement, which on
        PostgreSQL runs alone (no BEGIN, no COMMIT: one round trip; a statement
        sees one snapshot). A version older than those totals (a catalog migrated
        from before level 9) is counted database by database, and a missing
        dataset named with close matches, in a read transaction of their own.
        """
        d, c, ds = databases, containers, datasets
        found = _summary_statement(self._engine.dialect, pinned=version is not None)
        values = found.params({"name": name, "version": version})
        row = self._read_statement(lambda conn: conn.exec_driver_sql(found.sql, values).first())
        if row is not None and row[0] is not None:
            return {"n_events": int(row[1]), "n_databases": int(row[0]), "bytes": int(row[2])}
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
            if dataset_row(conn, name, version) is None:
                raise missing_dataset(conn, name, version)
            row = conn.execute(q).one()
            return {"n_events": int(row[1]), "n_databases": int(row[0]), "bytes": int(row[2])}

        return self._read(work)

    # -- sites ---------------------------------------------------------------

    def add_site(self, name: str, url: str, distance: int = 0) -> SiteRecord:
        """Register a site; ConflictError if the name is taken, ConfigError if it is not a valid name."""
        check_name(name, "site")

        def work(conn: Connection, v: int) -> SiteRecord:
            if conn.execute(select(sites.c.id).where(sites.c.name == name)).first() is not None:
                raise ConflictError(f"site {name!r} already exists")
            row = {"name": name, "url": url, "distance": distance, "created": time.time()}
            new = int(conn.execute(insert(sites).values(row).returning(sites.c.id)).scalar_one())
            log(conn, v, f"add site {name}")
            return SiteRecord(new, name, url, distance)

        return self._write(work)

    def site(self, name: str) -> SiteRecord:
        """The site ``name``; NotFound names close matches."""

        def work(conn: Connection) -> SiteRecord:
            row = conn.execute(select(sites).where(sites.c.name == name)).first()
            if row is None:
                raise missing(conn, "site", name, select(sites.c.name))
            return site_record(row)  # RowError when the row does not parse

        return self._read_statement(work)

    def sites(self) -> list[SiteRecord]:
        """Every site, nearest first; a row that does not parse is left out, with a warning."""
        q = select(sites).order_by(sites.c.distance, sites.c.name)

        def read() -> tuple[SiteRecord, ...]:
            rows = self._read_statement(lambda conn: conn.execute(q).all())
            return tuple(parse_rows(self.url, rows, site_record))

        # a writer with no site named asks: kept on a SQLite file while no connection commits (``_kept``)
        every = "SELECT id, name, url, distance, created FROM sites ORDER BY distance, name"
        return list(self._kept("sites", read, every, lambda rows: tuple(
            parse_rows(self.url, (_SiteRow(*r) for r in rows), site_record))))

    def tag_coverage(self, dataset: str, version: int | None = None) -> dict[str, tuple[int, float | None]]:
        """What the writes keep per tag field of ``dataset`` at ``version`` for planning (level 11):
        ``{field: (databases with a statistics row, widest max - min or None)}`` (``giod fsck`` compares it
        with the rows; none for a version from before the level)."""
        t = tag_coverage
        ds_id = select(datasets.c.id).where(datasets.c.name == dataset, visible(datasets, version)).scalar_subquery()
        newest = select(t.c.field, func.max(t.c.version)).where(t.c.dataset_id == ds_id).group_by(t.c.field)
        if version is not None:
            newest = newest.where(t.c.version <= version)
        row = select(t.c.n_databases, t.c.width).where(
            t.c.dataset_id == ds_id, t.c.field == bindparam("field"), t.c.version == bindparam("at"))

        def work(conn: Connection) -> dict[str, tuple[int, float | None]]:
            found = {}
            for field, at in conn.execute(newest).all():  # one pass along the key; then a lookup a field
                n, width = conn.execute(row, {"field": field, "at": at}).one()
                found[field] = (int(n), None if width is None else float(width))
            return found

        return self._read(work)

    def rebuild_kept(self, dataset: str, summaries: Sequence[int] = ()) -> int:
        """Write the values kept beside the rows of ``dataset`` anew from its rows, at a new version; returns
        it: the totals, every tag field's coverage, the summaries of the databases ``summaries``, and the end
        of any summary of a database the dataset does not hold (``giod fsck --repair``; ``rebuild``)."""

        def work(conn: Connection, v: int) -> int:
            row = dataset_row(conn, dataset, None)
            if row is None:
                raise missing_dataset(conn, dataset, None)
            with self._rows_converted():  # rows that do not parse are fsck's to report, not a traceback
                done = rebuild.rebuild_kept(conn, row.id, v, summaries)
            log(conn, v, f"rebuild kept values of dataset {dataset}: {done['summaries']} summaries, "
                         f"{done['ended']} ended, {done['fields']} fields")
            return v

        return self._write(work)

    def bad_rows(self) -> list[BadRow]:
        """The rows of the sites and tokens tables that do not parse (``giod fsck`` reports them)."""
        return self._read(bad_rows)

    # -- databases -----------------------------------------------------------

    def databases(
        self,
        dataset: str,
        version: int | None = None,
        *,
        overlapping: Bounds | None = None,
        changed_since: int | None = None,
        keys: Sequence[str] | None = None,
    ) -> list[DatabaseRecord]:
        """The dataset's databases visible at ``version``, by first entry (three queries).

        ``overlapping`` (``{tag field: (lo, hi)}``, closed ranges) keeps only
        the databases whose tag statistics may hold a value in every range
        (``records.overlaps``); ``changed_since`` only those committed, or
        given a container, after that version; ``keys`` only those committed
        with one of these idempotency keys. The filters run in SQL, so records
        are built for the databases kept only (a follower's pass costs what
        is new, not the dataset's size).
        """
        ds_id = (
            select(datasets.c.id)
            .where(datasets.c.name == dataset, visible(datasets, version))
            .scalar_subquery()
        )
        where = databases.c.dataset_id == ds_id
        if changed_since is not None:
            extended = select(containers.c.database_id).where(containers.c.created_version > changed_since)
            where = where & ((databases.c.created_version > changed_since) | databases.c.id.in_(extended))
        wanted = None if keys is None else set(keys)
        if wanted is not None and len(wanted) <= MAX_KEYS:
            where = where & databases.c.idempotency_key.in_(sorted(wanted))

        def work(conn: Connection) -> list[DatabaseRecord]:
            if overlapping and changed_since is None and keys is None:  # a selection's plan
                found = self._load_ids(conn, planning.kept_ids_by_name(conn, dataset, version, overlapping), version)
            elif overlapping:
                found = self._load_overlapping(conn, ds_id, where, version, overlapping)
            else:
                found = load_databases(conn, where, version)
            if not found and dataset_row(conn, dataset, version) is None:
                raise missing_dataset(conn, dataset, version)
            if wanted is not None and len(wanted) > MAX_KEYS:  # past the parameters one statement takes
                found = [db for db in found if db.idempotency_key in wanted]
            return found

        return self._read_pinned(work, version)

    @staticmethod
    def _load_overlapping(
        conn: Connection, dataset_id: Any, where: Any, version: int | None, overlapping: Bounds
    ) -> list[DatabaseRecord]:
        # the pruning runs once, over the ids: in each of the listing's three queries
        # it would check every database's statistics three times
        return Catalog._load_ids(conn, planning.kept_ids(conn, dataset_id, where, version, overlapping), version)

    @staticmethod
    def _load_ids(conn: Connection, ids: list[int], version: int | None) -> list[DatabaseRecord]:
        found = [
            db for chunk in chunks(ids) for db in load_databases(conn, databases.c.id.in_(chunk), version)
        ]
        return sorted(found, key=lambda db: (db.first_entry, db.id)) if len(ids) > IN_CHUNK else found

    def iter_databases(self, dataset: str, version: int | None = None, *, chunk: int = 5_000
                       ) -> Iterator[DatabaseRecord]:
        """The dataset's databases at ``version`` by first entry, streamed ``chunk`` at a time.

        The records ``databases`` gives, in one read transaction (one snapshot),
        without holding them all: each chunk is the entry range of the ``chunk``
        next databases, read as one row a database from the summaries and their
        kept records (level 17, ``giod.catalog.kept``) along their entry index,
        its end the last row read, then the parents of its databases by their
        ids' range and the sites of the good copies by ranges of container ids
        (a chunk with a summary older than the records: the listing's three
        queries on the databases' rows); its records build their containers
        and statistics when first read (``giod.catalog.listed``). Close the
        iterator (or exhaust it) to end the transaction.
        """
        if chunk < 1:
            raise ConfigError(f"a listing's chunk must be at least 1 database, not {chunk}")
        d = databases
        parsed = Parsed()  # texts many chunks share, parsed once
        with self._reader.connect() as conn, conn.begin():
            row = dataset_row(conn, dataset, version)
            if row is None:
                raise missing_dataset(conn, dataset, version)
            after = -1
            if self.dialect == "postgresql":
                # each chunk walks the entry index in order: without statistics (a catalog filled faster than
                # autovacuum, or with it off) PostgreSQL read every later database by a bitmap scan and sorted
                # them to find a chunk's end, each chunk again; its rows too, sorted on disk when wide (for the
                # rest of this transaction only)
                conn.exec_driver_sql("SET LOCAL enable_bitmapscan = off")
            while True:
                # the chunk as an entry range (first entries are unique in a dataset: entries are never
                # handed out twice), read along the summaries' entry index from after, its end the last
                # first entry read (none: the dataset's end)
                with self._rows_converted(streamed=True):
                    with uncollected():
                        found, last = load_kept(conn, row.id, after, chunk, version, parsed)
                    if found is None:  # a summary without its record (level 17): the databases' rows of the range
                        span = d.c.first_entry > after if last is None else d.c.first_entry.between(after + 1, last)
                        found = load_databases(conn, (d.c.dataset_id == row.id) & span, version, parsed)
                # a record whose containers the caller has read is let go (what its first read built dies
                # young when the caller drops it, instead of being held to the chunk's end and moved to the
                # collector's older generations, whose full passes then walked the whole heap); one not read
                # is held to the chunk's end, so that it is freed while the next chunk is made, the collector
                # paused (let go one by one, every chunk set off a pass over the next chunk's new objects)
                for k, record in enumerate(found):
                    yield record
                    if built(record):
                        found[k] = None  # type: ignore[call-overload]
                if last is None:
                    return
                after = last

    def database_rows(self, dataset: str, version: int | None = None) -> Iterator[DatabaseRow]:
        """One line per database of the dataset at ``version``, by first entry, streamed.

        The listing a person reads (``giod show``): id, entries, events, bytes,
        version, program and container names (sorted), one row per database
        of the summaries the writes keep (level 13, ``database_summaries``),
        read in entry order along their index and fetched in batches on the
        driver's own cursor (a server-side cursor on PostgreSQL): a row costs
        one tuple from the driver, not a SQLAlchemy row as well. Close the
        iterator (or exhaust it) to end the read transaction.
        """
        m = database_summaries
        with self._reader.connect() as conn, conn.begin():
            row = dataset_row(conn, dataset, version)
            if row is None:
                raise missing_dataset(conn, dataset, version)
            query = (
                select(m.c.database_id, m.c.first_entry, m.c.n_events, m.c.bytes, m.c.database_version, m.c.program,
                       m.c.containers)
                .where(m.c.dataset_id == row.id, visible(m, version))
                .order_by(m.c.first_entry, m.c.database_id)
            )
            driver: Any = conn.connection.dbapi_connection
            cursor = driver.cursor(name="giod_database_rows") if self.dialect == "postgresql" else driver.cursor()
            try:
                with self._rows_converted(streamed=True):  # this read runs outside _retrying
                    execute(cursor, self._engine.dialect, query)
                while True:
                    with self._rows_converted(streamed=True):
                        batch = cursor.fetchmany(10_000)
                    if not batch:
                        break
                    yield from map(DatabaseRow._make, batch)
            finally:
                cursor.close()

    def database_at(self, dataset: str, entry: int, version: int | None = None) -> DatabaseRecord:
        """The database of ``dataset`` holding entry ``entry`` at ``version``; NotFound when none does.

        Four index lookups on the driver's cursor in one read transaction (``giod.catalog.entries``),
        however many databases the dataset has; on PostgreSQL sent together, one round trip.
        """
        s = entries.statements(self._engine.dialect, version is not None)

        def attempt() -> tuple[bool, DatabaseRecord | None]:
            raw = self._engine.raw_connection()
            try:
                cursor: Any = raw.cursor()
                if self.dialect == "sqlite":
                    cursor.execute("BEGIN")  # one snapshot for the four statements
                    return entries.find(cursor, s, dataset, entry, version)
                # a pinned version's rows never change: any snapshot sees them alike
                return entries.find_pipelined(raw.driver_connection, s, dataset, entry, version,
                                              snapshot=version is None)
            finally:
                with contextlib.suppress(Exception):  # a failed rollback must not hide the error
                    raw.rollback()
                raw.close()

        known, found = self._retrying(attempt)
        if not known:
            raise self._read(lambda conn: missing_dataset(conn, dataset, version))
        if found is None:
            raise NotFound(f"dataset {dataset} has no entry {entry}")
        return found

    def database(self, database_id: int, version: int | None = None) -> DatabaseRecord:
        """One database as it was at ``version``; NotFound if not visible there."""
        found = self._read_pinned(
            lambda conn: load_databases(conn, databases.c.id == database_id, version), version
        )
        if not found:
            at = "" if version is None else f" at version {version}"
            raise NotFound(f"no database {database_id}{at}")
        return found[0]

    def credentials(self) -> tuple[str | None, bool | str]:
        """No token and no TLS setting: a worker reaches the catalog by its URL alone."""
        return None, True

    def query(self, dataset: str, where: str | None = None, columns: Sequence[str] | None = None,
              limit: int | None = None, version: int | None = None) -> None:
        """None: a local catalog does not select events; the reader does (``Dataset.query``)."""
        return None

    selects_at_source = False

    def select_at_source(self, dataset: str, where: str, version: int, *, columns: Sequence[str] | None = None,
                         read: bool = False) -> None:
        """None: the reader plans a selection of a local catalog itself (``giod.read.selection``)."""
        return None

    def delete_database(self, database_id: int) -> int:
        """Delete a database from a new version on; returns it."""

        def work(conn: Connection, v: int) -> int:
            require_databases(conn, {database_id}, live=True)
            d, c = databases, containers
            ds_id, n = conn.execute(select(d.c.dataset_id, d.c.n_events).where(d.c.id == database_id)).one()
            size = conn.execute(select(func.coalesce(func.sum(c.c.size), 0)).where(
                c.c.database_id == database_id, visible(c, None))).scalar_one()
            conn.execute(add_totals(), {"dataset_id": ds_id, "version": v, "dn": -1, "de": -int(n), "db": -int(size)})
            delete_rows(
                conn,
                v,
                containers.c.database_id == database_id,
                tag_stats.c.database_id == database_id,
            )
            conn.execute(
                update(databases).where(databases.c.id == database_id).values(deleted_version=v)
            )
            m = database_summaries
            conn.execute(update(m).where(m.c.database_id == database_id, visible(m, None)).values(deleted_version=v))
            log(conn, v, f"delete db {database_id}")
            return v

        return self._write(work)
