"""Group commit: concurrent committers of one process share one transaction and one fsync.

Every commit still lands once, with its own version; a commit that fails is
rolled back alone. ``commit_databases`` registers many in one transaction,
all or none.
"""

from __future__ import annotations

import itertools
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from catalog_samples import DATASET, SITE, specs
from sqlalchemy import event, select

from giod.catalog import Catalog, CommitResult, DatabaseCommit
from giod.catalog.tables import federation
from giod.errors import NotFound

THREADS = 8
_mp = multiprocessing.get_context("fork")


def _prepare(catalog: Catalog) -> int:
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    catalog.create_dataset(DATASET, schema_id)
    catalog.add_site(SITE, "file:///srv/giod")
    return schema_id


def _commit(schema_id: int, tag: str, n: int = 5, **fields: Any) -> DatabaseCommit:
    return DatabaseCommit(DATASET, n, SITE, specs(tag, n, schema_id), {"ht": (1.0, 2.0)}, **fields)


@contextmanager
def _transactions(catalog: Catalog) -> Iterator[Callable[[], int]]:
    """Count the transactions that ``catalog`` runs meanwhile.

    SQLite: the COMMITs in the driver's trace (a writer waiting for the lock
    retries, checking out a connection each time). PostgreSQL: connections
    checked out (a writer waiting for the lock blocks in its transaction).
    """
    seen: list[str] = []

    def checkout(conn: Any, _record: Any, _proxy: Any) -> None:
        if catalog.dialect == "sqlite":
            conn.set_trace_callback(lambda sql: seen.append(sql.strip().upper()))
        else:
            seen.append("COMMIT")

    event.listen(catalog._engine, "checkout", checkout)
    try:
        yield lambda: sum(1 for sql in seen if sql == "COMMIT")
    finally:
        event.remove(catalog._engine, "checkout", checkout)


def _queued_behind_lock(catalog: Catalog, holder: Catalog, commits: list[DatabaseCommit]
                        ) -> list[CommitResult | Exception]:
    """Commit ``commits`` from threads while ``holder`` holds the write lock; release it
    once all but the first (which leads and waits for the lock) are queued behind it."""
    def one(c: DatabaseCommit) -> CommitResult | Exception:
        try:
            return catalog.commit_database(c)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(len(commits)) as pool:
        with holder._writer.begin() as conn:  # SQLite: BEGIN IMMEDIATE; PostgreSQL: row lock
            conn.execute(select(federation.c.version).with_for_update())
            futures = [pool.submit(one, c) for c in commits]
            deadline = time.monotonic() + 30
            while len(getattr(catalog, "_group_queue", ())) < len(commits) - 1:
                assert time.monotonic() < deadline, "the commits did not queue behind the leader"
                time.sleep(0.005)
        return [f.result(timeout=60) for f in futures]


def _elsewhere(url: str) -> str:
    """``url`` as another process opens it: on PostgreSQL with its own engine (the catalogs of one process
    share one per URL and timeout), so that what its connections run is not counted with ours."""
    return url if url.startswith("sqlite") else f"{url}&timeout=59"


def test_concurrent_commits_share_a_transaction(catalog_url: str) -> None:
    with Catalog.open(catalog_url) as catalog, Catalog.open(_elsewhere(catalog_url)) as holder:
        schema_id = _prepare(catalog)
        commits = [_commit(schema_id, f"t{i}", n=1 + i) for i in range(THREADS)]
        with _transactions(catalog) as committed:
            results = _queued_behind_lock(catalog, holder, commits)
        assert all(isinstance(r, CommitResult) for r in results)
        versions = sorted(r.version for r in results)  # type: ignore[union-attr]
        assert versions == list(range(4, 4 + THREADS))
        # the leader alone, then the seven that queued behind it: two transactions, two fsyncs
        assert committed() == 2
        listed = catalog.databases(DATASET)
        assert sorted(d.id for d in listed) == sorted(r.database_id for r in results)  # type: ignore[union-attr]
        assert {d.id: d.created_version for d in listed} == {
            r.database_id: r.version for r in results  # type: ignore[union-attr]
        }
        assert [v.version for v in catalog.versions()][:THREADS] == versions[::-1]


