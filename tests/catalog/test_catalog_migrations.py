"""Migrations: a level-1 catalog opened by this giod, and migrated schemas equal to tables.py."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import Engine, insert, inspect, select, update

from giod.catalog import Catalog, ContainerSpec, DatabaseCommit, migrations
from giod.catalog.engine import create_catalog_engine, parse_url
from giod.catalog.migrations import v0001_initial as v1
from giod.catalog.tables import meta, metadata
from giod.errors import CatalogError


def _level_1_catalog(url: str) -> tuple[Engine, dict[str, int]]:
    """A catalog at level 1 holding one database: raw written by its commit, reco added
    later, an older reco superseded; written through the level-1 tables."""
    engine = create_catalog_engine(parse_url(url))
    with engine.begin() as conn:
        assert migrations.migrate(conn, target=1) == (None, 1)

        def add(table, **row) -> int:
            return int(conn.execute(insert(table).values(**row).returning(table.c.id)).scalar_one())

        schema = add(v1.schemas, name="events", fingerprint="sha256:v1", text="a: 1\n")
        site = add(v1.sites, name="local", url="file:///srv", distance=0, created=1.0)
        dataset = add(
            v1.datasets, name="qcd", schema_id=schema, created_version=2, next_entry=30, created=2.0
        )
        conn.execute(insert(v1.dataset_schemas).values(dataset_id=dataset, version=2, schema_id=schema))
        db = add(
            v1.databases, dataset_id=dataset, first_entry=0, n_events=30, bytes=300, created=4.0,
            created_version=4, writer="host:1", program="sim", program_version="1.0",
            parameters=json.dumps({"seed": 7}), idempotency_key="run1-file1",
        )  # fmt: skip
        ids = {"db": db, "site": site, "schema": schema}
        for name, created, deleted in (("raw", 4, None), ("reco", 5, 6), ("reco", 6, None)):
            cid = add(
                v1.containers, database_id=db, name=name, path=f"qcd/{name}{created}.parquet",
                checksum="crc32c:0000abcd", size=100, cluster_entries="[10, 20]",
                schema_id=schema, created_version=created, deleted_version=deleted,
            )  # fmt: skip
            conn.execute(
                insert(v1.replicas).values(container_id=cid, site_id=site, state="good", checked=9.0)
            )
            ids[f"{name}{created}"] = cid
        conn.execute(
            insert(v1.tag_stats).values(
                database_id=db, field="ht", created_version=4, min=1.5, max=None
            )
        )
        for version in range(1, 7):
            conn.execute(
                insert(v1.versions).values(
                    version=version, created=100.0 + version, description=f"step {version}"
                )
            )
        conn.execute(update(v1.federation).values(version=6))
    return engine, ids


def test_a_level_1_catalog_is_migrated_with_its_data_intact(catalog_url: str) -> None:
    engine, ids = _level_1_catalog(catalog_url)
    with engine.connect() as conn:
        assert migrations.read_level(conn) == 1
        assert "program" not in {c["name"] for c in inspect(conn).get_columns("containers")}
    engine.dispose()

    with Catalog.open(catalog_url, create=False) as catalog:
        with catalog._engine.connect() as conn:
            assert migrations.read_level(conn) == migrations.latest_level() >= 2
        assert catalog.version() == 6  # a migration is not a federation commit
        assert [v.description for v in catalog.versions()] == [f"step {i}" for i in range(6, 0, -1)]
        db = catalog.database(ids["db"])
        assert (db.first_entry, db.n_events, db.bytes, db.writer, db.idempotency_key) == (
            0, 30, 200, "host:1", "run1-file1",
        )  # fmt: skip
        assert (db.program, db.program_version, db.parameters) == ("sim", "1.0", {"seed": 7})
        assert db.tag_stats == {"ht": (1.5, float("inf"))}
        raw, reco = db.containers
        assert (raw.id, reco.id) == (ids["raw4"], ids["reco6"])
        assert raw.cluster_entries == (10, 20) and raw.site_ids == (ids["site"],)
        # the commit's own container takes the database's program; a later one stays unknown
        assert (raw.program, raw.program_version, raw.parameters) == ("sim", "1.0", {"seed": 7})
        assert (reco.program, reco.program_version, reco.parameters) == ("", "", {})
        # every container is dated by the version that created it
        assert (raw.created, reco.created) == (104.0, 106.0)
        # every container before level 6 is a Parquet file, checked by Parquet's own page CRCs
        assert (raw.format, raw.cluster_checksums, reco.format) == ("parquet", (), "parquet")
        # datasets before level 7 leave the container format to each writer
        assert catalog.dataset("qcd").container_format is None
        old = catalog.database(ids["db"], version=5).container("reco")
        assert old is not None and (old.id, old.created) == (ids["reco5"], 105.0)
        assert catalog.container_paths() == {
            "qcd/raw4.parquet", "qcd/reco5.parquet", "qcd/reco6.parquet",
        }  # fmt: skip

        # level 9 keeps the totals from the migration on; older snapshots are counted as before
        assert catalog.dataset_summary("qcd") == {"n_events": 30, "n_databases": 1, "bytes": 200}
        assert catalog.dataset_summary("qcd", 5)["n_databases"] == 1

        # the migrated catalog takes new commits where the old one stopped
        spec = ContainerSpec("raw", "qcd/next.parquet", "crc32c:1", 5, (5,), ids["schema"])
        result = catalog.commit_database(
            DatabaseCommit("qcd", 5, "local", (spec,), program="sim", program_version="2.0")
        )
        assert (result.first_entry, result.version) == (30, 7)
        assert catalog.database(result.database_id).containers[0].program_version == "2.0"
        again = catalog.commit_database(
            DatabaseCommit("qcd", 5, "local", (spec,), idempotency_key="run1-file1")
        )
        assert again.duplicate and again.database_id == ids["db"]
        # and records the format of new containers, with their per-cluster checksums
        arrow = ContainerSpec("raw", "qcd/next.arrow", "crc32c:2", 7, (3, 2), ids["schema"], format="arrow",
                              cluster_checksums=(1, 2**32 - 1, 3))
        result = catalog.commit_database(DatabaseCommit("qcd", 5, "local", (arrow,)))
        got = catalog.database(result.database_id).containers[0]
        assert (got.format, got.cluster_checksums) == ("arrow", (1, 2**32 - 1, 3))
        assert catalog.dataset_summary("qcd")["n_events"] == 40


def test_container_formats_are_checked(catalog_url: str) -> None:
    engine, ids = _level_1_catalog(catalog_url)
    engine.dispose()
    with Catalog.open(catalog_url, create=False) as catalog:
        for bad in (ContainerSpec("raw", "qcd/x.orc", "crc32c:1", 5, (5,), ids["schema"], format="orc"),
                    ContainerSpec("raw", "qcd/x.arrow", "crc32c:1", 5, (2, 3), ids["schema"], format="arrow",
                                  cluster_checksums=(1,))):
            with pytest.raises(CatalogError):
                catalog.commit_database(DatabaseCommit("qcd", 5, "local", (bad,)))
        assert catalog.version() == 6  # nothing committed


def test_migrated_schema_equals_tables_py(catalog: Catalog) -> None:
    """Every catalog is built by the steps; the queries use tables.py: the two must agree."""
    with catalog._engine.connect() as conn:
        found = inspect(conn)
        assert set(found.get_table_names()) == set(metadata.tables)
        for table in metadata.sorted_tables:
            columns = {c["name"]: c for c in found.get_columns(table.name)}
            assert list(columns) == [c.name for c in table.columns], table.name
            for c in table.columns:
                assert columns[c.name]["nullable"] == c.nullable, (table.name, c.name)
                assert columns[c.name]["type"].python_type is c.type.python_type, c.name
            primary = found.get_pk_constraint(table.name)["constrained_columns"]
            assert primary == [c.name for c in table.primary_key.columns], table.name
            indexes = {
                ix["name"]: (tuple(ix["column_names"]), bool(ix["unique"]))
                for ix in found.get_indexes(table.name)
                if "duplicates_constraint" not in ix
            }
            assert indexes == {
                ix.name: (tuple(c.name for c in ix.columns), bool(ix.unique))
                for ix in table.indexes
            }, table.name
        assert conn.execute(select(meta.c.value)).scalars().all() == [str(migrations.latest_level())]


def test_migrate_refuses_unknown_levels(catalog: Catalog) -> None:
    latest = migrations.latest_level()
    with catalog._engine.begin() as conn:
        with pytest.raises(CatalogError, match=f"no catalog schema level {latest + 1}: this giod knows 1 to {latest}"):
            migrations.migrate(conn, target=latest + 1)
        assert migrations.migrate(conn, target=1) == (latest, latest)  # never downwards
        assert migrations.migrate(conn) == (latest, latest)
