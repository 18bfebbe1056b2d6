"""Catalog URLs, engines and transactions: the part of the catalog that talks to a driver.

``parse_url`` reads a catalog URL and its options; ``create_catalog_engine``
builds the SQLAlchemy engine (SQLite: WAL, ``synchronous``, foreign keys,
``BEGIN IMMEDIATE`` for writers; PostgreSQL: ``lock_timeout``).
``Transactions`` runs work in one transaction, retrying while other writers
hold the lock, and turns every driver error into a ``giod.errors`` class.

Two kinds of transaction run here: SQLAlchemy ``Connection`` transactions
for most calls, and DB-API transactions (``_write_driver``) for the commit
path, which runs precompiled SQL on the driver's cursor and so skips
SQLAlchemy's per-statement overhead (see ``giod.catalog.prepared``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, update
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.pool import QueuePool, StaticPool

from giod.catalog.tables import federation
from giod.errors import CatalogError, ConfigError, ConflictError, needs_extra


class _PipelineAbort(logging.Filter):
    """Drops psycopg's warning that leaving a pipeline failed once a statement inside it already had
    ("error ignored terminating <psycopg.Pipeline …>: pipeline aborted"): that first error is what the
    catalog raises and answers (a refused group falls back to single commits, a refusal becomes a
    ``CatalogError``), so the driver's own line would only reach the user raw, beside it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (str(record.msg).startswith("error ignored terminating") and "Pipeline" in record.getMessage())


logging.getLogger("psycopg").addFilter(_PipelineAbort())

__all__ = [
    "CatalogURL", "NoCatalog", "Transactions", "Unchanged", "VersionWatch", "acquire_engine", "create_catalog_engine",
    "parse_url", "release_engine",
]

T = TypeVar("T")

WRITE = "giod_write"  # execution option marking the write engine (SQLite: BEGIN IMMEDIATE)
DEFAULT_TIMEOUT = 60.0  # seconds a writer waits for the lock before giving up


class NoCatalog(CatalogError):
    """Nothing holds a giod catalog at the URL, and creating one was not asked for."""

    def __init__(self, message: str, shown: str):
        super().__init__(message)
        self.shown = shown  # the URL without its password
SYNCHRONOUS = ("FULL", "NORMAL")
_JITTER = random.SystemRandom()
_PG_RETRY = {"40001", "40P01", "55P03"}  # serialization failure, deadlock, lock not available
_BUMP = "UPDATE federation SET version = version + 1 RETURNING version"
_SAVEPOINT = "giod_change"


class Unchanged(Exception):
    """Raised inside a write to roll it back (the version bump too) and return ``result``."""

    def __init__(self, result: Any):
        self.result = result


@dataclass(frozen=True)
class CatalogURL:
    """A parsed catalog URL: the SQLAlchemy URL (our options removed) and our options."""

    url: URL
    dialect: str  # "sqlite" or "postgresql"
    timeout: float  # seconds a writer waits for the lock
    synchronous: str  # SQLite: "FULL" or "NORMAL"


def parse_url(url: str) -> CatalogURL:
    """Parse ``sqlite:///path.db``, a plain path, or ``postgresql://...`` with its options."""
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
        timeout = float(str(query.pop("timeout", DEFAULT_TIMEOUT)))
    except ValueError as exc:
        raise ConfigError(
            f"catalog URL option timeout must be a number of seconds: {url!r}"
        ) from exc
    synchronous = str(query.pop("synchronous", "FULL")).upper()
    if synchronous not in SYNCHRONOUS:
        raise ConfigError(
            f"catalog URL option synchronous must be FULL or NORMAL, not {synchronous!r}"
        )
    backend = sa_url.get_backend_name()
    if backend in ("postgresql", "postgres"):
        sa_url = sa_url.set(drivername="postgresql+psycopg", query=query)
        return CatalogURL(sa_url, "postgresql", timeout, synchronous)
    if backend == "sqlite":
        return CatalogURL(sa_url.set(drivername="sqlite", query=query), "sqlite", timeout, synchronous)
    raise CatalogError(
        f"unsupported catalog URL {url!r}: use sqlite:///path.db or postgresql://..."
    )


