"""Tier rules by last read (catalog level 14): reads recorded in batches, a level-13 catalog upgraded, and
``giod tier apply`` keeping on disk what was read lately."""

from __future__ import annotations

import time

import awkward as ak
import pytest
from click.testing import CliRunner
from sqlalchemy import text, update

import giod
from giod.catalog import Catalog, migrations
from giod.catalog.migrations import v0011_tag_coverage
from giod.catalog.tables import meta
from giod.cli import main
from giod.errors import ConfigError
from giod.server.app import ServerThread, create_app
from giod.store.lastread import ReadLog
from giod.tier import apply_tier_rules
from tests.tape.conftest import tape_url

DAY = 86400.0


def _dataset(catalog: Catalog) -> list[int]:
    """Three databases of dataset ``qcd`` with one container each; their ids."""
    catalog.add_site("local", "file:///srv/giod")
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    catalog.create_dataset("qcd", schema_id)
    from giod.catalog import ContainerSpec, DatabaseCommit

    ids = []
    for n in range(3):
        spec = ContainerSpec("raw", f"qcd/db{n}/raw.arrow", f"crc32c:0000000{n}", 10, (5,), schema_id)
        ids.append(catalog.commit_database(DatabaseCommit("qcd", 5, "local", (spec,))).database_id)
    return ids


def test_reads_are_recorded_latest_first_without_a_version(catalog_url):
    with Catalog.open(catalog_url, create=True) as catalog:
        a, b, c = _dataset(catalog)
        version = catalog.version()
        assert catalog.record_reads([a, b, 10**9], 100.0) == 3  # an id of no database is left out
        assert catalog.record_reads([a], 50.0) == 1  # older than what is there: kept out
        assert catalog.record_reads([], paths=["qcd/db2/raw.arrow", "qcd/none.arrow"], when=70.0) == 1
        assert catalog.last_reads("qcd") == {a: 100.0, b: 100.0, c: 70.0}
        assert catalog.record_reads([b], 200.0) == 1
        assert catalog.last_reads("qcd")[b] == 200.0
        assert catalog.version() == version  # an access time, not content
        catalog.delete_database(a)
        assert set(catalog.last_reads("qcd")) == {b, c}  # the live databases only
        catalog.purge_deleted(catalog.version() + 1)  # a purged database's row goes with it
        with catalog._engine.connect() as conn:
            left = set(conn.execute(text("SELECT database_id FROM database_reads")).scalars())
        assert left == {b, c}


def test_a_level_13_catalog_gains_last_reads_and_keeps_its_rules(catalog_url, tmp_path):
    with Catalog.open(catalog_url, create=True) as catalog:
        ids = _dataset(catalog)
        catalog.add_site("archive", f"tape://{tmp_path / 'archive'}")
        rule = catalog.add_tier_rule("qcd", "archive", older_than=30 * DAY)
        with catalog._engine.begin() as conn:  # as the catalog was at level 13, its rule and all
            conn.execute(text("DROP TABLE database_reads"))
            conn.execute(text("ALTER TABLE tier_rules DROP COLUMN unread_for"))
            for column in ("record", "container_ids", "created", "writer", "program_version", "parameters",
                           "idempotency_key"):  # what level 17 added to the summaries
                conn.execute(text(f"ALTER TABLE database_summaries DROP COLUMN {column}"))
            if conn.dialect.name == "postgresql":  # level 15's statement trigger back to level 11's row trigger
                conn.execute(text("DROP TRIGGER tag_coverage_added ON tag_stats"))
                conn.execute(text("DROP FUNCTION tag_coverage_added()"))
                conn.exec_driver_sql(v0011_tag_coverage._POSTGRES[1])
            conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="13"))
    with Catalog.open(catalog_url, create=False) as catalog:
        with catalog._engine.connect() as conn:
            assert migrations.read_level(conn) == migrations.latest_level() >= 14
        (kept,) = catalog.tier_rules()
        assert (kept.id, kept.older_than, kept.unread_for) == (rule.id, 30 * DAY, None)
        assert catalog.last_reads("qcd") == {}
        catalog.record_reads(ids[:1], 5.0)
        assert catalog.last_reads("qcd") == {ids[0]: 5.0}
        later = catalog.add_tier_rule("qcd", "archive", unread_for=90 * DAY)
        assert catalog.tier_rules()[-1] == later and later.unread_for == 90 * DAY
        for bad in (-1.0, float("nan"), float("inf")):
            with pytest.raises(ConfigError):
                catalog.add_tier_rule("qcd", "archive", unread_for=bad)


