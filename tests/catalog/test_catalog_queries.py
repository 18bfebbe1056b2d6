"""Listing many databases costs a fixed number of queries; the benchmark runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from catalog_samples import DATASET, SITE
from sqlalchemy import Connection, Table, event, insert, update

from giod.bench import catalog as bench
from giod.catalog import Catalog
from giod.catalog.tables import containers, databases, federation, replicas, tag_stats, versions

N_DATABASES = 2_000
CONTAINERS = ("raw.tracker", "raw.calo", "reco", "tag")
TAGS = ("njets", "ht", "lead_jet_pt", "mjj", "met", "nmuons", "nelectrons", "ntracks")


def _seed(catalog: Catalog, n: int) -> int:
    """Write ``n`` databases straight into the tables in one transaction (a commit per
    database through the API would take most of the test's time); returns their version."""
    dataset = catalog.dataset(DATASET)
    site_id = catalog.site(SITE).id
    v = catalog.version() + 1
    rows = [
        {
            "id": i,
            "dataset_id": dataset.id,
            "first_entry": 10 * (i - 1),
            "n_events": 10,
            "bytes": 4_000,
            "created": 0.0,
            "created_version": v,
            "writer": "",
            "program": "",
            "program_version": "",
            "parameters": json.dumps({"i": i}),
        }
        for i in range(1, n + 1)
    ]
    held = [
        {
            "id": 4 * (i - 1) + k + 1,
            "database_id": i,
            "name": name,
            "path": f"{i}/{name}",
            "checksum": "crc32c:00000000",
            "size": 1_000,
            "cluster_entries": "[10]",
            "schema_id": dataset.schema_id,
            "created_version": v,
        }
        for i in range(1, n + 1)
        for k, name in enumerate(CONTAINERS)
    ]
    stats = [
        {"database_id": i, "field": f, "created_version": v, "min": float(i), "max": i + 1.0}
        for i in range(1, n + 1)
        for f in TAGS
    ]
    good = [
        {"container_id": c["id"], "site_id": site_id, "state": "good", "checked": None}
        for c in held
    ]
    with catalog._engine.begin() as conn:
        for table, values in (
            (databases, rows),
            (containers, held),
            (replicas, good),
            (tag_stats, stats),
        ):
            _bulk_insert(conn, table, values)
        conn.execute(update(federation).values(version=v))
        conn.execute(insert(versions).values(version=v, created=0.0, description="seed"))
    return v


def _bulk_insert(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """COPY (PostgreSQL) or a driver executemany (SQLite): seeding stays well under a second."""
    columns = list(rows[0])
    raw = conn.connection.driver_connection
    if conn.dialect.name == "postgresql":
        copy_in = f"COPY {table.name} ({', '.join(columns)}) FROM STDIN"
        with raw.cursor() as cursor, cursor.copy(copy_in) as copy:
            for row in rows:
                copy.write_row([row[c] for c in columns])
    else:
        compiled = insert(table).compile(dialect=conn.dialect, column_keys=columns)
        order = compiled.positiontup or columns
        raw.executemany(str(compiled), [tuple(row[c] for c in order) for row in rows])


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
    v = _seed(ready, N_DATABASES)
    with _selects(ready) as seen:
        listed = ready.databases(DATASET)
    assert len(seen) == 3
    assert [d.id for d in listed] == list(range(1, N_DATABASES + 1))
    assert all(len(d.containers) == 4 and len(d.tag_stats) == 8 for d in listed)
    site_id = ready.site(SITE).id
    assert all(c.site_ids == (site_id,) for d in listed for c in d.containers)
    assert listed[41].tag_stats["ht"] == (42.0, 43.0)
    assert listed[41].parameters == {"i": 42}

    with _selects(ready) as seen:
        at_version = ready.databases(DATASET, v)
        one = ready.database(1500, v)
        summary = ready.dataset_summary(DATASET, v)
    assert len(seen) == 3 + 3 + 1
    assert at_version == listed
    assert one == listed[1499]
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
