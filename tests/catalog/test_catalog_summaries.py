"""The database summaries (level 13) give the listing the full computation gives, at every version.

Random histories of single commits (with and without containers, with
parents), groups (in both of PostgreSQL's bulk forms), later passes that add
or replace containers or only statistics, and deleted databases; after each,
at every version so far, ``database_rows`` (the kept summaries) equals the
line built from ``databases`` (every container read and summed). The same
again after the migration's fill rebuilt the summaries from the rows alone,
and a catalog at level 12 with data is migrated to the same lines.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from catalog_samples import DATASET, SITE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, text, update

from giod.catalog import Catalog, ContainerSpec, DatabaseCommit, migrations
from giod.catalog.migrations import v0011_tag_coverage, v0013_database_summaries, v0017_listing_records
from giod.catalog.tables import database_reads, database_summaries, meta

# code point order differs from a locale's ("_" before "a", "Z" before "a", "é" last)
NAMES = ("raw", "reco", "_tag", "Zeta", "é")
_datasets = itertools.count()

containers = st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 50)), max_size=3,
                      unique_by=lambda c: c[0])
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), containers, st.booleans()),  # with a parent or not
        st.tuples(st.just("group"), st.lists(containers, min_size=2, max_size=4), st.booleans()),
        st.tuples(st.just("pass"), st.lists(st.integers(0, 20), min_size=1, max_size=3, unique=True),
                  containers, st.booleans()),  # replace or not
        st.tuples(st.just("delete"), st.integers(0, 20)),
    ),
    min_size=1,
    max_size=8,
)


def _specs(name: str, k: Any, schema_id: int, held: list[tuple[str, int]], n: int = 3) -> tuple[ContainerSpec, ...]:
    return tuple(ContainerSpec(c, f"{name}/{k}/{c}.arrow", "crc32c:0", size, (n,), schema_id) for c, size in held)


def _full(catalog: Catalog, name: str, version: int) -> list[tuple]:
    """The listing's lines computed from every container of the dataset at ``version``."""
    return [
        (db.id, db.first_entry, db.n_events, db.bytes, db.created_version, db.program,
         ",".join(sorted(c.name for c in db.containers)))
        for db in catalog.databases(name, version)
    ]


def _check_every_version(catalog: Catalog, name: str, start: int) -> None:
    for version in range(start, catalog.version() + 1):
        rows = list(catalog.database_rows(name, version))
        assert [tuple(r) for r in rows] == _full(catalog, name, version), version
        assert all(type(value) is int for row in rows for value in row[:5])
        # the listing from the kept records (level 17) gives the records of the databases' rows
        assert list(catalog.iter_databases(name, version, chunk=2)) == catalog.databases(name, version), version


def _history(catalog: Catalog, name: str, schema_id: int, ops: list) -> None:
    made = itertools.count()
    for op in ops:
        live = catalog.databases(name)
        if op[0] == "commit":
            parents = [live[0].id] if op[2] and live else []
            catalog.commit_database(DatabaseCommit(name, 3, SITE, _specs(name, next(made), schema_id, op[1]),
                                                   program=f"p{len(op[1])}", parents=parents))
        elif op[0] == "group":
            catalog._one_statement = op[2]  # type: ignore[misc]  # PostgreSQL's two bulk forms; SQLite has one
            catalog.commit_databases([DatabaseCommit(name, 3, SITE, _specs(name, next(made), schema_id, held))
                                      for held in op[1]])
        elif op[0] == "pass" and live:
            ids = sorted({live[i % len(live)].id for i in op[1]})
            clash = any(db.container(c) for db in live if db.id in ids for c, _ in op[2])
            if clash and not op[3]:
                continue  # refused (ConflictError): nothing changes
            k = next(made)
            items = [(db_id, _specs(name, f"{k}-{db_id}", schema_id, op[2]), {"ht": (0.0, 1.0)}) for db_id in ids]
            if len(items) == 1:
                catalog.add_containers(ids[0], items[0][1], SITE, tag_stats=items[0][2], replace=op[3])
            else:
                catalog.add_containers_bulk(items, SITE, replace=op[3])
        elif op[0] == "delete" and live:
            catalog.delete_database(live[op[1] % len(live)].id)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_the_summaries_equal_the_full_listing_at_every_version(catalog: Catalog, ops: list) -> None:
    if not catalog.sites():
        catalog.add_site(SITE, "file:///srv/giod")
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    name = f"ds{next(_datasets)}"
    catalog.create_dataset(name, schema_id)
    start = catalog.version()
    _history(catalog, name, schema_id, ops)
    _check_every_version(catalog, name, start)

    m = database_summaries
    lines = [m.c[c] for c in _LEVEL_13]
    kept = catalog._read(lambda conn: sorted(tuple(r) for r in conn.execute(select(*lines))))
    with catalog._engine.begin() as conn:  # the migrations' fills, from the rows alone
        conn.execute(m.delete())
        v0013_database_summaries.fill(conn)
        filled = sorted(tuple(r) for r in conn.execute(select(*lines)))
        v0017_listing_records.fill(conn)
    _check_every_version(catalog, name, start)
    # level 13's rows: one per version that changed a database's containers; the writes from level 17 add
    # one where a pass changed only statistics, which ends the line before it and continues it unchanged
    assert {r[:2] for r in filled} <= {r[:2] for r in kept}
    assert {r[:2] for r in kept} - {r[:2] for r in filled} <= _stats_only_passes(catalog, name)


