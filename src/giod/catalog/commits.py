"""The commit path: registering databases and adding containers to them.

``commit_database`` is what every writer calls once per database, so it is
built for speed: the rows are prepared before the transaction opens, the
statements are compiled once per catalog (``CommitStatements``) and run on
the driver's cursor, and nothing just written is read back. One commit is,
after ``BEGIN``: the version bump, one ``UPDATE datasets ... RETURNING``
that finds the dataset and takes its entry range, one ``INSERT databases
... ON CONFLICT DO NOTHING RETURNING id`` that also detects a landed
idempotency key, one batch of containers, one ``INSERT replicas ... SELECT``,
one batch of tag statistics and the log line. Schemas are looked up once per
``Catalog`` (they are never deleted); a site in the transaction, by the
statement that takes the entries (a site may be removed), since on
PostgreSQL no foreign key checks either (level 12).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import delete, select

from giod.catalog.bulk import BulkStatements, PreparedCommit, Refused, duplicate, group_row, group_statement
from giod.catalog.engine import Transactions, Unchanged
from giod.catalog.kept import container_ids, record_text
from giod.catalog.prepared import KEPT_COLUMNS, CommitStatements, execute, summary_names
from giod.catalog.queries import bound, chunks, not_found
from giod.catalog.records import CONTAINER_FORMATS, CommitResult, ContainerSpec, DatabaseCommit
from giod.catalog.tables import (
    containers,
    databases,
    datasets,
    leases,
    schemas,
    sites,
    visible,
)
from giod.errors import CatalogError, ConflictError, GiodError, NotFound
from giod.names import check_container_path

__all__ = ["CommitMethods"]

_INT64 = 2**63  # sizes and counts are BIGINT columns

GROUP_MAX = 256  # commits per shared transaction: bounds how long one group holds the lock
# seconds a group's leader waits for the callers of the group before, who commit again at once in a
# loop of commits; without it the callers split into two halves whose groups alternate, each half size
GROUP_WAIT = 0.005
# PostgreSQL: a commit_databases of at least ANALYZE_BULK commits analyses the tables it writes once they
# hold over ANALYZE_GROWTH more rows than their statistics say (or have none): a bulk load is what a
# planner's estimates fall behind, and a server without autovacuum never catches up by itself
ANALYZE_BULK = 500
ANALYZE_GROWTH = 0.2
ANALYZED = ("databases", "containers", "replicas", "tag_stats", "tag_coverage", "database_summaries",
            "dataset_totals", "versions")


class _Pending:
    """One commit waiting in the group-commit queue, and then its outcome.

    ``wake`` is a lock taken at creation: its owner waits by taking it again, and is woken, once, by its
    release (the lead passed to it, or its outcome given). An ``Event`` costs a waiter two hand-offs of the
    interpreter lock where this costs one: woken, it takes the event's own lock again, still held by the
    thread that set it."""

    __slots__ = ("lead", "ok", "value", "wake", "work")

    def __init__(self, work: Callable[[Any, int], Any]):
        self.work = work
        self.lead = False
        self.ok = False
        self.value: Any = None
        self.wake = threading.Lock()
        self.wake.acquire()


class _CommitWork:
    """A commit's transaction work (``work(cursor, version)``) with the rows it prepared."""

    __slots__ = ("prepared", "run")

    def __init__(self, prepared: PreparedCommit, run: Callable[[Any, int], CommitResult]):
        self.prepared = prepared
        self.run = run

    def __call__(self, cur: Any, version: int) -> CommitResult:
        return self.run(cur, version)


_Outcomes = list[tuple[bool, Any]]  # per commit: (True, its result) or (False, its error)
AddItems = Sequence[tuple[int, Sequence[ContainerSpec], Mapping[str, tuple[float, float]] | None]]

_sorted_json = json.JSONEncoder(sort_keys=True).encode  # ``json.dumps(value, sort_keys=True)``


def _dump_json(value: Any, what: str) -> str:
    if type(value) is dict and not value:  # the parameters most commits give: no encoder set up for them
        return "{}"
    try:
        return _sorted_json(value)
    except (TypeError, ValueError) as exc:
        raise CatalogError(f"commit refused: {what} are not JSON-serialisable: {exc}") from exc


def _check_specs(specs: Sequence[ContainerSpec], n_events: int, where: str) -> None:
    names = [c.name for c in specs]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ConflictError(f"{where}: two containers named {twice!r}")
    for c in specs:
        if not c.name or not c.path:
            raise CatalogError(f"{where}: a container needs a name and a path")
        if not 0 <= c.size < _INT64:
            raise CatalogError(f"{where}: container {c.name!r} has size {c.size}")
        if c.format not in CONTAINER_FORMATS:
            raise CatalogError(f"{where}: container {c.name!r} has format {c.format!r} "
                               f"(known: {', '.join(CONTAINER_FORMATS)})")
        if c.cluster_checksums and (len(c.cluster_checksums) != len(c.cluster_entries) + 1
                                    or not all(0 <= int(x) < 1 << 32 for x in c.cluster_checksums)):
            raise CatalogError(f"{where}: container {c.name!r} needs one CRC-32C per cluster and one "
                               "for the footer")
        if c.cluster_entries and sum(c.cluster_entries) != n_events:
            raise CatalogError(
                f"{where}: container {c.name!r} holds {sum(c.cluster_entries)} entries "
                f"in its clusters but the database has {n_events} events"
            )


