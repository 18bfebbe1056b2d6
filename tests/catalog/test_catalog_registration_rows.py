"""What a registration costs: on PostgreSQL the coverage trigger looks up the kept coverage once per field when
the statement appends after every kept row (level 19), the rows a registration writes are checked by the
commit path instead of by foreign keys (level 20), and a commit's part of the group statement's text is made
before it queues."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from catalog_samples import DATASET, SITE
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import func, inspect, select
from test_catalog_planning import counted_as_row_by_row

from giod.catalog import Catalog, ContainerSpec, DatabaseCommit, migrations
from giod.catalog.bulk import BulkStatements, Refused, group_statement
from giod.catalog.commits import _int_list
from giod.catalog.engine import create_catalog_engine, parse_url
from giod.catalog.tables import containers, databases, datasets, replicas, tag_coverage, tag_stats
from giod.errors import NotFound

MakeCommit = Callable[..., DatabaseCommit]
# (table, referred table) of the foreign keys a registration's rows no longer pass through on PostgreSQL
CHECKED_BY_COMMITS = {("databases", "datasets"), ("containers", "databases"), ("replicas", "containers"),
                      ("tag_stats", "databases")}


def _explained(catalog: Catalog, run: Callable[[], Any]) -> list[str]:
    """The plans (``auto_explain``, nested statements, analysed) of what ``run`` makes the catalog's next
    pooled connection do; the pool holds one connection, so that it is the one ``run`` uses."""
    raw: Any = catalog._engine.raw_connection()
    plans: list[str] = []
    try:
        conn = raw.driver_connection
        conn.autocommit = True
        conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        for setting in ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                        "SET auto_explain.log_analyze = on", "SET auto_explain.log_nested_statements = on",
                        "SET auto_explain.log_level = notice"):
            conn.execute(setting)
        conn.autocommit = False
    finally:
        raw.close()
    run()
    return plans


def _lookups(plan: str) -> list[int]:
    """How many times each backward scan of ``tag_coverage`` ran in ``plan`` (0: never executed)."""
    found = []
    lines = plan.splitlines()
    for i, line in enumerate(lines):
        if "Index Scan Backward using tag_coverage_pkey" in line:
            loops = re.search(r"loops=(\d+)\)", line)
            found.append(int(loops.group(1)) if loops and "never executed" not in line else 0)
            assert i + 1 < len(lines)
    return found


def test_a_group_looks_up_the_kept_coverage_once_per_field(ready: Catalog, make_commit: MakeCommit) -> None:
    """Eight registrations of two statistics each, after the kept rows: two lookups of the kept coverage
    (one per field), not sixteen (one per version and field, level 18), made by the group statement, which
    writes the coverage rows itself (level 21: the trigger's statement never runs); the coverage is still
    exact."""
    if ready.dialect != "postgresql":
        pytest.skip("PostgreSQL's statement trigger (SQLite keeps row triggers)")
    ready.commit_databases([make_commit(3) for _ in range(3)])  # rows kept before the group
    engine = ready._engine
    engine.pool.dispose()
    plans = _explained(ready, lambda: ready.commit_databases([make_commit(3) for _ in range(8)]))
    assert not [p for p in plans if "WITH ev AS" in p], plans  # the trigger's statement
    group = [p for p in plans if "INSERT INTO tag_coverage" in p and "WITH u AS MATERIALIZED" in p]
    assert len(group) == 1, plans
    assert _lookups(group[0]) == [2], group[0]  # per field once; per version never
    counted_as_row_by_row_after(ready)


def test_the_trigger_counts_what_follows_a_group_in_its_transaction(ready: Catalog, make_commit: MakeCommit
                                                                    ) -> None:
    """The setting that makes the trigger leave a group's rows to the group is cleared by the trigger: a
    statistic inserted after the group statement in the same transaction is counted."""
    if ready.dialect != "postgresql":
        pytest.skip("PostgreSQL's group statement")
    ready.commit_databases([make_commit(3)])
    sql, params = group_statement([ready._commit_work(make_commit(3)).prepared for _ in range(2)], 1.0)
    raw: Any = ready._engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute(BulkStatements.lock)
        cur.execute(sql, params)
        db_id, _, version = cur.fetchall()[-1]
        cur.execute("INSERT INTO tag_stats (database_id, field, created_version, min, max) "
                    "VALUES (%s, 'late', %s, 0, 1)", (db_id, version))
        raw.commit()
    finally:
        raw.close()
    with ready._engine.connect() as conn:
        kept = conn.execute(select(tag_coverage.c.version, tag_coverage.c.n_databases, tag_coverage.c.width)
                            .where(tag_coverage.c.field == "late")).all()
    assert [tuple(row) for row in kept] == [(version, 1, 1.0)]
    counted_as_row_by_row_after(ready)


@pytest.mark.parametrize("level", [18, 20], ids=["the trigger of level 19", "groups writing their own (21)"])
def test_an_upgraded_catalog_keeps_its_coverage(catalog_url: str, level: int) -> None:
    """Upgraded from level 18 (level 19's trigger: each version's own lookup) or 20 (level 21: groups write
    their own rows), groups after the kept rows and one statement of rows before, among and after them count
    as row by row, on both catalogs."""
    engine = create_catalog_engine(parse_url(catalog_url))
    with engine.begin() as conn:
        assert migrations.migrate(conn, target=level) == (None, level)
    engine.dispose()
    with Catalog.open(catalog_url, create=False) as catalog:
        with catalog._engine.connect() as conn:
            assert migrations.read_level(conn) == migrations.latest_level() >= level + 1
        counted_as_row_by_row(catalog, 30)


def counted_as_row_by_row_after(catalog: Catalog) -> None:
    """The kept coverage of the fixture dataset equals a recount of its statistics rows."""
    from test_catalog_planning import _recounted

    _recounted(catalog, catalog.dataset(DATASET).id)


def _keys(catalog: Catalog) -> set[tuple[str, str]]:
    with catalog._engine.connect() as conn:
        found = inspect(conn)
        return {(table, key["referred_table"]) for table in ("databases", "containers", "replicas", "tag_stats")
                for key in found.get_foreign_keys(table)}


def test_a_level_19_catalog_is_upgraded_without_the_keys_commits_check(catalog_url: str) -> None:
    """PostgreSQL drops the four foreign keys a registration's rows passed through; SQLite keeps them;
    the rows written before the upgrade are still read."""
    engine = create_catalog_engine(parse_url(catalog_url))
    with engine.begin() as conn:
        assert migrations.migrate(conn, target=19) == (None, 19)
    engine.dispose()
    with Catalog.open(catalog_url, create=False) as catalog:
        keys = _keys(catalog)
        if catalog.dialect == "postgresql":
            assert not keys & CHECKED_BY_COMMITS
        else:
            assert keys >= CHECKED_BY_COMMITS
        schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
        catalog.create_dataset(DATASET, schema_id)
        catalog.add_site(SITE, "file:///srv/giod")
        spec = ContainerSpec("tag", f"{DATASET}/0/tag.arrow", "crc32c:0", 9, (3,), schema_id)
        done = catalog.commit_databases([DatabaseCommit(DATASET, 3, SITE, (spec,), {"ht": (1.0, 2.0)})] * 2)
        assert [d.id for d in catalog.databases(DATASET)] == [r.database_id for r in done]


def _dangling(catalog: Catalog) -> int:
    """Rows of a registration's tables whose referred row does not exist."""
    checks = [(databases, datasets, databases.c.dataset_id, datasets.c.id),
              (containers, databases, containers.c.database_id, databases.c.id),
              (replicas, containers, replicas.c.container_id, containers.c.id),
              (tag_stats, databases, tag_stats.c.database_id, databases.c.id)]
    with catalog._engine.connect() as conn:
        return sum(int(conn.execute(select(func.count()).select_from(child.outerjoin(parent, key == ref))
                                    .where(ref.is_(None))).scalar_one())
                   for child, parent, key, ref in checks)


def test_what_the_dropped_keys_refused_is_refused_by_every_writer(ready: Catalog, make_commit: MakeCommit) -> None:
    """A registration to a dataset that does not exist (one commit, a group, the bulk statement), containers
    or statistics added to a database that does not exist, a replica of a container that does not: each
    refused with nothing written, on both catalogs."""
    first = ready.commit_database(make_commit(3))
    version = ready.version()
    missing = make_commit(2, dataset="nowhere")
    with pytest.raises(NotFound, match="nowhere"):
        ready.commit_database(missing)
    with pytest.raises(NotFound, match="nowhere"):
        ready.commit_databases([make_commit(1), missing])
    with pytest.raises(Refused):  # the group statement refuses itself: no database row without its dataset
        ready._bulk_attempt([ready._commit_work(c).prepared for c in (make_commit(1), missing)])
    schema_id = ready.dataset(DATASET).schema_id
    spec = ContainerSpec("reco", f"{DATASET}/late/reco.arrow", "crc32c:0", 9, (3,), schema_id)
    gone = first.database_id + 1000
    with pytest.raises(NotFound, match="database"):
        ready.add_containers(gone, [spec], SITE)
    with pytest.raises(NotFound, match="database"):
        ready.add_containers_bulk([(gone, [spec], {"ht": (0.0, 1.0)})], SITE)
    with pytest.raises(NotFound, match="no container"):
        ready.set_replica_state(10**9, SITE, "good")
    assert ready.version() == version
    assert _dangling(ready) == 0
    assert [d.id for d in ready.databases(DATASET)] == [first.database_id]


@given(st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1), st.booleans()), max_size=20))
def test_a_containers_lists_of_numbers_are_the_text_json_makes(values: list[int]) -> None:
    """The cluster entries and checksums of a container row: the text ``json.dumps`` made before."""
    assert _int_list(values) == json.dumps([int(v) for v in values])
    assert _int_list(np.array([abs(int(v)) % 2**32 for v in values], dtype=np.uint32)) == json.dumps(
        [abs(int(v)) % 2**32 for v in values])


