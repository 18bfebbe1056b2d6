"""Listing many databases costs a fixed number of queries; the benchmark runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from catalog_samples import DATASET, SITE, seed
from sqlalchemy import event

from giod.catalog import Catalog
from giod_bench import catalog as bench

N_DATABASES = 500


@contextmanager
def _selects(catalog: Catalog) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append(statement)

    event.listen(catalog._engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(catalog._engine, "before_cursor_execute", count)


def test_listing_many_databases_takes_three_queries(ready: Catalog) -> None:
    v = seed(ready, N_DATABASES)
    with _selects(ready) as seen:
        listed = ready.databases(DATASET)
    assert len(seen) == 3
    assert [d.id for d in listed] == list(range(1, N_DATABASES + 1))
    assert all(len(d.containers) == 4 and len(d.tag_stats) == 8 for d in listed)
    site_id = ready.site(SITE).id
    assert all(c.site_ids == (site_id,) for d in listed for c in d.containers)
    assert listed[41].tag_stats["ht"] == (42.0, 43.0)
    assert listed[41].parameters == {"i": 42}
    reco = listed[41].container("reco")
    assert reco is not None
    assert (reco.program, reco.parameters, reco.created) == ("seed.reco", {"i": 42}, 42.0)

    with _selects(ready) as seen:
        at_version = ready.databases(DATASET, v)
        one = ready.database(300, v)
        summary = ready.dataset_summary(DATASET, v)
    assert len(seen) == 3 + 3 + 1  # the summary: the dataset's row with its totals, one statement
    assert at_version == listed
    assert one == listed[299]
    assert summary == {
        "n_events": 10 * N_DATABASES,
        "n_databases": N_DATABASES,
        "bytes": 4 * 1_000 * N_DATABASES,
    }


def test_bench_reports_each_step(catalog_url: str) -> None:
    progress: list[tuple[int, int]] = []
    results = bench.run(
        catalog_url, n_databases=25, step=10, progress=lambda d, t: progress.append((d, t))
    )
    assert [r["databases"] for r in results] == [10, 20, 25]
    assert progress == [(10, 25), (20, 25), (25, 25)]
    assert all(r["rate"] > 0 and r["seconds"] > 0 and r["list_seconds"] > 0 for r in results)
    with Catalog.open(catalog_url) as catalog:
        (dataset,) = catalog.datasets()
        listed = catalog.databases(dataset.name)
        assert len(listed) == 25
        assert all(len(d.containers) == 4 and len(d.tag_stats) == 8 for d in listed)
    assert (
        bench.run(catalog_url, n_databases=1, step=5)[0]["databases"] == 1
    )  # runs twice on one catalog


def test_a_commit_reads_nothing_back(ready: Catalog, make_commit) -> None:
    """A warm commit is one statement per table it writes, and not one SELECT."""
    if ready.dialect != "sqlite":
        pytest.skip("statement trace of the SQLite driver")
    ready.commit_database(make_commit(5))  # warms the site and schema caches
    seen: list[str] = []

    def trace(dbapi_connection, record, proxy) -> None:
        dbapi_connection.set_trace_callback(seen.append)

    event.listen(ready._engine, "checkout", trace)
    try:
        ready.commit_database(make_commit(5, idempotency_key="k1"))
    finally:
        event.remove(ready._engine, "checkout", trace)
        raw = ready._engine.raw_connection()
        raw.driver_connection.set_trace_callback(None)
        raw.close()
    kinds = list(dict.fromkeys(" ".join(s.split()[:3]).upper() for s in seen))
    assert kinds == [
        "BEGIN IMMEDIATE",
        "UPDATE FEDERATION SET",
        "UPDATE DATASETS SET",
        "INSERT INTO DATABASES",
        "INSERT INTO CONTAINERS",
        "INSERT INTO REPLICAS",
        "INSERT INTO DATABASE_SUMMARIES",  # the listing's line (level 13)
        "INSERT INTO TAG_STATS",
        "INSERT INTO DATASET_TOTALS",  # the dataset's totals, from its latest row (level 9)
        "INSERT INTO VERSIONS",
        "COMMIT",
    ]


def test_durability_modes_side_by_side(tmp_path: Path, catalog_url: str, capsys) -> None:
    postgres = None if catalog_url.startswith("sqlite") else catalog_url
    rates = bench.durability(tmp_path, n_databases=3, rounds=2, postgres=postgres)
    expected = ["SQLite synchronous=FULL", "SQLite synchronous=NORMAL"]
    if postgres:
        expected += ["PostgreSQL synchronous_commit=on", "PostgreSQL synchronous_commit=off"]
    assert list(rates) == expected
    assert all(len(r) == 2 and min(r) > 0 for r in rates.values())
    assert len(list(tmp_path.glob("c*_FULL.db"))) == 2  # a fresh SQLite catalog each round
    if postgres:
        with Catalog.open(postgres) as catalog:
            assert len(catalog.datasets()) == 4  # 2 rounds x 2 settings, one dataset each
    else:
        bench.main(["--databases", "2", "--rounds", "1"])
        printed = capsys.readouterr().out.splitlines()
        assert [line.split(" median")[0].strip() for line in printed] == expected
