"""Rules in the catalog (both backends, and a level-3 catalog migrated), and the replicator satisfying them."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, insert, inspect, update

from giod.catalog import Catalog, ContainerSpec, DatabaseCommit, migrations
from giod.catalog.engine import create_catalog_engine, parse_url
from giod.catalog.migrations import v0001_initial as v1
from giod.cli import main
from giod.errors import ConfigError, ConflictError, NotFound
from giod.replication import replicator, replicator_pass, rule_state, rule_states
from giod.replication import rules as rules_module

from .conftest import all_paths, expected_events, states_at


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _level_3_catalog(url: str) -> Engine:
    engine = create_catalog_engine(parse_url(url))
    with engine.begin() as conn:
        assert migrations.migrate(conn, target=3) == (None, 3)
        schema = conn.execute(insert(v1.schemas).values(name="e", fingerprint="sha256:x", text="a: 1\n")
                              .returning(v1.schemas.c.id)).scalar_one()
        ds = conn.execute(insert(v1.datasets).values(name="qcd", schema_id=schema, created_version=1, next_entry=0,
                                                     created=1.0).returning(v1.datasets.c.id)).scalar_one()
        conn.execute(insert(v1.dataset_schemas).values(dataset_id=ds, version=1, schema_id=schema))
        for name in ("cern", "caltech"):
            conn.execute(insert(v1.sites).values(name=name, url=f"/srv/{name}", distance=0, created=2.0))
        conn.execute(insert(v1.versions).values(version=1, created=1.0, description="step 1"))
        conn.execute(update(v1.federation).values(version=1))
    return engine


def test_a_level_3_catalog_gains_rules(catalog_url: str) -> None:
    engine = _level_3_catalog(catalog_url)
    with engine.connect() as conn:
        assert not inspect(conn).has_table("rules")
    engine.dispose()
    with Catalog.open(catalog_url, create=False) as catalog:
        with catalog._engine.connect() as conn:
            assert migrations.read_level(conn) == migrations.latest_level() >= 4 and inspect(conn).has_table("rules")
        assert catalog.version() == 1 and catalog.rules() == []
        rule = catalog.add_rule("qcd", 2, ["caltech", "cern"], ["tag"])
        assert catalog.version() == 1  # rules are policy, not federation content
        assert catalog.rules() == [rule] and catalog.rule(rule.id) == rule
        assert (rule.copies, rule.sites, rule.containers) == (2, ("caltech", "cern"), ("tag",))


def test_rule_methods_and_replica_bookkeeping(catalog: Catalog) -> None:
    for name, distance in (("cern", 0), ("caltech", 10), ("tokyo", 20)):
        catalog.add_site(name, f"/srv/{name}", distance)
    schema = catalog.add_schema("e", "a: 1\n", "sha256:e")
    catalog.create_dataset("qcd", schema)
    spec = ContainerSpec("tag", "qcd/a/tag.parquet", "crc32c:00000001", 10, (5,), schema)
    db = catalog.database(catalog.commit_database(DatabaseCommit("qcd", 5, "cern", (spec,))).database_id)
    cid = db.containers[0].id

    any_site = catalog.add_rule("qcd", 3)
    assert any_site.sites is None and any_site.containers is None
    with pytest.raises(NotFound, match="caltek"):
        catalog.add_rule("qcd", 1, ["caltek"])
    with pytest.raises(NotFound, match="qcd"):
        catalog.add_rule("qdc", 1)
    with pytest.raises(ConfigError, match="only 1 sites are listed"):
        catalog.add_rule("qcd", 2, ["cern"])
    with pytest.raises(ConfigError, match="at least one copy"):
        catalog.add_rule("qcd", 0)
    second = catalog.add_rule("qcd", 1, ["tokyo"], ["tag"])
    assert [r.id for r in catalog.rules("qcd")] == [any_site.id, second.id]
    catalog.remove_rule(any_site.id)
    with pytest.raises(NotFound):
        catalog.remove_rule(any_site.id)
    assert catalog.rules() == [second]

    before = catalog.version()
    catalog.set_replica_states([(cid, "caltech", "copying"), (cid, "tokyo", "good")])
    assert catalog.version() == before + 1  # one transaction for the batch
    states = {r.site: r.state for r in catalog.replica_states("qcd")[cid]}
    assert states == {"cern": "good", "caltech": "copying", "tokyo": "good"}
    assert [r.site for r in catalog.replica_states()[cid]] == ["cern", "caltech", "tokyo"]  # nearest first
    assert catalog.replica_summary()["tokyo"] == {"good": (1, 10)}
    with pytest.raises(ConflictError):
        catalog.forget_replica(cid, "tokyo")  # a good copy is never forgotten
    assert catalog.forget_replica(cid, "caltech") and not catalog.forget_replica(cid, "caltech")

    # damage: bad while a good copy remains; the last good one lost, and the bad ones with it
    assert catalog.mark_damaged(cid, "cern") == "bad"
    assert catalog.mark_damaged(cid, "tokyo") == "lost"
    assert {r.site: r.state for r in catalog.replica_states("qcd")[cid]} == {"cern": "lost", "tokyo": "lost"}
    assert catalog.database(db.id).containers[0].site_ids == ()


def test_replicator_satisfies_rules_new_databases_included(home, tmp_path: Path):
    home.add_site("cern", str(tmp_path / "cern"), 5)
    home.add_site("caltech", str(tmp_path / "caltech"), 10)
    home.add_site("tokyo", str(tmp_path / "tokyo"), 20)
    home.catalog.add_rule("qcd", 3, containers=["tag", "reco"])  # any sites: local + the two nearest
    home.catalog.add_rule("qcd", 1, sites=["tokyo"], containers=["tag"])
    before = {s.rule.id: s.describe() for s in rule_states(home.catalog)}
    # a rule naming the tags copies their index with them: 4 databases, 3 containers (2 for tokyo)
    assert list(before.values()) == ["24 missing", "8 missing"]

    report = replicator_pass(home.catalog, home.site, streams=4)
    assert report.ok and report.transfers.copied == 32
    tag_reco = all_paths(home, containers={"tag", "tag-index", "reco"})
    tags = all_paths(home, containers={"tag", "tag-index"})
    assert set(states_at(home, "cern")) == set(states_at(home, "caltech")) == tag_reco
    assert set(states_at(home, "tokyo")) == tags
    assert [s.describe() for s in report.rules] == ["satisfied", "satisfied"]

    # a database committed after the rules were made
    planned = home.catalog.version()
    with home.dataset("qcd").writer(database_events=60) as w:
        w.append(expected_events()[:60])
    assert [s.describe() for s in rule_states(home.catalog)] == ["6 missing", "2 missing"]
    # what a follower plans: the same transfers, found among what changed only
    sites = home.catalog.sites()
    for rule in home.catalog.rules():
        every, new = rule_state(home.catalog, rule, sites), rule_state(home.catalog, rule, sites,
                                                                       changed_since=planned)
        assert new.containers < every.containers
        assert [(t.container.id, t.site, t.sources) for t in new.transfers] == \
            [(t.container.id, t.site, t.sources) for t in every.transfers]
        with pytest.MonkeyPatch.context() as mp:  # many new containers: the dataset's replicas in one query
            mp.setattr(rules_module, "FEW_CONTAINERS", 0)
            many = rule_state(home.catalog, rule, sites, changed_since=planned)
        assert [(t.container.id, t.site, t.sources) for t in many.transfers] == \
            [(t.container.id, t.site, t.sources) for t in every.transfers]
    report = replicator_pass(home.catalog, home.site)
    assert report.ok and report.transfers.copied == 8
    assert all(s.satisfied for s in rule_states(home.catalog))


def test_cli_rules_and_replicator_once(home, tmp_path: Path):
    f = str(home.root)
    assert run("site", "add", "backup", str(tmp_path / "backup"), "-f", f).exit_code == 0
    r = run("rule", "add", "qcd", "--copies", "2", "--containers", "tag", "-f", f)
    assert r.exit_code == 0 and "rule 1: 2 copies of qcd (containers tag) on any sites" in r.output
    r = run("rule", "ls", "-f", f)
    assert "8 missing" in r.output  # the tags and their index
    r = run("replicator", "--once", "-f", f)
    assert r.exit_code == 0 and "rule 1 satisfied" in r.output and "8 copied" in r.output
    assert "satisfied" in run("rule", "ls", "-f", f).output
    for bad, message in ((["rule", "add", "qcd", "--copies", "3"], "only 2 sites"),
                         (["rule", "add", "qcd", "--copies", "1", "--sites", "bakup"], "backup"),
                         (["rule", "add", "qcd", "--copies", "1", "--containers", "reko"], "no container reko"),
                         (["rule", "rm", "7"], "no rule 7"), (["rule", "rm", "x"], "not a number")):
        r = CliRunner().invoke(main, [*bad, "-f", f])
        assert r.exit_code == 2 and message in r.output, (bad, r.output)
    assert run("rule", "rm", "1", "-f", f).output.strip() == "rule 1 removed"
    # removing a rule deletes nothing
    assert set(states_at(home, "backup")) == all_paths(home, containers={"tag", "tag-index"})


def test_replicator_once_fails_while_a_rule_cannot_be_met(home, tmp_path: Path):
    """A rule that names a site that does not answer stays unsatisfied, and the pass says so."""
    home.add_site("gone", str(tmp_path / "missing" / "deeper"), 5)
    home.catalog.add_rule("qcd", 1, sites=["gone"], containers=["tag"])
    r = CliRunner().invoke(main, ["replicator", "--once", "-f", str(home.root)])
    assert r.exit_code == 1 and "8 missing" in r.output and "away: gone" in r.output  # tags and their index


def test_the_replicator_runs_passes_until_told_to_stop(home, tmp_path: Path):
    home.add_site("backup", str(tmp_path / "backup"), 5)
    home.catalog.add_rule("qcd", 2, containers=["tag"])
    passes = []

    def on_pass(p) -> None:
        passes.append(p)
        if len(passes) == 1:  # a database committed between two passes
            with home.dataset("qcd").writer(database_events=60) as w:
                w.append(expected_events()[:60])

    replicator(home.catalog, home.site, interval=0.01, on_pass=on_pass, stop=lambda: len(passes) >= 2)
    assert [p.transfers.copied for p in passes] == [8, 2]  # tags and their index
    assert all(p.ok for p in passes)