def test_a_groups_text_is_its_commits_texts_made_beforehand(ready: Catalog, make_commit: MakeCommit) -> None:
    """On PostgreSQL a prepared commit carries its element of the group statement's JSON, and the group's text
    is those elements joined, whatever group it lands in; each element names its containers and statistics."""
    prepared = [ready._commit_work(make_commit(3 + i)).prepared for i in range(3)]
    if ready.dialect != "postgresql":
        assert all(p.group_row == "" for p in prepared)
        return
    _, params = group_statement(prepared, 1.0)
    assert json.loads(params["commits"]) == [json.loads(p.group_row) for p in prepared]
    row = json.loads(prepared[1].group_row)
    assert row["n_events"] == 4 and [h["name"] for h in row["held"]] == ["raw.tracker", "tag"]
    assert {s["field"] for s in row["stats"]} == {"njets", "ht"} and row["record"] == prepared[1].record
    _, alone = group_statement(prepared[1:2], 2.0)
    assert alone["commits"] == f"[{prepared[1].group_row}]" and alone["k"] == 1


@pytest.mark.parametrize("low", [-0.0, 0.0, 5e-324, -1.7976931348623157e308, 0.1, 1e300])
def test_a_groups_statistics_keep_their_floats_exactly(ready: Catalog, make_commit: MakeCommit, low: float) -> None:
    """A group's statistics are written as given to the last bit, on both catalogs, and on PostgreSQL with the
    sign of zero (SQLite keeps -0.0 as 0): the group statement reads its text as ``jsonb``, whose numbers
    (``numeric``) have no -0.0, so the bounds travel as the texts of their floats."""
    done = ready.commit_databases([make_commit(3, tag_stats={"ht": (low, 2.5)}) for _ in range(3)])
    if ready.dialect == "postgresql":
        sql, _ = group_statement([ready._commit_work(make_commit(3)).prepared], 1.0)
        assert "::jsonb" in sql and "::json)" not in sql
    with ready._engine.connect() as conn:
        rows = conn.execute(select(tag_stats.c.min, tag_stats.c.max).where(
            tag_stats.c.database_id.in_([r.database_id for r in done]), tag_stats.c.field == "ht")).all()
    assert len(rows) == 3
    for lo, hi in rows:
        assert (lo, hi) == (low, 2.5)
        if ready.dialect == "postgresql":
            assert math.copysign(1.0, lo) == math.copysign(1.0, low)
    counted_as_row_by_row_after(ready)
