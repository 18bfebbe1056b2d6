"""Level 12: the commit path checks sites and schemas itself (PostgreSQL has no foreign key for them).

A commit naming a site or schema that does not exist, or a site removed
since this ``Catalog`` last committed to it, is refused with ``NotFound``
on every path (one commit, a group in bulk, the savepoint path) and leaves
nothing behind; a level-11 catalog is upgraded with its data intact.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from catalog_samples import DATASET, SITE, specs
from sqlalchemy import func, insert, inspect, select, update

from giod.catalog import Catalog, DatabaseCommit, migrations
from giod.catalog.bulk import Refused
from giod.catalog.engine import create_catalog_engine, parse_url
from giod.catalog.migrations import v0001_initial as v1
from giod.catalog.tables import metadata, replicas, sites
from giod.errors import NotFound

MakeCommit = Callable[..., DatabaseCommit]


def _dangling_replicas(catalog: Catalog) -> int:
    """Replica rows whose site does not exist."""
    query = (
        select(func.count())
        .select_from(replicas.outerjoin(sites, sites.c.id == replicas.c.site_id))
        .where(sites.c.id.is_(None))
    )
    with catalog._engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def test_unknown_sites_and_schemas_are_refused_on_every_path(ready: Catalog, make_commit: MakeCommit) -> None:
    ready.commit_database(make_commit(3))  # the schema is known to this Catalog from here on
    version, listed = ready.version(), ready.databases(DATASET)
    schema_id = ready.dataset(DATASET).schema_id
    no_site = make_commit(2, site="nowhere")
    no_schema = make_commit(2, containers=specs("s", 2, schema_id + 41))
    for bad, message in ((no_site, "no site named 'nowhere'"), (no_schema, f"no schema with id {schema_id + 41}")):
        with pytest.raises(NotFound, match=message):
            ready.commit_database(bad)
        with pytest.raises(NotFound, match=message):  # a group: all or none
            ready.commit_databases([make_commit(1), bad])
        with pytest.raises(Refused):  # the bulk path refuses, and writes nothing
            ready._bulk_attempt([ready._commit_work(c).prepared for c in (make_commit(1), bad)])
    # a commit without containers writes no replica: its site is still checked
    with pytest.raises(NotFound, match="no site named 'nowhere'"):
        ready.commit_databases([make_commit(1), make_commit(2, site="nowhere", containers=())])
    assert ready.version() == version
    assert ready.databases(DATASET) == listed
    assert ready.dataset_summary(DATASET)["n_databases"] == 1


def test_a_site_removed_by_another_process_is_refused_in_later_commits(
    catalog_url: str, ready: Catalog, make_commit: MakeCommit
) -> None:
    ready.add_site("cern", "https://giod.cern.ch", distance=10)
    held = ready.database(ready.commit_database(make_commit(4, site="cern")).database_id).containers
    for c in held:  # a good copy elsewhere, so that removing cern loses nothing
        ready.set_replica_state(c.id, SITE, "good")
    with Catalog.open(catalog_url) as other:  # another process: this Catalog is not told
        other.remove_site("cern", force=True)
    version = ready.version()
    with pytest.raises(NotFound, match="no site named 'cern'"):
        ready.commit_database(make_commit(2, site="cern"))
    with pytest.raises(NotFound, match="no site named 'cern'"):
        ready.commit_databases([make_commit(1), make_commit(2, site="cern")])
    with pytest.raises(NotFound, match="no site named 'cern'"):
        ready.add_containers(held[0].database_id, specs("later", 4, held[0].schema_id, ("reco",)), "cern")
    assert ready.version() == version
    assert _dangling_replicas(ready) == 0
    # and once a site of that name exists again, commits to it land on the new one
    again = ready.add_site("cern", "https://giod.cern.ch", distance=10)
    result = ready.commit_database(make_commit(2, site="cern"))
    assert {c.site_ids for c in ready.database(result.database_id).containers} == {(again.id,)}


def test_a_level_11_catalog_is_upgraded(catalog_url: str) -> None:
    engine = create_catalog_engine(parse_url(catalog_url))
    with engine.begin() as conn:
        assert migrations.migrate(conn, target=11) == (None, 11)

        def add(table, **row) -> int:
            return int(conn.execute(insert(table).values(**row).returning(table.c.id)).scalar_one())

        schema = add(v1.schemas, name="events", fingerprint="sha256:v1", text="a: 1\n")
        site = add(v1.sites, name="local", url="file:///srv", distance=0, created=1.0)
        dataset = add(v1.datasets, name="qcd", schema_id=schema, created_version=2, next_entry=30, created=2.0)
        conn.execute(insert(v1.dataset_schemas).values(dataset_id=dataset, version=2, schema_id=schema))
        db = add(v1.databases, dataset_id=dataset, first_entry=0, n_events=30, bytes=100, created=3.0,
                 created_version=3)  # fmt: skip
        container = add(v1.containers, database_id=db, name="raw", path="qcd/raw.parquet", checksum="crc32c:1",
                        size=100, cluster_entries="[30]", schema_id=schema, created_version=3)  # fmt: skip
        conn.execute(insert(v1.replicas).values(container_id=container, site_id=site, state="good", checked=3.0))
        conn.execute(update(v1.federation).values(version=3))
    with engine.connect() as conn:
        keys = {(t, k["referred_table"]) for t in ("containers", "replicas") for k in inspect(conn).get_foreign_keys(t)}
    engine.dispose()
    assert {("containers", "schemas"), ("replicas", "sites")} <= keys

    with Catalog.open(catalog_url, create=False) as catalog:
        with catalog._engine.connect() as conn:
            assert migrations.read_level(conn) == migrations.latest_level() >= 12
            found = inspect(conn)
            after = {(t, k["referred_table"]) for t in ("containers", "replicas") for k in found.get_foreign_keys(t)}
            if catalog.dialect == "postgresql":
                assert after == set()  # level 20 dropped the keys to databases and containers too
                for table in metadata.sorted_tables:  # PostgreSQL's keys are tables.py's, all of them
                    assert {(k["referred_table"], tuple(k["constrained_columns"]))
                            for k in found.get_foreign_keys(table.name)} == {
                        (k.column.table.name, (k.parent.name,)) for k in table.foreign_keys
                    }, table.name
            else:  # SQLite keeps both: dropping one rebuilds the table
                assert after == keys
        assert catalog.version() == 3  # a migration is not a federation commit
        old = catalog.database(db)
        assert [(c.id, c.site_ids) for c in old.containers] == [(container, (site,))]
        spec = specs("new", 5, schema, ("raw",))
        result = catalog.commit_database(DatabaseCommit("qcd", 5, "local", spec))
        assert (result.first_entry, result.version) == (30, 4)
        with pytest.raises(NotFound, match=f"no schema with id {schema + 1}"):
            catalog.commit_database(DatabaseCommit("qcd", 5, "local", specs("bad", 5, schema + 1, ("raw",))))
        with pytest.raises(NotFound, match="no site named 'cern'"):
            catalog.commit_databases([DatabaseCommit("qcd", 5, "cern", specs("bad", 5, schema, ("raw",)))])
        assert catalog.version() == 4
        assert catalog.dataset_summary("qcd") == {"n_events": 35, "n_databases": 2, "bytes": 100 + spec[0].size}