def create_catalog_engine(target: CatalogURL, *, create: bool = True) -> Engine:
    """The engine for ``target``; with ``create=False`` a missing SQLite file is an error."""
    if target.dialect == "sqlite":
        return _sqlite_engine(target.url, target.timeout, target.synchronous, create)
    return _postgresql_engine(target.url, target.timeout)


def _sqlite_engine(sa_url: URL, timeout: float, synchronous: str, create: bool) -> Engine:
    memory = sa_url.database in (None, "", ":memory:")
    if not memory:
        path = Path(str(sa_url.database))
        if not path.exists():
            if not create:
                raise NoCatalog(f"no catalog at {path} (and create=False)", str(path))
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
        immediate = conn.get_execution_options().get(WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _postgresql_engine(sa_url: URL, timeout: float) -> Engine:
    try:  # SQLAlchemy's driver; asked here so that a missing one names its extra
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise needs_extra("postgres", "a PostgreSQL catalog", exc) from exc
    # lock_timeout bounds the wait for the federation row, as busy_timeout does on SQLite;
    # a URL may carry several options= (libpq separates them with spaces)
    given = sa_url.query.get("options", "")
    given = " ".join(given) if isinstance(given, tuple) else given
    # jit off: the catalog's statements are short, and a group's unnest() joins are estimated at
    # thousands of times their rows, which set off seconds of JIT compilation for a millisecond's work
    options = f"{given} -c lock_timeout={max(1, int(timeout * 1000))} -c jit=off"
    connect_args: dict[str, Any] = {"options": options.strip()}
    if "connect_timeout" not in sa_url.query:
        connect_args["connect_timeout"] = 10
    return create_engine(sa_url, pool_size=5, max_overflow=10, connect_args=connect_args)


# Engines shared by the catalogs a process has open on one catalog: key -> [engine, catalogs holding it].
# A federation opened while another on the same catalog is open finds warm connections and the
# statements compiled already (SQLAlchemy's cache is per engine). PostgreSQL, keyed by (URL, timeout,
# pid): server processes that have read the tables' metadata once; planning a selection in a federation
# opened anew, medians of 15 at 10,000 databases, 76-93 ms alone against 33-47 ms shared. SQLite files,
# keyed by (URL, timeout, synchronous, pid) and the file's device and inode: a file replaced under the
# same path (while a connection holds the old one open, the new one cannot get its inode) gets an
# engine of its own.
_SHARED: dict[tuple[Any, ...], list[Any]] = {}
_SHARED_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A child made by fork starts with no shared engine and a free lock: another thread of the parent may
    have held the lock at the fork, and the child would wait for it forever (its engines are keyed by pid)."""
    global _SHARED_LOCK
    _SHARED_LOCK = threading.Lock()
    _SHARED.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def acquire_engine(target: CatalogURL, *, create: bool = True) -> Engine:
    """The engine for ``target``, shared by the process's catalogs open on it (give it back with
    ``release_engine``); a new one for an in-memory SQLite catalog or a file not made yet."""
    url = target.url.render_as_string(hide_password=False)
    key: tuple[Any, ...] = (url, target.timeout, os.getpid())
    if target.dialect != "postgresql":
        path = target.url.database
        try:
            found = os.stat(path) if path not in (None, "", ":memory:") else None
        except (OSError, ValueError):
            found = None
        if found is None:
            return create_catalog_engine(target, create=create)
        key = (*key, target.synchronous, found.st_dev, found.st_ino)
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is None:
            entry = _SHARED[key] = [create_catalog_engine(target, create=create), 0]
        entry[1] += 1
        return entry[0]  # type: ignore[no-any-return]


def release_engine(engine: Engine) -> None:
    """Give back an engine of ``acquire_engine``: the last catalog holding it closes its connections."""
    with _SHARED_LOCK:
        for key, entry in _SHARED.items():
            if entry[0] is engine:
                entry[1] -= 1
                if entry[1] > 0:
                    return
                del _SHARED[key]
                break
    engine.dispose()


class VersionWatch:
    """The federation version of a SQLite catalog file, read again only after a commit by another connection.

    An unpinned read (``ds.event(i)``, a selection that follows the catalog) asks the current version on every
    call: a statement through SQLAlchemy cost ~0.35 ms. ``PRAGMA data_version`` on a connection of its own,
    which never writes, changes whenever any other connection, of this process or of another, committed to the
    file since the last time it was asked (SQLite's documented contract, WAL included), and costs a few µs;
    the version is read again only then. The connection holds no transaction between calls (every statement
    runs to its end), so it keeps no checkpoint waiting. Any driver error gives None: the caller asks as before.
    """

    def __init__(self, engine: Engine):
        self._engine = engine
        self._lock = threading.Lock()
        self._conn: Any = None
        self._pid = 0
        self._data_version: int | None = None
        self._version = 0
        self._opened = 0  # connections opened so far

    def version(self) -> int | None:
        """The current version, or None when the watch cannot tell (the caller asks the catalog)."""
        with self._lock:
            try:
                changed = self._changed()
                if changed != self._data_version:
                    (row,) = self._conn.execute("SELECT version FROM federation").fetchall()
                    self._data_version, self._version = changed, int(row[0])
                return self._version
            except (sqlite3.Error, SQLAlchemyError, IndexError, ValueError):
                self._forget()
                return None

    def stamp(self) -> tuple[int, int] | None:
        """A mark that stays the same exactly while no connection commits to the file: a read made after
        taking it sees at least what the mark stands for, so its result may be kept and given again while
        the mark is unchanged (``Transactions._kept``). None: the watch cannot tell (read again)."""
        with self._lock:
            try:
                changed = int(self._changed())  # first: it may open the connection
                return self._opened, changed
            except (sqlite3.Error, SQLAlchemyError, IndexError, ValueError):
                self._forget()
                return None

    def rows(self, sql: str) -> tuple[tuple[int, int], list[Any]] | None:
        """The mark (as ``stamp``) and the rows of ``sql``, one SELECT on the watch's own connection: one
        snapshot, a few µs where a statement through SQLAlchemy costs ~0.3 ms. None: the watch cannot
        tell (read through the engine)."""
        with self._lock:
            try:
                changed = int(self._changed())
                return (self._opened, changed), self._conn.execute(sql).fetchall()
            except (sqlite3.Error, SQLAlchemyError, IndexError, ValueError):
                self._forget()
                return None

    def _changed(self) -> Any:
        if self._conn is None or self._pid != os.getpid():  # forked: never use the parent's connection
            self._open()
        return self._conn.execute("PRAGMA data_version").fetchall()[0][0]

    def _open(self) -> None:
        # a connection of the engine's pool (its connect settings applied), taken out of it for good
        raw = self._engine.raw_connection()
        conn = raw.driver_connection
        raw.detach()
        self._conn, self._pid, self._data_version = conn, os.getpid(), None
        self._opened += 1  # data_version counts per connection: a new one starts a new series of marks

    def _forget(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn, self._data_version = None, None

    def close(self) -> None:
        """Close the watch's connection (it opens again on the next call)."""
        with self._lock:
            self._forget()


def _release(engine: Engine, watch: VersionWatch | None) -> None:
    if watch is not None:
        watch.close()
    release_engine(engine)


def _reason(orig: BaseException) -> str:
    lines = str(orig).strip().splitlines()
    return lines[0] if lines else type(orig).__name__


class Transactions:
    """One engine and the transactions run on it; the base of ``Catalog``.

    Safe to share between threads (the engine pools connections). A process
    forked from the one that opened it drops the inherited connections on
    first use and opens its own.
    """

    url: str
    dialect: str

    def __init__(self, url: str, dialect: str, engine: Engine, timeout: float):
        self.url = url
        self.dialect = dialect
        self._engine = engine
        self._timeout = timeout
        self._pid = os.getpid()
        self._writer: Engine
        self._reader: Engine
        self._single: Engine
        if dialect == "sqlite":
            self._writer = engine.execution_options(**{WRITE: True})
            self._reader = engine
        else:
            self._writer = engine
            # One snapshot for the several statements of a read.
            self._reader = engine.execution_options(isolation_level="REPEATABLE READ")
        # a read of one statement needs no transaction around it (it sees one snapshot):
        # on PostgreSQL that saves the BEGIN and COMMIT, two of its three round trips
        self._single = engine.execution_options(isolation_level="AUTOCOMMIT") if dialect == "postgresql" else engine
        # the version asked cheaply (SQLite files: PRAGMA data_version); None: a statement each time
        memory = dialect == "sqlite" and engine.url.database in (None, "", ":memory:")
        self._watch = VersionWatch(engine) if dialect == "sqlite" and not memory else None
        # reads kept while the file is unchanged (``_kept``): name -> (the watch's mark, the result)
        self._kept_reads: dict[str, tuple[tuple[int, int], Any]] = {}
        # the engine goes back once, at close() or when the catalog is collected unclosed
        self._release = weakref.finalize(self, _release, engine, self._watch)
        dbapi = engine.dialect.dbapi
        self._driver_error: type[Exception] = dbapi.Error if dbapi is not None else sqlite3.Error
        self._driver_integrity: type[Exception] = (
            dbapi.IntegrityError if dbapi is not None else sqlite3.IntegrityError
        )

    def close(self) -> None:
        """Close every pooled connection (on PostgreSQL, once no other catalog of the process has the
        same URL open: they share them)."""
        self._release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._shown!r})"

    @property
    def _shown(self) -> str:
        """The URL without its password, for messages."""
        return make_url(self.url).render_as_string(hide_password=True)

    # -- retries and error mapping --------------------------------------------

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` (one whole transaction) again while the catalog is locked."""
        if os.getpid() != self._pid:  # forked: never touch the parent's sockets
            self._engine.dispose(close=False)
            self._pid = os.getpid()
        deadline = time.monotonic() + self._timeout
        delay = 0.005
        while True:
            try:
                return attempt()
            except DBAPIError as exc:
                orig: BaseException = exc.orig if exc.orig is not None else exc
                self._raise_unless_transient(orig, exc, deadline)
            except SQLAlchemyError as exc:
                raise CatalogError(f"catalog {self._shown}: {exc}") from exc
            except self._driver_error as exc:  # from the DB-API cursor of the commit path
                self._raise_unless_transient(exc, exc, deadline)
            except OverflowError as exc:  # sqlite3 binding a Python int beyond 64 bits
                raise CatalogError(
                    f"catalog {self._shown}: a number does not fit in 64 bits ({exc})"
                ) from exc
            time.sleep(delay * _JITTER.uniform(0.5, 1.5))  # de-synchronises retrying writers
            delay = min(delay * 2, 0.5)

    def _raise_unless_transient(
        self, orig: BaseException, exc: Exception, deadline: float
    ) -> None:
        refused = self._refusal(orig)
        if refused is not None:
            raise refused from exc
        if time.monotonic() >= deadline:
            raise CatalogError(
                f"catalog {self._shown} stayed locked by other writers for more than "
                f"{self._timeout:g} s; try again later"
            ) from exc

    def _refusal(self, orig: BaseException) -> Exception | None:
        """The giod error for a driver error, or None when it is transient (try again)."""
        if isinstance(orig, self._driver_integrity):
            return ConflictError(f"catalog change refused: {_reason(orig)}")
        if not self._transient(orig):
            return CatalogError(f"catalog {self._shown}: {_reason(orig)}")
        return None

    @staticmethod
    def _transient(orig: BaseException) -> bool:
        if isinstance(orig, sqlite3.OperationalError):
            message = str(orig).lower()
            return "locked" in message or "busy" in message
        return getattr(orig, "sqlstate", None) in _PG_RETRY

    # -- SQLAlchemy transactions -----------------------------------------------

    def _run(self, work: Callable[[Connection], T], *, write: bool) -> T:
        """Run ``work`` in one transaction, retrying while the catalog is locked."""
        engine = self._writer if write else self._reader

        def attempt() -> T:
            with engine.begin() as conn:
                return work(conn)

        return self._retrying(attempt)

    def _write(self, work: Callable[[Connection, int], T]) -> T:
        """Run a change: ``work(conn, version)`` after bumping the version.

        The bump comes first because it takes the federation row lock that
        serialises writers (on SQLite BEGIN IMMEDIATE already holds the lock):
        every check made afterwards sees every earlier commit. ``work`` raises
        ``Unchanged(result)`` to roll back and return ``result``.
        """
        bump = update(federation).values(version=federation.c.version + 1)
        bump = bump.returning(federation.c.version)
        try:
            return self._run(
                lambda conn: work(conn, int(conn.execute(bump).scalar_one())), write=True
            )
        except Unchanged as unchanged:
            return unchanged.result  # type: ignore[no-any-return]

    def _read(self, work: Callable[[Connection], T]) -> T:
        return self._run(self._rows_checked(work), write=False)

    def _read_statement(self, work: Callable[[Connection], T]) -> T:
        """A read whose ``work`` runs ONE statement (a second only to word an error): on PostgreSQL outside
        any transaction, one round trip instead of three (BEGIN, the statement, COMMIT)."""
        checked = self._rows_checked(work)

        def attempt() -> T:
            with self._single.connect() as conn:
                return checked(conn)

        return self._retrying(attempt)

    def _rows_checked(self, work: Callable[[Connection], T]) -> Callable[[Connection], T]:
        """``work``, a read that turns rows into records, with a value no record can hold in a row (text in
        a number column of a SQLite catalog edited outside giod, or a source federation's catalog) as a
        CatalogError instead of the ``TypeError``/``ValueError`` of the conversion that met it."""

        def checked(conn: Connection) -> T:
            with self._rows_converted():  # a driver's error is _retrying's: a locked catalog is tried again
                return work(conn)

        return checked

    @contextlib.contextmanager
    def _rows_converted(self, *, streamed: bool = False) -> Iterator[None]:
        """The block's ``TypeError``/``ValueError``/``OverflowError`` as the CatalogError of a malformed row
        (``_rows_checked``, for a read that is not one call); ``streamed``: a read that runs outside
        ``_retrying`` (a streamed listing), whose driver's errors are CatalogErrors too (SQLite's text that
        is not UTF-8, a blob a concatenation made text of, is one)."""
        try:
            yield
        except (TypeError, ValueError, OverflowError) as exc:
            raise CatalogError(f"catalog {self._shown}: malformed catalog row: {exc}") from exc
        except DBAPIError as exc:
            if not streamed:
                raise
            raise CatalogError(f"catalog {self._shown}: {_reason(exc.orig if exc.orig is not None else exc)}"
                               ) from exc
        except self._driver_error as exc:
            if not streamed:
                raise
            raise CatalogError(f"catalog {self._shown}: {_reason(exc)}") from exc

    def _kept(self, name: str, read: Callable[[], T], sql: str | None = None,
              parse: Callable[[list[Any]], T] | None = None) -> T:
        """``read()``, or its result kept from an earlier call while no connection has committed to the
        catalog since (a SQLite file: ``VersionWatch.stamp``); elsewhere ``read()`` every time. The mark
        is taken before reading, so a commit during the read only makes the next call read again. With
        ``sql`` (one SELECT of the same rows) and ``parse`` (of its rows), a SQLite file is read on the
        watch's connection instead. The result is shared between calls: give it out as something its
        callers cannot change."""
        watch = self._watch
        mark = watch.stamp() if watch is not None else None
        if watch is None or mark is None:
            return read()
        kept = self._kept_reads.get(name)
        if kept is not None and kept[0] == mark:
            return kept[1]  # type: ignore[no-any-return]
        got = watch.rows(sql) if sql is not None and parse is not None else None
        if got is not None and parse is not None:
            mark, rows = got
            found = parse(rows)
        else:
            found = read()
        self._kept_reads[name] = (mark, found)
        return found

    def _read_pinned(self, work: Callable[[Connection], T], version: int | None) -> T:
        """A read of several statements: at a pinned ``version`` on PostgreSQL outside any transaction.

        What a pinned version shows never changes (later versions add rows and mark rows deleted at
        later versions; the replicas a statement joins are read by that one statement), so every
        snapshot reads it alike and the BEGIN and COMMIT, two round trips, are saved (a purge gives up
        the versions below its own, in any snapshot taken after it). A live read (``version`` None)
        needs one snapshot for its statements: a repeatable-read transaction."""
        if version is None or self.dialect != "postgresql":
            return self._read(work)
        return self._read_statement(work)

    # -- DB-API transactions (the commit path) -----------------------------------

    def _write_driver(self, work: Callable[[Any, int], T]) -> T:
        """``_write`` on a DB-API cursor: ``work(cursor, version)`` after the bump.

        The connection comes from the same pool as every other; SQLite gets
        its ``BEGIN IMMEDIATE`` here, PostgreSQL opens its transaction at the
        first statement (READ COMMITTED, serialised by the federation row lock).
        On PostgreSQL the transaction runs in psycopg's pipeline mode: a
        statement whose result ``work`` does not fetch costs no round trip of
        its own, so the inserts after the last fetch travel with the COMMIT.
        """

        def attempt() -> T:
            raw = self._engine.raw_connection()
            try:
                cursor: Any = raw.cursor()
                if self.dialect == "sqlite":
                    batch: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
                    cursor.execute("BEGIN IMMEDIATE")
                else:
                    batch = raw.driver_connection.pipeline()  # type: ignore[union-attr]
                with batch:
                    cursor.execute(_BUMP)
                    (version,) = cursor.fetchone()
                    result = work(cursor, int(version))
                    raw.commit()
                return result
            except BaseException:
                # a failed rollback (lost connection) must not hide the error that caused it
                with contextlib.suppress(Exception):
                    raw.rollback()
                raise
            finally:
                raw.close()  # back to the pool

        try:
            return self._retrying(attempt)
        except Unchanged as unchanged:
            return unchanged.result  # type: ignore[no-any-return]

    def _write_driver_group(
        self, works: Sequence[Callable[[Any, int], T]], *, atomic: bool
    ) -> list[tuple[bool, Any]]:
        """Several ``_write_driver`` changes in ONE transaction: one lock, one fsync.

        Each change runs in its own savepoint after its own version bump, so
        each gets its own version, strictly increasing in list order, and a
        change that fails (or raises ``Unchanged``) is rolled back alone,
        its bump included. Returns ``(True, result)`` or ``(False, error)``
        per change, known only once the transaction is durable; if the
        COMMIT itself fails, every change fails with it. ``atomic``: the first
        failure rolls back every change and is raised instead.
        """

        def attempt() -> list[tuple[bool, Any]]:
            raw = self._engine.raw_connection()
            try:
                cursor: Any = raw.cursor()
                if self.dialect == "sqlite":
                    cursor.execute("BEGIN IMMEDIATE")
                outcomes = [self._in_savepoint(raw, cursor, work, atomic) for work in works]
                raw.commit()
                return outcomes
            except BaseException:
                with contextlib.suppress(Exception):
                    raw.rollback()
                raise
            finally:
                raw.close()

        return self._retrying(attempt)

    def _in_savepoint(
        self, raw: Any, cursor: Any, work: Callable[[Any, int], T], atomic: bool
    ) -> tuple[bool, Any]:
        """Run one change of a group in a savepoint; ``(ok, result or error)``."""
        batch: contextlib.AbstractContextManager[Any] = (
            contextlib.nullcontext() if self.dialect == "sqlite"
            else raw.driver_connection.pipeline()  # its exit raises what the server refused
        )
        keep = False
        try:
            with batch:
                cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
                cursor.execute(_BUMP)
                (version,) = cursor.fetchone()
                outcome: tuple[bool, Any] = (True, work(cursor, int(version)))
            keep = True
        except Unchanged as unchanged:
            outcome = (True, unchanged.result)
        except (self._driver_error, DBAPIError) as exc:
            orig = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
            refused = self._refusal(orig)
            if refused is None or atomic:
                raise  # transient: the whole group is tried again; atomic: nothing lands
            refused.__cause__ = exc
            outcome = (False, refused)
        except OverflowError as exc:  # sqlite3 binding a Python int beyond 64 bits
            if atomic:
                raise
            outcome = (False, CatalogError(f"catalog {self._shown}: a number does not fit in 64 bits ({exc})"))
        except Exception as exc:  # the change's own refusal (no such dataset, ...)
            if atomic:
                raise
            outcome = (False, exc)
        if keep:
            cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        else:  # undo this change alone, its version bump included
            cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
            cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        return outcome