#: the columns of a summary row at level 13
_LEVEL_13 = ("database_id", "created_version", "deleted_version", "dataset_id", "first_entry", "n_events",
             "database_version", "program", "bytes", "containers")


def _stats_only_passes(catalog: Catalog, name: str) -> set[tuple[int, int]]:
    """(database, version) of each change of a database's statistics at a version that left its containers."""
    from giod.catalog.tables import containers, tag_stats

    def read(conn: Any) -> set[tuple[int, int]]:
        t, c = tag_stats, containers
        stats = {(int(a), int(b)) for a, b in conn.execute(select(t.c.database_id, t.c.created_version))}
        held = {(int(a), int(b)) for a, b in conn.execute(select(c.c.database_id, c.c.created_version))}
        return stats - held

    return catalog._read(read)


def test_a_level_12_catalog_with_data_is_migrated(catalog_url: str, tmp_path: Any) -> None:
    with Catalog.open(catalog_url, create=True) as catalog:
        catalog.add_site(SITE, "file:///srv/giod")
        schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
        catalog.create_dataset(DATASET, schema_id)
        start = catalog.version()
        ops = [("group", [[("raw", 5), ("_tag", 1)], [("raw", 7)], []], True),
               ("commit", [("reco", 3), ("é", 2)], True),
               ("pass", [0, 1], [("reco", 11), ("Zeta", 4)], True),
               ("delete", 2),
               ("pass", [0], [("extra", 9)], False),
               ("commit", [], False)]
        _history(catalog, DATASET, schema_id, ops)
        expected = {v: _full(catalog, DATASET, v) for v in range(start, catalog.version() + 1)}
        expected_records = {v: catalog.databases(DATASET, v) for v in expected}
        with catalog._engine.begin() as conn:  # as the catalog was at level 12, data and all
            database_summaries.drop(conn)
            database_reads.drop(conn)  # and what the later levels added
            conn.execute(text("ALTER TABLE tier_rules DROP COLUMN unread_for"))
            if conn.dialect.name == "postgresql":  # level 15's statement trigger back to level 11's row trigger
                conn.execute(text("DROP TRIGGER tag_coverage_added ON tag_stats"))
                conn.execute(text("DROP FUNCTION tag_coverage_added()"))
                conn.exec_driver_sql(v0011_tag_coverage._POSTGRES[1])
            conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="12"))
    with Catalog.open(catalog_url, create=False) as catalog:
        with catalog._engine.connect() as conn:
            assert migrations.read_level(conn) == migrations.latest_level() >= 13
        assert {v: [tuple(r) for r in catalog.database_rows(DATASET, v)] for v in expected} == expected
        assert {v: list(catalog.iter_databases(DATASET, v, chunk=2)) for v in expected} == expected_records
        assert expected[catalog.version()][0][-1] == "Zeta,_tag,extra,raw,reco"  # code point order
        # and keeps them from there on
        db = catalog.commit_database(DatabaseCommit(DATASET, 3, SITE, _specs(DATASET, "new", schema_id,
                                                                             [("raw", 1)]))).database_id
        assert [tuple(r) for r in catalog.database_rows(DATASET)] == _full(catalog, DATASET, catalog.version())
        assert list(catalog.database_rows(DATASET))[-1].id == db


def test_deletions_and_purges_end_the_lines(ready: Catalog, make_commit: Callable[..., DatabaseCommit]) -> None:
    """A deleted dataset's and a deleted database's lines end at their deletion; a purge removes them."""
    first = ready.commit_database(make_commit(4)).database_id
    ready.commit_database(make_commit(5))
    ready.delete_database(first)
    pinned = ready.version()
    ready.delete_dataset(DATASET)
    assert [r.n_events for r in ready.database_rows(DATASET, pinned)] == [5]
    assert [r.n_events for r in ready.database_rows(DATASET, pinned - 1)] == [4, 5]
    m = database_summaries

    def count() -> int:
        return len(ready._read(lambda conn: conn.execute(select(m.c.database_id)).all()))

    assert count() == 2
    ready.purge_deleted(ready.version() + 1)
    assert count() == 0
