"""Several processes writing one catalog at once, and writers that hold the lock."""

from __future__ import annotations

import itertools
import multiprocessing
from collections.abc import Callable
from typing import Any

import pytest
from catalog_samples import DATASET, SITE, specs
from sqlalchemy import select

from giod.catalog import Catalog, DatabaseCommit
from giod.catalog.tables import federation
from giod.errors import CatalogError

WORKERS = 4
COMMITS = 10

# fork: the workers are plain functions of this module, and start in milliseconds
_mp = multiprocessing.get_context("fork")


def _prepare(url: str) -> int:
    """Schema, dataset and site; returns the schema id."""
    with Catalog.open(url) as catalog:
        schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
        catalog.create_dataset(DATASET, schema_id)
        catalog.add_site(SITE, "file:///srv/giod")
    return schema_id


def _in_workers(target: Callable[..., list[Any]], *args: Any) -> list[list[Any]]:
    """Run ``target(url, worker, ...)`` in WORKERS processes released together."""
    queue = _mp.Queue()
    start = _mp.Event()

    def main(worker: int) -> None:
        try:
            start.wait(30)
            queue.put((worker, target(worker, *args), None))
        except Exception as exc:
            queue.put((worker, None, f"{type(exc).__name__}: {exc}"))

    processes = [_mp.Process(target=main, args=(w,)) for w in range(WORKERS)]
    for p in processes:
        p.start()
    start.set()
    reports = [queue.get(timeout=120) for _ in processes]
    for p in processes:
        p.join(30)
    errors = [error for _, _, error in reports if error]
    assert errors == []
    assert [p.exitcode for p in processes] == [0] * WORKERS
    return [out for _, out, _ in sorted(reports, key=lambda r: r[0])]


def _commit_many(worker: int, url: str, schema_id: int) -> list[tuple[int, int, int, int]]:
    done = []
    with Catalog.open(url, create=False) as catalog:
        for i in range(COMMITS):
            n = 1 + (worker * COMMITS + i) % 13
            commit = DatabaseCommit(
                DATASET,
                n,
                SITE,
                specs(f"w{worker}-{i}", n, schema_id),
                {"ht": (float(i), float(i + 1))},
                writer=f"worker{worker}",
            )
            result = catalog.commit_database(commit)
            done.append((result.database_id, result.first_entry, n, result.version))
    return done


def test_concurrent_commits_from_processes(catalog_url: str) -> None:
    schema_id = _prepare(catalog_url)
    per_worker = _in_workers(_commit_many, catalog_url, schema_id)
    results = [r for out in per_worker for r in out]
    assert len(results) == WORKERS * COMMITS

    ids = [r[0] for r in results]
    versions = sorted(r[3] for r in results)
    assert len(set(ids)) == len(ids)
    assert versions == list(range(4, 4 + WORKERS * COMMITS))  # 3 set-up versions before

    ranges = sorted((first, first + n) for _, first, n, _ in results)
    assert ranges[0][0] == 0
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))  # contiguous and disjoint

    with Catalog.open(catalog_url) as catalog:
        listed = catalog.databases(DATASET)
        assert [(d.first_entry, d.stop_entry) for d in listed] == ranges
        assert {d.id: d.created_version for d in listed} == {r[0]: r[3] for r in results}
        assert catalog.version() == versions[-1]
        assert catalog.dataset_summary(DATASET)["n_events"] == ranges[-1][1]
        # each worker's own commits got increasing versions
        for out in per_worker:
            assert [r[3] for r in out] == sorted(r[3] for r in out)


def _commit_keys(worker: int, url: str, schema_id: int) -> list[tuple[str, int, bool]]:
    keys = [f"run1-file{k}" for k in range(10)]
    keys = keys[worker * 3 :] + keys[: worker * 3]  # each worker starts elsewhere
    with Catalog.open(url, create=False) as catalog:
        out = []
        for key in keys:
            commit = DatabaseCommit(
                DATASET, 5, SITE, specs(f"{key}-{worker}", 5, schema_id), idempotency_key=key
            )
            result = catalog.commit_database(commit)
            out.append((key, result.database_id, result.duplicate))
        return out


def test_concurrent_retries_with_one_key_land_once(catalog_url: str) -> None:
    schema_id = _prepare(catalog_url)
    results = [r for out in _in_workers(_commit_keys, catalog_url, schema_id) for r in out]
    by_key: dict[str, set[int]] = {}
    fresh: dict[str, int] = {}
    for key, database_id, duplicate in results:
        by_key.setdefault(key, set()).add(database_id)
        fresh[key] = fresh.get(key, 0) + (not duplicate)
    assert all(len(ids) == 1 for ids in by_key.values())
    assert fresh == {key: 1 for key in by_key}
    with Catalog.open(catalog_url) as catalog:
        assert len(catalog.databases(DATASET)) == 10
        assert catalog.version() == 3 + 10


def _open_and_add_site(worker: int, url: str) -> list[int]:
    with Catalog.open(url) as catalog:
        catalog.add_site(f"site{worker}", f"file:///srv/{worker}")
        return [catalog.version()]


def test_concurrent_openers_create_one_catalog(catalog_url: str) -> None:
    _in_workers(_open_and_add_site, catalog_url)
    with Catalog.open(catalog_url, create=False) as catalog:
        assert catalog.version() == WORKERS
        assert sorted(s.name for s in catalog.sites()) == [f"site{w}" for w in range(WORKERS)]
        assert [v.version for v in catalog.versions()] == list(range(WORKERS, 0, -1))
        with catalog._engine.connect() as conn:
            assert conn.execute(select(federation.c.id)).scalars().all() == [1]


def test_a_held_lock_times_out_cleanly_and_reads_go_on(catalog_url: str) -> None:
    schema_id = _prepare(catalog_url)
    sep = "&" if "?" in catalog_url else "?"
    commit = DatabaseCommit(DATASET, 5, SITE, specs("late", 5, schema_id))
    with (
        Catalog.open(catalog_url) as holder,
        Catalog.open(f"{catalog_url}{sep}timeout=0.3") as other,
    ):
        with holder._writer.begin() as conn:  # SQLite: BEGIN IMMEDIATE; PostgreSQL: row lock
            conn.execute(select(federation.c.version).with_for_update())
            assert other.version() == 3  # readers are not blocked by a writer
            locked = r"stayed locked by other writers for more than 0\.3 s; try again later$"
            with pytest.raises(CatalogError, match=locked):
                other.add_site("late", "file:///srv")
            with pytest.raises(CatalogError, match=locked):  # the commit path, on the driver
                other.commit_database(commit)
        assert other.add_site("late", "file:///srv").name == "late"
        assert other.commit_database(commit).version == 5
        assert holder.version() == 5
