"""Writers' leases in the catalog: taken, renewed, released, and never revived once expired."""

from __future__ import annotations

import time

import pytest

from giod.catalog import Catalog


def test_leases_live_renew_expire_and_release(catalog: Catalog) -> None:
    version = catalog.version()
    # a long first term, so a slow machine cannot expire it before it is listed
    short = catalog.take_lease("local", "qcd/a/", "host:1", 600)
    long = catalog.take_lease("local", "qcd/b/", "host:2", 600)
    other = catalog.take_lease("far", "qcd/c/", "host:3", 600)
    assert short.covers("qcd/a/raw.parquet") and not short.covers("qcd/ab/raw.parquet")
    assert [x.id for x in catalog.leases("local")] == [short.id, long.id]
    assert [x.id for x in catalog.leases()] == [short.id, long.id, other.id]
    assert catalog.version() == version  # liveness is not federation content

    assert catalog.renew_leases([short.id], 0.2) == {short.id}  # a renewal sets the term from now
    deadline = time.monotonic() + 30
    while short.id in {x.id for x in catalog.leases()} and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [x.id for x in catalog.leases(expired=True)] == [short.id]
    # an expired lease is never revived: gc may already have judged its files
    assert catalog.renew_leases([short.id, long.id], 600) == {long.id}
    assert short.id not in {x.id for x in catalog.leases()}
    renewed = {x.id: x for x in catalog.leases()}[long.id]
    assert renewed.expires >= long.expires

    catalog.release_lease(long.id)
    catalog.release_lease(long.id)  # twice is harmless
    assert [x.id for x in catalog.leases()] == [other.id]
    assert catalog.drop_expired_leases() == 1 and catalog.leases(expired=True) == []


def test_a_level_4_catalog_gains_leases(catalog_url: str) -> None:
    from sqlalchemy import inspect

    from giod.catalog import migrations
    from giod.catalog.engine import create_catalog_engine, parse_url

    engine = create_catalog_engine(parse_url(catalog_url))
    with engine.begin() as conn:
        assert migrations.migrate(conn, target=4) == (None, 4)
        assert not inspect(conn).has_table("leases")
    engine.dispose()
    with Catalog.open(catalog_url, create=False) as catalog:
        with catalog._engine.connect() as conn:
            assert migrations.read_level(conn) == migrations.latest_level() >= 5
        assert catalog.version() == 0 and catalog.leases() == []
        lease = catalog.take_lease("local", "qcd/x", "host:1", 60)
        assert [x.id for x in catalog.leases("local")] == [lease.id] and catalog.version() == 0


def test_a_forked_child_cannot_release_or_confirm_its_parents_lease(catalog: Catalog) -> None:
    import os

    import pytest

    from giod.catalog.leases import hold_lease
    from giod.errors import StorageError

    lease = hold_lease(catalog, "local", "qcd/p", "host:1", 600)
    assert lease is not None
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            lease.release()
            with pytest.raises(StorageError, match="not held by this process"):
                lease.confirm()
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [x.id for x in catalog.leases()] == [lease.record.id]
    lease.confirm()
    lease.release()
    assert catalog.leases() == []


def test_a_commit_releases_a_lease_in_its_own_transaction(ready: Catalog, make_commit) -> None:
    from tests.catalog.test_catalog_group_commit import _transactions

    from giod.errors import NotFound

    lease = ready.take_lease("local", "qcd/a/", "host:1", 600)
    kept = ready.take_lease("local", "qcd/b/", "host:2", 600)
    with _transactions(ready) as count:
        first = ready.commit_database(make_commit(idempotency_key="k"), release_lease=lease.id)
    assert count() == 1  # the commit and the release: one transaction, one fsync
    assert [x.id for x in ready.leases()] == [kept.id] and not first.duplicate

    # a retried commit that had landed (its transaction rolled back) still releases
    again = ready.take_lease("local", "qcd/c/", "host:3", 600)
    repeat = ready.commit_database(make_commit(idempotency_key="k"), release_lease=again.id)
    assert repeat.duplicate and repeat.database_id == first.database_id
    assert [x.id for x in ready.leases()] == [kept.id]

    # a refused commit leaves the lease held: its files are still the writer's
    with pytest.raises(NotFound):
        ready.commit_database(make_commit(dataset="nowhere"), release_lease=kept.id)
    assert [x.id for x in ready.leases()] == [kept.id]


def test_commits_grouped_from_threads_release_each_their_lease(ready: Catalog, make_commit) -> None:
    from concurrent.futures import ThreadPoolExecutor

    held = [ready.take_lease("local", f"qcd/{i}/", f"host:{i}", 600) for i in range(8)]
    other = ready.take_lease("local", "qcd/other/", "host:9", 600)
    commits = [make_commit() for _ in held]
    with ThreadPoolExecutor(len(held)) as pool:
        results = list(pool.map(lambda p: ready.commit_database(p[0], release_lease=p[1].id), zip(commits, held)))
    assert len({r.version for r in results}) == len(held)
    assert [x.id for x in ready.leases()] == [other.id]