def _int_list(values: Sequence[Any]) -> str:
    """``json.dumps([int(v) for v in values])``, the same text, without the encoder's cost per call (~5 µs,
    twice per container of every commit)."""
    return f"[{', '.join([str(int(v)) for v in values])}]"


def _container_rows(
    specs: Sequence[ContainerSpec], default: tuple[str, str, str] = ("", "", "{}")
) -> list[dict[str, Any]]:
    """Rows for ``specs`` without database id, version and time; ``default`` fills
    an empty program, program version or parameters (JSON)."""
    program, program_version, parameters = default
    return [
        {
            "name": c.name,
            "path": c.path,
            "checksum": c.checksum,
            "size": c.size,
            "cluster_entries": _int_list(c.cluster_entries),
            "format": c.format,
            "cluster_checksums": _int_list(c.cluster_checksums),
            "schema_id": c.schema_id,
            "program": c.program or program,
            "program_version": c.program_version or program_version,
            "parameters": (
                _dump_json(c.parameters, f"parameters of container {c.name!r}")
                if c.parameters
                else parameters
            ),
        }
        for c in specs
    ]


def _stat_rows(stats: Mapping[str, tuple[float, float]]) -> list[dict[str, Any]]:
    return [{"field": f, "min": bound(lo), "max": bound(hi)} for f, (lo, hi) in stats.items()]