def test_a_read_log_writes_each_database_once_per_interval_in_one_batch(fed):
    log = ReadLog(fed.catalog, flush_s=3600.0)  # its timer never fires here: the test flushes
    assert log.enabled
    dbs = [db.id for db in fed.catalog.databases("qcd")]
    for _ in range(50):
        for i in dbs[:3]:
            log.note(i)
    assert log.flush() == 3 and log.written == 3
    assert set(fed.catalog.last_reads("qcd")) == set(dbs[:3])
    for i in dbs[:3]:
        log.note(i)  # within the interval: not noted again
    assert log.flush() == 0
    log.note(dbs[3])
    log.close()  # what is left goes with the federation
    assert set(fed.catalog.last_reads("qcd")) == set(dbs[:4])


def test_reading_records_the_databases_read(fed):
    dbs = fed.catalog.databases("qcd")
    before = time.time()
    fed["qcd"].select().read(["jets"])  # every database
    fed.store.read_log.flush()
    got = fed.catalog.last_reads("qcd")
    assert set(got) == {db.id for db in dbs} and min(got.values()) >= before


def test_a_server_records_what_its_clients_read_and_a_client_writes_nothing(fed):
    token = fed.catalog.create_token("read")[1]
    root = str(fed.root)
    fed.close()
    app = create_app(root)
    with ServerThread(app) as url:
        client = giod.open(url, token=token)
        try:
            assert not client.store.read_log.enabled  # no catalog of its own to write
            assert len(ak.to_list(client["qcd"].select().read(["ht"]))) > 0
        finally:
            client.close()
        app.state.giod.federation.store.read_log.flush()  # (its timer writes it some seconds later)
    with giod.open(root) as home:
        assert set(home.catalog.last_reads("qcd")) == {db.id for db in home.catalog.databases("qcd")}


def test_a_rule_by_last_read_moves_only_what_was_not_read(fed, tmp_path):
    fed.add_site("vault", tape_url(tmp_path / "vault"), distance=10)
    dbs = fed.catalog.databases("qcd")
    now = max(db.created for db in dbs) + 40 * DAY  # every database written 40 days ago
    recent = {db.id for db in dbs[:5]}
    fed.catalog.record_reads(recent, now - 2 * DAY)  # read two days ago
    fed.catalog.record_reads({db.id for db in dbs[5:8]}, now - 35 * DAY)  # read long ago
    fed.catalog.add_tier_rule("qcd", "vault", older_than=7 * DAY, unread_for=30 * DAY)
    report = apply_tier_rules(fed.store, now=now)
    assert report.databases == len(dbs) - len(recent)
    vault = fed.catalog.site("vault").id
    for db in fed.catalog.databases("qcd"):
        on_tape = all(set(c.site_ids) == {vault} for c in db.containers)
        assert on_tape == (db.id not in recent), db.id


def test_the_rule_from_the_command_line(fed, tmp_path):
    f = str(fed.root)
    fed.add_site("vault", tape_url(tmp_path / "vault"), distance=10)

    def run(*args: str):
        return CliRunner().invoke(main, list(args))

    r = run("rule", "add", "qcd", "--tier", "nearline", "--sites", "vault", "--unread-for", "30d", "-f", f)
    assert r.exit_code == 0 and "not read for 2.592e+06 s" in r.output, r.output
    listed = run("rule", "ls", "-f", f).output
    assert "unread for" in listed and "2.592e+06" in listed, listed
    for args in (["--unread-for", "soon"], ["--unread-for", "-3d"]):
        bad = run("rule", "add", "qcd", "--tier", "nearline", "--sites", "vault", *args, "-f", f)
        assert bad.exit_code == 2 and "--unread-for" in bad.output and len(bad.output.strip().splitlines()) == 1
    bad = run("rule", "add", "qcd", "--copies", "1", "--unread-for", "3d", "-f", f)
    assert bad.exit_code == 2 and "--tier" in bad.output, bad.output