def test_a_failing_commit_leaves_the_others_of_its_group_intact(catalog_url: str) -> None:
    with Catalog.open(catalog_url) as catalog, Catalog.open(catalog_url) as holder:
        schema_id = _prepare(catalog)
        bad = {2, 5}  # refused after their database row is written: the savepoint undoes it
        commits = [
            _commit(schema_id if i not in bad else 999, f"t{i}", n=10) for i in range(THREADS)
        ]
        results = _queued_behind_lock(catalog, holder, commits)
        for i, r in enumerate(results):
            if i in bad:
                assert isinstance(r, NotFound) and "no schema with id 999" in str(r)
            else:
                assert isinstance(r, CommitResult)
        good = [r for r in results if isinstance(r, CommitResult)]
        assert sorted(r.version for r in good) == list(range(4, 4 + len(good)))
        assert sorted(r.first_entry for r in good) == list(range(0, 10 * len(good), 10))
        assert catalog.version() == 3 + len(good)
        assert len(catalog.databases(DATASET)) == len(good)
        assert catalog.dataset_summary(DATASET)["n_events"] == 10 * len(good)
        # nothing of the refused ones: no database, container or entry range
        again = catalog.commit_database(_commit(schema_id, "after", n=1))
        assert again.first_entry == 10 * len(good)


def test_a_duplicate_key_in_a_group_returns_the_first_result(catalog_url: str) -> None:
    with Catalog.open(catalog_url) as catalog, Catalog.open(catalog_url) as holder:
        schema_id = _prepare(catalog)
        commits = [_commit(schema_id, f"t{i}", idempotency_key=f"k{i % 3}") for i in range(6)]
        results = _queued_behind_lock(catalog, holder, commits)
        assert all(isinstance(r, CommitResult) for r in results)
        fresh = [r for r in results if not r.duplicate]  # type: ignore[union-attr]
        assert len(fresh) == 3
        for i, r in enumerate(results):
            assert r.database_id == results[i % 3].database_id  # type: ignore[union-attr]
        assert catalog.version() == 3 + 3


def _threads_committing(worker: int, url: str, schema_id: int) -> list[tuple[int, int, int, int, int]]:
    def thread(t: int) -> list[tuple[int, int, int, int, int]]:
        out = []
        for i in range(5):
            n = 1 + (worker * 31 + t * 7 + i) % 11
            r = catalog.commit_database(_commit(schema_id, f"p{worker}-{t}-{i}", n=n))
            out.append((t, r.database_id, r.first_entry, n, r.version))
        return out

    with Catalog.open(url, create=False) as catalog, ThreadPoolExecutor(4) as pool:
        return [row for rows in pool.map(thread, range(4)) for row in rows]


def test_threads_of_several_processes_each_land_once(catalog_url: str) -> None:
    with Catalog.open(catalog_url) as catalog:
        schema_id = _prepare(catalog)
    workers = 3
    queue = _mp.Queue()
    start = _mp.Event()

    def main(worker: int) -> None:
        try:
            start.wait(30)
            queue.put((worker, _threads_committing(worker, catalog_url, schema_id), None))
        except Exception as exc:
            queue.put((worker, None, f"{type(exc).__name__}: {exc}"))

    processes = [_mp.Process(target=main, args=(w,)) for w in range(workers)]
    for p in processes:
        p.start()
    start.set()
    reports = [queue.get(timeout=120) for _ in processes]
    for p in processes:
        p.join(30)
    assert [error for _, _, error in reports] == [None] * workers
    rows = [row for _, out, _ in reports for row in out]
    assert len(rows) == workers * 4 * 5
    assert sorted(r[4] for r in rows) == list(range(4, 4 + len(rows)))  # one version each
    ranges = sorted((first, first + n) for _, _, first, n, _ in rows)
    assert ranges[0][0] == 0
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))  # contiguous, disjoint
    for worker, out, _ in reports:  # each thread's commits: versions strictly increase
        for _, mine in itertools.groupby(sorted(out, key=lambda r: r[0]), key=lambda r: r[0]):
            versions = [r[4] for r in mine]
            assert versions == sorted(set(versions)), worker
    with Catalog.open(catalog_url) as catalog:
        assert sorted(d.id for d in catalog.databases(DATASET)) == sorted(r[1] for r in rows)


def test_commit_databases_registers_all_or_none(catalog_url: str) -> None:
    with Catalog.open(catalog_url) as catalog:
        schema_id = _prepare(catalog)
        first = catalog.commit_database(_commit(schema_id, "k", idempotency_key="k"))
        results = catalog.commit_databases(
            [_commit(schema_id, f"b{i}", n=2 + i) for i in range(4)]
            + [_commit(schema_id, "k-again", idempotency_key="k")]
        )
        assert [r.version for r in results[:4]] == [5, 6, 7, 8]
        assert [r.first_entry for r in results[:4]] == [5, 7, 10, 14]
        assert results[4] == CommitResult(first.database_id, 0, 4, duplicate=True)
        assert catalog.version() == 8
        with pytest.raises(NotFound, match="no schema with id 999"):
            catalog.commit_databases(
                [_commit(schema_id, "c0"), _commit(999, "c1"), _commit(schema_id, "c2")]
            )
        assert catalog.version() == 8
        assert len(catalog.databases(DATASET)) == 5
        assert catalog.commit_databases([]) == []