class CommitMethods(Transactions):
    """``commit_database``, ``add_containers`` and ``add_containers_bulk`` of ``Catalog``."""

    # PostgreSQL: a group as one statement (one round trip) rather than one per table (three)
    _one_statement = True

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._group_lock = threading.Lock()
        self._group_arrived = threading.Condition(self._group_lock)
        self._group_queue: list[_Pending] = []
        self._group_running = False
        self._group_callers = 0  # the last group's commits and those that queued while it ran
        self._group_expected = 0  # how many the waiting leader waits for: the caller that completes them wakes it
        self._group_pid = os.getpid()
        self._schemas: set[int] = set()  # ids known to exist
        self._statements: CommitStatements | None = None

    def _prepared(self) -> CommitStatements:
        # compiled after the first connection: the dialect knows the server's features then
        if self._statements is None:
            self._statements = CommitStatements(self._engine.dialect)
        return self._statements

    def commit_database(self, commit: DatabaseCommit, *, release_lease: int | None = None) -> CommitResult:
        """Register one database with its containers, replicas and tag statistics.

        One transaction: entries ``[first_entry, first_entry + n_events)`` are
        taken from the dataset, and the new version makes it all visible at
        once. With an ``idempotency_key`` that already landed in this dataset,
        nothing changes and the earlier result comes back with ``duplicate=True``.
        Containers record the program that wrote them; a spec that leaves
        ``program``, ``program_version`` or ``parameters`` empty takes the
        database's.

        Threads of one process that commit at the same time share one
        transaction and one fsync (group commit): each still gets its own
        version and result, only once that transaction is durable, and a
        commit that fails is rolled back alone.

        ``release_lease``: the id of a lease (``giod.catalog.leases``) the
        same transaction releases, a writer's last commit: its files are
        registered, and the writer saves a transaction (an fsync) of its own.
        A commit that fails leaves the lease held.
        """
        result: CommitResult = self._grouped(self._commit_work(commit, release_lease))
        if release_lease is not None and result.duplicate:  # its transaction was rolled back
            self._run(lambda conn: conn.execute(delete(leases).where(leases.c.id == release_lease)), write=True)
        return result

    def commit_databases(self, commits: Sequence[DatabaseCommit]) -> list[CommitResult]:
        """Register many databases in one transaction: all of them, or none.

        Each gets its own version (in list order) and result, as from
        ``commit_database``; a repeated idempotency key gives its earlier
        result with ``duplicate=True``. The first refusal rolls back every one.
        """
        if not commits:
            return []
        works = [self._commit_work(c) for c in commits]
        results = [value for _, value in self._commit_group(works, atomic=True)]
        if self.dialect == "postgresql" and len(commits) >= ANALYZE_BULK:
            # the commits have landed: fresh statistics help the plans, and their failure refuses nothing
            with contextlib.suppress(self._driver_error):
                self._refresh_statistics()
        return results

    def _refresh_statistics(self, *, force: bool = False) -> bool:
        """PostgreSQL: ``ANALYZE`` the tables a commit writes when ``databases`` holds over
        ``ANALYZE_GROWTH`` more rows than its statistics say, or has none (always with ``force``); whether
        it ran. The planner's estimates and the plans a server keeps per session follow; nothing else
        changes. SQLite: nothing (False). ``commit_databases`` calls it after a bulk of commits."""
        if self.dialect != "postgresql":
            return False
        raw = self._engine.raw_connection()
        try:
            conn: Any = raw.driver_connection
            conn.autocommit = True  # ANALYZE in a transaction of its own, not held open after it
            try:
                cur = conn.cursor()
                cur.execute("SELECT c.reltuples, (SELECT max(id) FROM databases) FROM pg_class c "
                            "WHERE c.oid = 'databases'::regclass")
                estimated, top = cur.fetchone()
                if not force and estimated >= 0 and (top or 0) <= (1 + ANALYZE_GROWTH) * estimated + ANALYZE_BULK:
                    return False
                cur.execute(f"ANALYZE {', '.join(ANALYZED)}")
                return True
            finally:
                conn.autocommit = False
        finally:
            raw.close()

    def _commit_work(self, commit: DatabaseCommit, release: int | None = None) -> _CommitWork:
        """Check ``commit`` and prepare its rows; the transaction's work, to run after the bump."""
        n = commit.n_events
        if not 0 <= n < _INT64:
            raise CatalogError(f"commit refused: n_events is {n}")
        _check_specs(commit.containers, n, f"commit to {commit.dataset!r}")
        parameters = _dump_json(commit.parameters, "parameters")
        held = _container_rows(
            commit.containers, (commit.program, commit.program_version, parameters)
        )
        stats = _stat_rows(commit.tag_stats)
        parents = list(dict.fromkeys(commit.parents))
        wanted_schemas = {c.schema_id for c in commit.containers}
        size = sum(c.size for c in commit.containers)
        names = summary_names(c.name for c in commit.containers)
        record = record_text(held, stats)
        s = self._prepared()

        def work(cur: Any, v: int) -> CommitResult:
            row = s.take_entries_at_site.execute(cur, {"name": commit.dataset, "n": n, "site": commit.site}
                                                 ).fetchone()
            if row is None:
                raise self._not_found(cur, "dataset", commit.dataset, datasets.c.name)
            for c in commit.containers:  # after the dataset is known: "no dataset" says more than a path
                check_container_path(commit.dataset, c.path)
            dataset_id, first, site_id = int(row[0]), int(row[1]) - n, row[2]
            now = time.time()
            new = s.insert_database.execute(
                cur,
                {
                    "dataset_id": dataset_id,
                    "first_entry": first,
                    "n_events": n,
                    "bytes": size,
                    "created": now,
                    "created_version": v,
                    "writer": commit.writer,
                    "program": commit.program,
                    "program_version": commit.program_version,
                    "parameters": parameters,
                    "idempotency_key": commit.idempotency_key,
                },
            ).fetchone()
            if new is None:  # the key landed before: roll back, bump and entries included
                key = {"dataset_id": dataset_id, "key": commit.idempotency_key}
                db_id, at, version = s.landed.execute(cur, key).fetchone()
                raise Unchanged(CommitResult(int(db_id), int(at), int(version), duplicate=True))
            db_id = int(new[0])
            if site_id is None:  # after the idempotency key: a retry of a landed commit gets its result
                raise self._not_found(cur, "site", commit.site, sites.c.name)
            self._require_schemas(cur, wanted_schemas)
            if parents:
                self._require_databases(cur, parents, live=False)
                s.insert_parents.executemany(
                    cur,
                    ({"database_id": db_id, "parent_id": p, "position": i}
                     for i, p in enumerate(parents)),
                )  # fmt: skip
            self._insert_containers(cur, v, now, [(db_id, held)], int(site_id))
            s.insert_summary.execute(cur, {
                "database_id": db_id, "created_version": v, "dataset_id": dataset_id, "first_entry": first,
                "n_events": n, "database_version": v, "program": commit.program, "bytes": size, "containers": names,
                "record": record, "created": now, "writer": commit.writer, "program_version": commit.program_version,
                "parameters": parameters, "idempotency_key": commit.idempotency_key,
            })  # fmt: skip
            s.insert_tag_stats.executemany(
                cur, ({**r, "database_id": db_id, "created_version": v} for r in stats)
            )
            s.add_totals.execute(cur, {"dataset_id": dataset_id, "version": v, "dn": 1, "de": n, "db": size})
            self._log(cur, v, now, f"commit {commit.dataset} db {db_id}")
            if release is not None:
                s.release_lease.execute(cur, {"id": release})
            return CommitResult(db_id, first, v)

        row = group_row(commit, parameters, held, stats, size, names, record) if self.dialect == "postgresql" else ""
        prepared = PreparedCommit(commit, parameters, held, stats, parents, wanted_schemas, size, names, record,
                                  release, row)
        return _CommitWork(prepared, work)

    # -- group commit --------------------------------------------------------------------

    def _grouped(self, work: Callable[[Any, int], Any]) -> Any:
        """Run ``work`` as ``_write_driver`` would, sharing a transaction with concurrent callers.

        The first caller to find no group running leads: it takes every
        waiting change (its own included, up to GROUP_MAX) into one
        transaction, hands each waiter its outcome, and passes the lead to
        the first change that queued meanwhile. Followers only wait. A
        leader first waits up to GROUP_WAIT for as many callers as the last
        group and those queued behind it: callers committing in a loop come
        back as one group instead of two alternating halves.
        """
        me = _Pending(work)
        if self._group_pid != os.getpid():  # forked: the parent's queue and lock are not ours
            self._group_lock, self._group_queue, self._group_running = threading.Lock(), [], False
            self._group_arrived, self._group_callers = threading.Condition(self._group_lock), 0
            self._group_expected = 0
            self._group_pid = os.getpid()
        with self._group_lock:
            self._group_queue.append(me)
            me.lead = not self._group_running
            self._group_running = True
            if len(self._group_queue) == self._group_expected:  # the leader waits for no one else
                self._group_arrived.notify()
        if not me.lead:
            me.wake.acquire()
        if me.lead:
            batch: list[_Pending] = []
            try:
                with self._group_lock:
                    expected = min(self._group_callers, GROUP_MAX)
                    self._group_expected = expected  # one wake when the last of them queues, not one a caller
                    deadline = time.monotonic() + GROUP_WAIT
                    while len(self._group_queue) < expected and (left := deadline - time.monotonic()) > 0:
                        self._group_arrived.wait(left)
                    self._group_expected = 0
                    batch = self._group_queue[:GROUP_MAX]
                    del self._group_queue[:GROUP_MAX]
                self._run_group(batch)
            finally:
                with self._group_lock:
                    self._group_callers = len(batch) + len(self._group_queue)
                    if self._group_queue:
                        nxt = self._group_queue[0]
                        nxt.lead = True
                        nxt.wake.release()
                    else:
                        self._group_running = False
        if not me.ok:
            raise me.value
        return me.value

    def _run_group(self, batch: list[_Pending]) -> None:
        try:
            if len(batch) == 1 and self.dialect == "sqlite":  # alone: no savepoint needed
                outcomes = [(True, self._write_driver(batch[0].work))]
            else:
                outcomes = self._commit_group([p.work for p in batch], atomic=False)
        except BaseException as exc:  # noqa: BLE001 - nothing of the group is durable
            outcomes = [(False, exc)] * len(batch)
        for p, (ok, value) in zip(batch, outcomes, strict=True):
            p.ok, p.value = ok, value
            if not p.lead:
                p.wake.release()

    # -- many commits as one set of rows (giod.catalog.bulk) ------------------------------------

    def _commit_group(self, works: Sequence[Callable[[Any, int], Any]], *, atomic: bool) -> list[tuple[bool, Any]]:
        """The outcomes of ``works`` (commits) in one transaction: in bulk when it can, else in savepoints."""
        prepared = [w.prepared for w in works if isinstance(w, _CommitWork)]
        if len(prepared) == len(works) and not any(p.parents for p in prepared):
            try:
                return self._retrying(lambda: self._bulk_attempt(prepared))
            except Refused:
                pass  # the savepoint path gives each commit its own outcome (or, atomic, the first error)
        if len(works) == 1 and not atomic:
            try:
                return [(True, self._write_driver(works[0]))]
            except Exception as exc:  # noqa: BLE001 - this commit's outcome, as from a group
                return [(False, exc)]
        return self._write_driver_group(works, atomic=atomic)

    def _bulk_attempt(self, commits: list[PreparedCommit]) -> list[tuple[bool, Any]]:
        raw = self._engine.raw_connection()
        released = [{"id": p.release} for p in commits if p.release is not None]
        try:
            cursor: Any = raw.cursor()
            if self.dialect == "sqlite":
                cursor.execute("BEGIN IMMEDIATE")
                outcomes = self._bulk_rows(cursor, commits, released)
                assert not callable(outcomes)  # only PostgreSQL's one statement reads after the sync
                raw.commit()
                return outcomes
            # PostgreSQL: the BEGIN goes in the pipeline with the rest. psycopg, when it opens the
            # transaction itself, waits for its BEGIN alone (a round trip and a wake of the server
            # a group); on a connection in autocommit it sends none, so the group sends its own
            conn: Any = raw.driver_connection
            conn.autocommit = True
            try:
                with conn.pipeline():
                    cursor.execute("BEGIN")
                    pending = self._bulk_rows(cursor, commits, released)
                    if not callable(pending):
                        conn.cursor().execute("COMMIT")
                # the pipeline's one Sync has sent it all and brought back every answer
                return pending() if callable(pending) else pending
            finally:
                if conn.info.transaction_status != 0:  # not IDLE: the server refused after the BEGIN
                    with contextlib.suppress(Exception):
                        conn.rollback()
                conn.autocommit = False  # the pool's other users open their transactions as before
        except BaseException as exc:
            with contextlib.suppress(Exception):
                raw.rollback()
            if isinstance(exc, GiodError) or (isinstance(exc, self._driver_error)
                                              and self._refusal(exc) is not None):
                raise Refused(str(exc)) from exc
            raise
        finally:
            raw.close()

    def _bulk_rows(self, cur: Any, commits: list[PreparedCommit], released: list[dict[str, int]]
                   ) -> _Outcomes | Callable[[], _Outcomes]:
        """Register ``commits`` table by table and release the leases ``released``; ``Refused`` when any
        would be refused. PostgreSQL's one statement also sends the COMMIT and gives what reads its
        answer once the pipeline has synced."""
        s, b, pg = self._prepared(), BulkStatements, self.dialect == "postgresql"
        outcomes: list[tuple[bool, Any]] = [(True, None)] * len(commits)
        landed: dict[tuple[str, str], CommitResult] = {}
        keyed = {(p.commit.dataset, p.commit.idempotency_key) for p in commits if p.commit.idempotency_key}
        if keyed:
            if pg:
                cur.execute(b.lock)  # SQLite's BEGIN IMMEDIATE holds the lock already
            landed = self._landed(cur, keyed)
        fresh: list[int] = []
        first_of: dict[tuple[str, str], int] = {}
        for i, p in enumerate(commits):
            key = p.commit.idempotency_key
            if key is not None:
                k = (p.commit.dataset, key)
                if k in landed:
                    outcomes[i] = (True, landed[k])
                    continue
                if k in first_of:  # the same key twice in one group: the first lands
                    continue
                first_of[k] = i
            fresh.append(i)
        if not fresh:
            self._prepared().release_lease.executemany(cur, released)
            return outcomes
        if pg and self._one_statement:
            return self._bulk_statement(cur, commits, fresh, first_of, outcomes, released)
        totals: dict[str, int] = {}
        for i in fresh:
            totals[commits[i].commit.dataset] = totals.get(commits[i].commit.dataset, 0) + commits[i].commit.n_events
        starts: dict[str, tuple[int, int]] = {}  # dataset -> (id, its first free entry before the group)
        if pg:  # both statements travel before either answer is read: one round trip
            entries = cur.connection.cursor()
            cur.execute(b.bump, {"n": len(fresh)})
            entries.execute(b.take_entries, {"names": list(totals), "ns": list(totals.values())})
            version = int(cur.fetchone()[0]) - len(fresh) + 1
            for name, ds_id, nxt in entries.fetchall():
                starts[name] = (int(ds_id), int(nxt) - totals[name])
        else:
            cur.execute("UPDATE federation SET version = version + ? RETURNING version", (len(fresh),))
            version = int(cur.fetchone()[0]) - len(fresh) + 1
            for name, n in totals.items():
                row = s.take_entries.execute(cur, {"name": name, "n": n}).fetchone()
                if row is not None:
                    starts[name] = (int(row[0]), int(row[1]) - n)
        if len(starts) != len(totals):
            raise Refused("no such dataset")
        for i in fresh:
            for c in commits[i].commit.containers:
                check_container_path(commits[i].commit.dataset, c.path)
        self._require_schemas(cur, set().union(*(commits[i].schemas for i in fresh)))
        site_ids = {name: self._site_id(cur, name) for name in {commits[i].commit.site for i in fresh}}
        now = time.time()
        rows, placed = [], []
        for j, i in enumerate(fresh):
            dc = commits[i].commit
            ds_id, first = starts[dc.dataset]
            starts[dc.dataset] = (ds_id, first + dc.n_events)
            placed.append((ds_id, first, version + j))
            rows.append({
                "dataset_id": ds_id, "first_entry": first, "n_events": dc.n_events, "bytes": commits[i].size,
                "created": now, "created_version": version + j, "writer": dc.writer, "program": dc.program,
                "program_version": dc.program_version, "parameters": commits[i].parameters,
                "idempotency_key": dc.idempotency_key,
            })  # fmt: skip
        if pg:
            cur.execute(b.databases, b.database_params(rows))
            ids = {(int(d), int(f)): int(i) for i, d, f in cur.fetchall()}
            db_ids = [ids[(d, f)] for d, f, _ in placed]
        else:
            db_ids = []
            for row in rows:
                new = s.insert_database.execute(cur, row).fetchone()
                if new is None:
                    raise Refused("an idempotency key landed meanwhile")
                db_ids.append(int(new[0]))
        held: list[dict[str, Any]] = []
        stats: list[dict[str, Any]] = []
        log: list[dict[str, Any]] = []
        totals_rows: list[dict[str, Any]] = []
        summaries: list[dict[str, Any]] = []
        grown: dict[int, tuple[int, int, int]] = {}  # dataset id -> the group's running sums
        for j, i in enumerate(fresh):
            p, db_id, v = commits[i], db_ids[j], version + j
            ds_id = placed[j][0]
            dn, de, db = grown.get(ds_id, (0, 0, 0))
            grown[ds_id] = (dn + 1, de + p.commit.n_events, db + p.size)
            totals_rows.append({"dataset_id": ds_id, "version": v, "dn": 1, "de": p.commit.n_events, "db": p.size,
                                "sums": grown[ds_id]})
            held += [{**r, "database_id": db_id, "created_version": v, "created": now} for r in p.containers]
            stats += [{**r, "database_id": db_id, "created_version": v} for r in p.stats]
            log.append({"version": v, "created": now, "description": f"commit {p.commit.dataset} db {db_id}"})
            summaries.append({
                "database_id": db_id, "created_version": v, "dataset_id": ds_id, "first_entry": placed[j][1],
                "n_events": p.commit.n_events, "database_version": v, "program": p.commit.program, "bytes": p.size,
                "containers": p.names, "record": p.record, "created": now, "writer": p.commit.writer,
                "program_version": p.commit.program_version, "parameters": p.parameters,
                "idempotency_key": p.commit.idempotency_key,
            })  # fmt: skip
            outcomes[i] = (True, CommitResult(db_id, placed[j][1], v))
        if pg:
            cur.execute(b.containers, b.container_params(
                held, db_ids, [site_ids[commits[i].commit.site] for i in fresh], now))
            if stats:
                cur.execute(b.tag_stats, b.tag_params(stats))
            cur.execute(b.log, b.log_params(log))
            cur.execute(b.summaries, b.summary_params(summaries))
            cur.execute(b.totals, b.totals_params(
                [{**r, "dn": r["sums"][0], "de": r["sums"][1], "db": r["sums"][2]} for r in totals_rows]))
        else:
            s.insert_containers.executemany(cur, held)
            s.insert_replicas.executemany(cur, (
                {"site_id": site_ids[commits[i].commit.site], "checked": now, "database_id": db_ids[j],
                 "version": version + j} for j, i in enumerate(fresh) if commits[i].containers))
            s.insert_tag_stats.executemany(cur, stats)
            s.log.executemany(cur, log)
            s.insert_summary.executemany(cur, summaries)
            s.add_totals.executemany(cur, totals_rows)  # each sees the row before it: the increments chain
        s.release_lease.executemany(cur, released)
        for i, p in enumerate(commits):
            key = p.commit.idempotency_key
            if key is not None and first_of.get((p.commit.dataset, key), i) != i:
                outcomes[i] = (True, duplicate(outcomes[first_of[(p.commit.dataset, key)]][1]))
        return outcomes

    def _bulk_statement(self, cur: Any, commits: list[PreparedCommit], fresh: list[int],
                        first_of: dict[tuple[str, str], int], outcomes: _Outcomes, released: list[dict[str, int]]
                        ) -> Callable[[], _Outcomes]:
        """PostgreSQL: the group's rows in one statement (``bulk.group_statement``), sent with the lock
        before it and the leases' release and the COMMIT after it: with the BEGIN, one round trip. The
        statement refuses itself (a missing dataset or site), so nothing is read before the COMMIT;
        what reads its answer is returned, to call once the pipeline has synced."""
        for i in fresh:
            if not commits[i].containers:  # no replica row would check its site: the savepoint path does
                raise Refused("a commit without containers")
            for c in commits[i].commit.containers:
                check_container_path(commits[i].commit.dataset, c.path)
        self._require_schemas(cur, set().union(*(commits[i].schemas for i in fresh)))
        sql, params = group_statement([commits[i] for i in fresh], time.time())
        conn = cur.connection
        if not first_of and not any(p.commit.idempotency_key for p in commits):
            # the lock first, as a statement of its own: a statement reads the snapshot of its start,
            # and the group's totals must be read after the last writer before it committed
            conn.cursor().execute(BulkStatements.lock)
        cur.execute(sql, params)
        self._prepared().release_lease.executemany(conn.cursor(), released)
        conn.cursor().execute("COMMIT")

        def answer() -> _Outcomes:
            rows = cur.fetchall()
            if len(rows) != len(fresh):  # cannot be: every commit has its row, or the statement failed
                raise CatalogError(f"catalog {self._shown}: a group of {len(fresh)} commits wrote {len(rows)}")
            for i, (db_id, first, version) in zip(fresh, rows, strict=True):
                outcomes[i] = (True, CommitResult(int(db_id), int(first), int(version)))
            for i, p in enumerate(commits):
                key = p.commit.idempotency_key
                if key is not None and first_of.get((p.commit.dataset, key), i) != i:
                    outcomes[i] = (True, duplicate(outcomes[first_of[(p.commit.dataset, key)]][1]))
            return outcomes

        return answer

    def _landed(self, cur: Any, keyed: set[tuple[str, str]]) -> dict[tuple[str, str], CommitResult]:
        """The earlier results of the (dataset, idempotency key) pairs that already landed."""
        names, keys = sorted({n for n, _ in keyed}), sorted({k for _, k in keyed})
        if self.dialect == "postgresql":
            cur.execute(BulkStatements.landed, {"names": names, "keys": keys})
        else:
            d = databases
            query = (
                select(datasets.c.name, d.c.idempotency_key, d.c.id, d.c.first_entry, d.c.created_version)
                .join(datasets, datasets.c.id == d.c.dataset_id)
                .where(visible(datasets, None), datasets.c.name.in_(names), d.c.idempotency_key.in_(keys))
            )
            execute(cur, self._engine.dialect, query)
        return {(name, key): CommitResult(int(i), int(f), int(v), duplicate=True)
                for name, key, i, f, v in cur.fetchall() if (name, key) in keyed}

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

    def add_containers_bulk(self, items: AddItems, site: str, *, replace: bool = False) -> int:
        """``add_containers`` for many databases in one transaction and one version."""
        return self._add(items, site, replace=replace, idempotency_key=None)

    def _add(
        self, items: AddItems, site: str, *, replace: bool, idempotency_key: str | None
    ) -> int:
        ids = [int(item[0]) for item in items]
        if len(set(ids)) != len(ids):
            twice = next(i for i, k in Counter(ids).items() if k > 1)
            raise ConflictError(
                f"database {twice} appears more than once in one add_containers call"
            )
        held = [(db_id, _container_rows(specs)) for db_id, specs, _ in items]
        stats = [(db_id, _stat_rows(st)) for db_id, _, st in items if st]
        wanted_schemas = {c.schema_id for _, specs, _ in items for c in specs}
        wanted = {(db_id, c.name) for db_id, specs, _ in items for c in specs}
        s = self._prepared()

        def work(cur: Any, v: int) -> int:
            if idempotency_key is not None:
                landed = s.landed_key.execute(cur, {"key": idempotency_key}).fetchone()
                if landed is not None:
                    raise Unchanged(int(landed[0]))
            if not items:
                raise Unchanged(v - 1)
            site_id = self._site_id(cur, site)
            found = self._require_databases(cur, ids, live=True)
            for db_id, specs, _ in items:
                n_events, dataset, _ = found[db_id]
                _check_specs(specs, n_events, f"database {db_id}")
                for c in specs:
                    check_container_path(dataset, c.path)
            self._require_schemas(cur, wanted_schemas)
            live = list(self._live_containers(cur, ids))
            clash = [row for row in live if row[1:3] in wanted]
            if clash and not replace:
                _, db_id, name, _ = clash[0]
                raise ConflictError(
                    f"database {db_id} already has a container {name!r}; "
                    "pass replace=True to supersede it"
                )
            s.retire_container.executemany(cur, ({"id": cid, "v": v} for cid, _, _, _ in clash))
            grown: dict[int, int] = {}  # dataset id -> bytes added, less those replaced
            for db_id, specs, _ in items:
                grown[found[db_id][2]] = grown.get(found[db_id][2], 0) + sum(c.size for c in specs)
            for _, db_id, _, size in clash:
                grown[found[db_id][2]] -= size
            s.add_totals.executemany(
                cur, ({"dataset_id": ds, "version": v, "dn": 0, "de": 0, "db": b} for ds, b in grown.items())
            )
            now = time.time()
            self._insert_containers(cur, v, now, held, site_id)
            s.retire_tag_stats.executemany(
                cur,
                ({"database_id": db_id, "field": r["field"], "version": v}
                 for db_id, rows in stats for r in rows),
            )  # fmt: skip
            s.insert_tag_stats.executemany(
                cur,
                ({**r, "database_id": db_id, "created_version": v}
                 for db_id, rows in stats for r in rows),
            )  # fmt: skip
            self._summarise(cur, v, items)
            if idempotency_key is not None:
                s.insert_key.execute(cur, {"key": idempotency_key, "version": v, "created": now})
            verb = "replace" if clash else "add"
            if len(items) == 1:
                names = ", ".join(c.name for c in items[0][1]) or "tag stats"
                self._log(cur, v, now, f"{verb} {names} in db {ids[0]}")
            else:
                self._log(cur, v, now, f"{verb} containers in {len(items)} databases")
            return v

        return self._write_driver(work)

    # -- helpers on the driver's cursor -----------------------------------------------

    def _summarise(self, cur: Any, version: int, items: AddItems) -> None:
        """The new summaries (level 13) of the databases a pass changed, from their live containers and
        statistics after it: what stays and what it adds; from level 17 a pass of statistics alone too, its
        line as it was and its record new."""
        s = self._prepared()
        rows = []
        for db_id, specs, stats in items:
            if not specs and not stats:
                continue
            held = [dict(zip(KEPT_COLUMNS, row, strict=True)) for row in s.live_rows.execute(cur, {"id": db_id})]
            values = [dict(zip(("field", "min", "max"), row, strict=True))
                      for row in s.live_stats.execute(cur, {"id": db_id})]
            rows.append({"database_id": db_id, "version": version, "bytes": sum(int(c["size"]) for c in held),
                         "containers": summary_names(c["name"] for c in held),
                         "record": record_text(held, values),
                         "container_ids": container_ids((c["id"], c["name"]) for c in held)})
        s.extend_summary.executemany(cur, rows)  # reads the live summary before the next statement ends it
        s.retire_summary.executemany(cur, rows)

    def _insert_containers(
        self,
        cur: Any,
        version: int,
        now: float,
        held: list[tuple[int, list[dict[str, Any]]]],
        site_id: int,
    ) -> None:
        s = self._prepared()
        s.insert_containers.executemany(
            cur,
            ({**r, "database_id": db_id, "created_version": version, "created": now}
             for db_id, rows in held for r in rows),
        )  # fmt: skip
        s.insert_replicas.executemany(
            cur,
            ({"site_id": site_id, "checked": now, "database_id": db_id, "version": version}
             for db_id, rows in held if rows),
        )  # fmt: skip

    def _log(self, cur: Any, version: int, now: float, description: str) -> None:
        self._prepared().log.execute(
            cur, {"version": version, "created": now, "description": description}
        )

    def _not_found(self, cur: Any, kind: str, name: str, column: Any) -> NotFound:
        query = select(column)
        if kind == "dataset":
            query = query.where(visible(datasets, None))
        names = [row[0] for row in execute(cur, self._engine.dialect, query).fetchall()]
        return not_found(kind, name, names)

    def _site_id(self, cur: Any, name: str) -> int:
        """The site's id, looked up in the transaction (never cached: a site may be removed)."""
        row = self._prepared().site_id.execute(cur, {"name": name}).fetchone()
        if row is None:
            raise self._not_found(cur, "site", name, sites.c.name)
        return int(row[0])

    def _require_schemas(self, cur: Any, ids: set[int]) -> None:
        unknown = ids - self._schemas
        if not unknown:
            return
        query = select(schemas.c.id).where(schemas.c.id.in_(sorted(unknown)))
        found = {int(row[0]) for row in execute(cur, self._engine.dialect, query).fetchall()}
        if unknown - found:
            raise NotFound(f"no schema with id {min(unknown - found)}")
        self._schemas |= found

    def _require_databases(
        self, cur: Any, ids: Sequence[int], *, live: bool
    ) -> dict[int, tuple[int, str, int]]:
        """{id: (n_events, dataset name, dataset id)}; NotFound for the first missing (or, if ``live``,
        deleted) one."""
        found: dict[int, tuple[int, str, int]] = {}
        if live and len(ids) == 1:  # add_containers: one database, a prepared statement
            row = self._prepared().live_database.execute(cur, {"id": ids[0]}).fetchone()
            if row is not None:
                found[ids[0]] = (int(row[0]), str(row[1]), int(row[2]))
        else:
            d = databases
            for chunk in chunks(sorted(set(ids))):
                query = (
                    select(d.c.id, d.c.n_events, datasets.c.name, datasets.c.id)
                    .join(datasets, datasets.c.id == d.c.dataset_id)
                    .where(d.c.id.in_(chunk))
                )
                if live:
                    query = query.where(visible(d, None))
                rows = execute(cur, self._engine.dialect, query).fetchall()
                found.update((int(i), (int(n), str(name), int(ds))) for i, n, name, ds in rows)
        missing = set(ids) - found.keys()
        if missing:
            raise NotFound(f"no database {min(missing)}")
        return found

    def _live_containers(self, cur: Any, ids: Sequence[int]) -> Iterator[tuple[int, int, str, int]]:
        """(id, database id, name, size) of the live containers of the databases ``ids``."""
        if len(ids) == 1:
            rows = self._prepared().live_containers.execute(cur, {"id": ids[0]}).fetchall()
        else:
            c = containers
            rows = []
            for chunk in chunks(ids):
                query = select(c.c.id, c.c.database_id, c.c.name, c.c.size).where(
                    c.c.database_id.in_(chunk), visible(c, None)
                )
                rows += execute(cur, self._engine.dialect, query).fetchall()
        for cid, db_id, name, size in rows:
            yield int(cid), int(db_id), name, int(size)
