"""Sample values shared by the catalog tests: a dataset, a site, container specs, bulk seeding."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, Table, insert, update

from giod.catalog import Catalog, ContainerSpec
from giod.catalog.migrations import v0017_listing_records
from giod.catalog.tables import (
    containers,
    database_summaries,
    databases,
    dataset_totals,
    federation,
    replicas,
    tag_stats,
    versions,
)

DATASET = "qcd"
SITE = "local"
CONTAINERS = ("raw.tracker", "raw.calo", "reco", "tag")
TAGS = ("njets", "ht", "lead_jet_pt", "mjj", "met", "nmuons", "nelectrons", "ntracks")


def specs(
    tag: str, n_events: int, schema_id: int, names: tuple[str, ...] = ("raw.tracker", "tag")
) -> tuple[ContainerSpec, ...]:
    """Container specs as a writer would hand them in (one row group per container)."""
    return tuple(
        ContainerSpec(
            name,
            f"{DATASET}/{tag}/{name}.parquet",
            f"crc32c:{len(name):08x}",
            1000 + len(name),
            (n_events,),
            schema_id,
        )
        for name in names
    )


def seed(catalog: Catalog, n: int) -> int:
    """Write databases 1..n of the fixture dataset straight into the tables, in one
    transaction (a commit per database through the API would take most of a test's
    time): 10 events, 4 containers, 8 tag statistics each. Returns their version."""
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
            "program": "seed",
            "program_version": "1",
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
            "program": f"seed.{name}",
            "program_version": "1",
            "parameters": json.dumps({"i": i}),
            "created": float(i),
        }
        for i in range(1, n + 1)
        for k, name in enumerate(CONTAINERS)
    ]
    stats = [
        {"database_id": i, "field": f, "created_version": v, "min": float(i), "max": i + 1.0}
        for i in range(1, n + 1)
        for f in TAGS
    ]
    # the listing's line a commit keeps beside its rows (level 13)
    summaries = [
        {"database_id": i, "created_version": v, "dataset_id": dataset.id, "first_entry": 10 * (i - 1),
         "n_events": 10, "database_version": v, "program": "seed", "bytes": 4_000,
         "containers": ",".join(sorted(CONTAINERS))}
        for i in range(1, n + 1)
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
            (database_summaries, summaries),
        ):
            bulk_insert(conn, table, values)
        v0017_listing_records.fill(conn)  # and the records the listing reads (level 17)
        conn.execute(update(federation).values(version=v))
        # the totals a commit keeps beside its rows (level 9), here for the n databases at once
        conn.execute(insert(dataset_totals).values(dataset_id=dataset.id, version=v, n_databases=n,
                                                   n_events=10 * n, bytes=4_000 * n))
        conn.execute(insert(versions).values(version=v, created=0.0, description="seed"))
    return v


def bulk_insert(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """COPY (PostgreSQL) or a driver executemany (SQLite): seeding stays well under a second."""
    columns = list(rows[0])
    raw: Any = conn.connection.driver_connection
    if conn.dialect.name == "postgresql":
        copy_in = f"COPY {table.name} ({', '.join(columns)}) FROM STDIN"
        with raw.cursor() as cursor, cursor.copy(copy_in) as copy:
            for row in rows:
                copy.write_row([row[c] for c in columns])
    else:
        compiled = insert(table).compile(dialect=conn.dialect, column_keys=columns)
        order = compiled.positiontup or columns
        raw.executemany(str(compiled), [tuple(row[c] for c in order) for row in rows])