def test_threads_racing_without_a_held_lock_all_land(catalog_url: str) -> None:
    with Catalog.open(catalog_url) as catalog:
        schema_id = _prepare(catalog)
        barrier = threading.Barrier(THREADS)

        def thread(t: int) -> list[int]:
            barrier.wait(30)
            return [catalog.commit_database(_commit(schema_id, f"r{t}-{i}")).version for i in range(10)]

        with ThreadPoolExecutor(THREADS) as pool:
            per_thread = list(pool.map(thread, range(THREADS)))
        assert sorted(v for vs in per_thread for v in vs) == list(range(4, 4 + THREADS * 10))
        assert all(vs == sorted(vs) for vs in per_thread)
        assert catalog.dataset_summary(DATASET)["n_databases"] == THREADS * 10


def _group_sizes(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each group ``catalog`` runs from now on, in order."""
    sizes: list[int] = []
    run = catalog._run_group
    monkeypatch.setattr(catalog, "_run_group", lambda batch: (sizes.append(len(batch)), run(batch)))
    return sizes


def test_a_leader_waits_for_as_many_callers_as_the_group_before(
    catalog_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Callers committing in a loop come back as one group, not two alternating halves."""
    from giod.catalog import commits

    monkeypatch.setattr(commits, "GROUP_WAIT", 60.0)  # long: only the callers' arrival ends the wait
    with Catalog.open(catalog_url) as catalog:
        schema_id = _prepare(catalog)
        sizes = _group_sizes(catalog, monkeypatch)
        alone = catalog.commit_database(_commit(schema_id, "alone"))  # nobody before it: no wait
        assert sizes == [1] and catalog._group_callers == 1
        catalog._group_callers = 3  # as after a group of three
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(lambda i: catalog.commit_database(_commit(schema_id, f"t{i}")), range(3)))
        assert sizes == [1, 3]  # whoever led waited for the other two
        assert sorted(r.version for r in results) == [alone.version + 1, alone.version + 2, alone.version + 3]
        assert catalog.dataset_summary(DATASET)["n_databases"] == 4


class _Counted(threading.Condition):
    """A condition that counts its ``notify`` calls: the wakes of a leader waiting for its group."""

    def __init__(self, lock: Any):
        super().__init__(lock)
        self.notified = 0

    def notify(self, n: int = 1) -> None:
        self.notified += 1
        super().notify(n)


def test_a_waiting_leader_is_woken_once_its_group_has_queued(
    catalog_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader waiting for the callers of the group before is woken when the last of them queues, not by
    each (every wake a hand-off of the interpreter lock while the group's callers prepare their commits)."""
    from giod.catalog import commits

    monkeypatch.setattr(commits, "GROUP_WAIT", 60.0)  # long: only the callers' arrival ends the wait
    with Catalog.open(catalog_url) as catalog:
        schema_id = _prepare(catalog)
        sizes = _group_sizes(catalog, monkeypatch)
        counted = _Counted(catalog._group_lock)
        catalog._group_arrived = counted
        catalog._group_callers = THREADS  # as after a group of eight
        with ThreadPoolExecutor(THREADS) as pool:
            results = list(pool.map(lambda i: catalog.commit_database(_commit(schema_id, f"t{i}")), range(THREADS)))
        assert sizes == [THREADS]
        assert counted.notified == 1  # one a caller before: eight
        assert len({r.version for r in results}) == THREADS
        assert catalog.dataset_summary(DATASET)["n_databases"] == THREADS


def test_a_queued_commit_waits_on_a_lock_it_is_given_held() -> None:
    """A follower waits by taking its lock again and is woken by one release (an event's waiter, woken, also
    takes the event's own lock, which the waking thread still holds)."""
    from giod.catalog.commits import _Pending

    pending = _Pending(lambda cur, version: version)
    assert not pending.wake.acquire(blocking=False)  # held from the start: its owner would wait
    woken = threading.Thread(target=pending.wake.acquire)
    woken.start()
    pending.wake.release()  # from another thread, as the leader does
    woken.join(timeout=10)
    assert not woken.is_alive()
