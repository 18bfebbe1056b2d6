"""Migration step 3: a level-2 catalog gains the ``tokens`` table, its data and version intact."""

from __future__ import annotations

from sqlalchemy import Engine, insert, inspect, update

from giod.catalog import Catalog, migrations
from giod.catalog.engine import create_catalog_engine, parse_url
from giod.catalog.migrations import v0001_initial as v1


def _level_2_catalog(url: str) -> Engine:
    """A catalog at level 2 holding a schema, a dataset and a site, at federation version 3."""
    engine = create_catalog_engine(parse_url(url))
    with engine.begin() as conn:
        assert migrations.migrate(conn, target=2) == (None, 2)
        schema = conn.execute(
            insert(v1.schemas).values(name="events", fingerprint="sha256:v2", text="a: 1\n").returning(v1.schemas.c.id)
        ).scalar_one()
        dataset = conn.execute(
            insert(v1.datasets)
            .values(name="qcd", schema_id=schema, created_version=2, next_entry=0, created=2.0)
            .returning(v1.datasets.c.id)
        ).scalar_one()
        conn.execute(insert(v1.dataset_schemas).values(dataset_id=dataset, version=2, schema_id=schema))
        conn.execute(insert(v1.sites).values(name="local", url="file:///srv", distance=0, created=3.0))
        for version in (1, 2, 3):
            row = {"version": version, "created": float(version), "description": f"step {version}"}
            conn.execute(insert(v1.versions).values(row))
        conn.execute(update(v1.federation).values(version=3))
    return engine


def test_a_level_2_catalog_gains_tokens(catalog_url: str) -> None:
    engine = _level_2_catalog(catalog_url)
    with engine.connect() as conn:
        assert migrations.read_level(conn) == 2
        assert not inspect(conn).has_table("tokens")
    engine.dispose()

    with Catalog.open(catalog_url, create=False) as catalog:
        with catalog._engine.connect() as conn:
            assert migrations.read_level(conn) == migrations.latest_level() >= 3
            assert inspect(conn).has_table("tokens")
        assert catalog.version() == 3  # a migration is not a federation commit
        assert [d.name for d in catalog.datasets()] == ["qcd"]
        assert [s.name for s in catalog.sites()] == ["local"]
        assert catalog.tokens() == []

        record, secret = catalog.create_token("write", "qcd", note="daq")
        assert catalog.verify_token(secret) == record
        assert catalog.version() == 3  # tokens are not federation content
    # the migrated catalog opens again without migrating twice
    with Catalog.open(catalog_url, create=False) as again:
        assert [t.id for t in again.tokens()] == [record.id]
