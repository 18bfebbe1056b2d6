"""A group of commits registered table by table gives what one commit after another gives.

``giod.catalog.bulk``: one statement per table for a whole group, with the
savepoint path as the fallback for anything it leaves out or would refuse.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from catalog_samples import DATASET
from sqlalchemy import event

from giod.catalog import Catalog, DatabaseCommit
from giod.catalog.bulk import Refused
from giod.errors import NotFound


@pytest.mark.parametrize("one_statement", [True, False], ids=["one statement", "per table"])
def test_a_bulk_group_equals_commits_one_by_one(
    ready: Catalog, make_commit: Callable[..., DatabaseCommit], one_statement: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ready, "_one_statement", one_statement)  # PostgreSQL's two forms; SQLite has one
    landed = ready.commit_database(make_commit(7, idempotency_key="k0"))
    group = [
        make_commit(5, idempotency_key="k1"),
        make_commit(3),
        make_commit(9, idempotency_key="k0"),  # landed before the group
        make_commit(4, idempotency_key="k1"),  # the same key earlier in the group
        make_commit(6, tag_stats={"ht": (math.nan, 5.0)}),
    ]
    before = ready.version()
    # the bulk path itself, not its fallback: a Refused here would fail the test
    outcomes = ready._bulk_attempt([ready._commit_work(c).prepared for c in group])
    assert all(ok for ok, _ in outcomes)
    results = [value for _, value in outcomes]
    assert [r.version for r in results] == [before + 1, before + 2, landed.version, before + 1, before + 3]
    assert [r.duplicate for r in results] == [False, False, True, True, False]
    assert results[2].database_id == landed.database_id
    assert results[3].database_id == results[0].database_id
    assert ready.version() == before + 3
    dbs = ready.databases(DATASET)
    assert [(db.first_entry, db.n_events) for db in dbs] == [(0, 7), (7, 5), (12, 3), (15, 6)]
    assert [db.id for db in dbs[1:]] == [results[0].database_id, results[1].database_id, results[4].database_id]
    for db, commit in zip(dbs[1:], (group[0], group[1], group[4]), strict=True):
        assert [c.name for c in db.containers] == [c.name for c in commit.containers]
        assert [c.path for c in db.containers] == [c.path for c in commit.containers]
        assert all(len(c.site_ids) == 1 for c in db.containers)
        assert db.parameters == {"seed": 1}
    assert dbs[3].tag_stats["ht"] == (-math.inf, 5.0)
    log = [v.description for v in ready.versions(3)]
    assert log == [f"commit {DATASET} db {r.database_id}" for r in (results[4], results[1], results[0])]
    assert ready.dataset_summary(DATASET) == {"n_events": 21, "n_databases": 4, "bytes": sum(db.bytes for db in dbs)}
    assert ready.dataset_summary(DATASET, before + 1)["n_events"] == 12


def test_a_refusal_goes_to_the_savepoint_path(ready: Catalog, make_commit: Callable[..., DatabaseCommit]) -> None:
    bad = make_commit(2, dataset="nope")
    with pytest.raises(Refused):
        ready._bulk_attempt([ready._commit_work(c).prepared for c in (make_commit(1), bad)])
    assert ready.databases(DATASET) == []
    with pytest.raises(NotFound, match="no dataset named 'nope'"):
        ready.commit_databases([make_commit(1), bad])
    assert ready.databases(DATASET) == []  # all or none
    good = ready.commit_databases([make_commit(1), make_commit(2)])
    assert [r.first_entry for r in good] == [0, 1]


def test_a_postgresql_group_waits_for_one_round_trip(
    ready: Catalog, make_commit: Callable[..., DatabaseCommit], tmp_path: Path
) -> None:
    """PostgreSQL: the BEGIN, the lock, the group's statement, the release of its leases and the COMMIT go
    behind one Sync (psycopg, opening the transaction itself, waits for its BEGIN alone); the connection
    goes back to the pool as it came, after a refusal too."""
    if ready.dialect != "postgresql":
        pytest.skip("PostgreSQL's pipeline")
    leases = [ready.take_lease("local", f"qcd/{i}/", f"host:{i}", 600) for i in range(2)]
    kept = ready.take_lease("local", "qcd/kept/", "host:9", 600)
    group = [ready._commit_work(make_commit(3 + i), leases[i].id).prepared for i in range(2)]
    trace = tmp_path / "libpq.trace"
    with trace.open("w") as out:

        def checkout(conn: Any, _record: Any, _proxy: Any) -> None:
            conn.pgconn.trace(out.fileno())

        event.listen(ready._engine, "checkout", checkout)
        try:
            outcomes = ready._bulk_attempt(group)
        finally:
            event.remove(ready._engine, "checkout", checkout)
            raw = ready._engine.raw_connection()
            raw.driver_connection.pgconn.untrace()  # type: ignore[union-attr]
            raw.close()
    sent = [line.split("\t") for line in trace.read_text().splitlines()]
    assert sum(1 for fields in sent if "F" in fields and "Sync" in fields) == 1
    assert [value.first_entry for _, value in outcomes] == [0, 3]
    assert [x.id for x in ready.leases()] == [kept.id]  # released by the group's own transaction

    def pooled_as_before() -> None:
        raw = ready._engine.raw_connection()
        try:
            conn = raw.driver_connection
            assert conn is not None and not conn.autocommit and conn.info.transaction_status == 0
        finally:
            raw.close()

    pooled_as_before()
    with pytest.raises(Refused):
        ready._bulk_attempt([ready._commit_work(c).prepared for c in (make_commit(1), make_commit(2, dataset="nope"))])
    pooled_as_before()
    assert [x.id for x in ready.leases()] == [kept.id] and len(ready.databases(DATASET)) == 2
