"""A PostgreSQL catalog's plans as it grows (level 18): the statistics a bulk load leaves, and a coverage
trigger whose plan, made on a small catalog, still reads ``databases`` by its key on a large one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from catalog_samples import DATASET
from test_catalog_planning import counted_as_row_by_row

from giod.catalog import Catalog, DatabaseCommit, commits, migrations
from giod.catalog.engine import create_catalog_engine, parse_url


def _estimated(catalog: Catalog) -> float:
    with catalog._engine.connect() as conn:
        return float(conn.exec_driver_sql("SELECT reltuples FROM pg_class WHERE oid = 'databases'::regclass")
                     .scalar_one())


def test_a_bulk_commit_leaves_statistics_the_planner_can_use(
        ready: Catalog, make_commit: Callable[..., DatabaseCommit], monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``commit_databases`` of ANALYZE_BULK commits or more analyses the tables it writes once they have
    outgrown their statistics by ANALYZE_GROWTH; a smaller growth leaves them; SQLite has nothing to do."""
    monkeypatch.setattr(commits, "ANALYZE_BULK", 20)
    if ready.dialect != "postgresql":
        ready.commit_databases([make_commit(3) for _ in range(20)])
        assert ready._refresh_statistics(force=True) is False
        return
    with ready._engine.begin() as conn:  # only the catalog analyses here, on a server with autovacuum too
        for table in commits.ANALYZED:
            conn.exec_driver_sql(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    assert _estimated(ready) < 0  # never analysed
    ready.commit_databases([make_commit(3) for _ in range(19)])  # below ANALYZE_BULK: left alone
    assert _estimated(ready) < 0
    ready.commit_databases([make_commit(3) for _ in range(20)])
    assert _estimated(ready) == 39
    with ready._engine.connect() as conn:  # every table a commit writes has its statistics
        analysed = set(conn.exec_driver_sql(
            "SELECT relname FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL "
            "AND schemaname = current_schema()").scalars())
    assert analysed >= set(commits.ANALYZED)
    ready.commit_databases([make_commit(3) for _ in range(20)])  # 59 <= 1.2 × 39 + 20: still close enough
    assert _estimated(ready) == 39
    ready.commit_databases([make_commit(3) for _ in range(20)])  # 79 > 66.8
    assert _estimated(ready) == 79
    assert ready._refresh_statistics() is False
    assert ready._refresh_statistics(force=True) is True


def test_the_coverage_trigger_reads_databases_by_key_with_a_plan_made_when_it_was_small(
        ready: Catalog, make_commit: Callable[..., DatabaseCommit], monkeypatch: pytest.MonkeyPatch) -> None:
    """A server session plans the trigger's statement at its first use and keeps the plan: made on a
    catalog of one database and used on one of hundreds (never analysed), it still finds each row's
    dataset by the key of ``databases``, not by reading the table (level 16's plan: a scan of it all)."""
    if ready.dialect != "postgresql":
        pytest.skip("PostgreSQL's statement trigger (SQLite keeps row triggers)")
    monkeypatch.setattr(commits, "ANALYZE_BULK", 10**9)  # an ANALYZE would make every session plan anew
    first = ready.commit_database(make_commit(3))
    raw: Any = ready._engine.raw_connection()  # one server session throughout, as a pooled connection is
    try:
        conn = raw.driver_connection
        conn.autocommit = True
        plans: list[str] = []
        conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))

        def insert(field: str, version: int) -> None:
            conn.execute("INSERT INTO tag_stats (database_id, field, created_version, min, max) "
                         "VALUES (%s, %s, %s, 0, 1)", (first.database_id, field, version))

        insert("early", 1000)  # the trigger's first use in this session: planned with one database
        ready.commit_databases([make_commit(3) for _ in range(400)])
        for setting in ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                        "SET auto_explain.log_nested_statements = on", "SET auto_explain.log_level = notice"):
            conn.execute(setting)
        insert("late", 2000)
    finally:
        raw.close()
    trigger = [p for p in plans if "INSERT INTO tag_coverage" in p]
    assert trigger, plans
    assert "databases_pkey" in trigger[0]
    assert "Seq Scan on databases" not in trigger[0]


def test_a_level_17_catalog_keeps_its_coverage_with_the_trigger_of_level_18(catalog_url: str) -> None:
    """A catalog upgraded from level 17 holds level 18's function (PostgreSQL) and counts groups of
    versions after, before and around the kept ones as row by row, on both catalogs."""
    engine = create_catalog_engine(parse_url(catalog_url))
    with engine.begin() as conn:
        assert migrations.migrate(conn, target=17) == (None, 17)
    engine.dispose()
    with Catalog.open(catalog_url, create=False) as catalog:
        with catalog._engine.connect() as conn:
            assert migrations.read_level(conn) == migrations.latest_level() >= 18
            if catalog.dialect == "postgresql":
                settings = conn.exec_driver_sql(
                    "SELECT proconfig FROM pg_proc WHERE proname = 'tag_coverage_added' "
                    "AND pronamespace = current_schema()::regnamespace").scalar_one()
                assert "enable_seqscan=off" in settings
        counted_as_row_by_row(catalog, 30)


def test_a_bulk_commit_whose_analyse_fails_has_still_landed(
        ready: Catalog, make_commit: Callable[..., DatabaseCommit], monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``ANALYZE`` after a bulk runs once the commits are durable: its failure is not theirs."""
    monkeypatch.setattr(commits, "ANALYZE_BULK", 5)
    monkeypatch.setattr(commits, "ANALYZED", ("databases", "no_such_table"))
    results = ready.commit_databases([make_commit(3) for _ in range(5)])
    assert [r.duplicate for r in results] == [False] * 5
    assert len(ready.databases(DATASET)) == 5
    if ready.dialect == "postgresql":
        with pytest.raises(Exception, match="no_such_table"):
            ready._refresh_statistics(force=True)
