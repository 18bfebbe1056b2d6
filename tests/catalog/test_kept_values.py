"""What the writes keep beside the rows (a dataset's totals, a line and a record per database for the
listings, each tag field's coverage for planning) is checked against the rows by ``giod fsck``, on both
backends: a kept value that disagrees gives wrong answers and no error, so nothing else would tell."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

import giod
from giod.catalog.records import ContainerSpec
from giod.cli import main
from giod.store.consistency import fsck
from giod.testing import synthetic

# one edit of what is kept each, and the words fsck must say of it
EDITS = {
    "totals": ("UPDATE dataset_totals SET n_events = n_events + 1 "
               "WHERE version = (SELECT max(version) FROM dataset_totals)", "its kept totals (61 events"),
    "line": ("UPDATE database_summaries SET n_events = 21 WHERE database_id = 2",
             "kept lines of 1 database (db2)"),
    "record": ("UPDATE database_summaries SET record = replace(record, '[\"run\",1.0,1.0]', '[\"run\",1.0,2.0]') "
               "WHERE database_id = 3", "kept records of 1 database (db3)"),
    "record that does not parse": ("UPDATE database_summaries SET record = replace(record, 'tag', 'gat') "
                                   "WHERE database_id = 3", "malformed catalog row: the listing record of database 3"),
    "missing line": ("DELETE FROM database_summaries WHERE database_id = 1", "kept lines of 1 database (db1)"),
    "coverage count": ("UPDATE tag_coverage SET n_databases = 4 WHERE field = 'ht' "
                       "AND version = (SELECT max(version) FROM tag_coverage)",
                       "coverage kept for tag field ht (4 databases"),
    "coverage width": ("UPDATE tag_coverage SET width = 1 WHERE field = 'njets' "
                       "AND version = (SELECT max(version) FROM tag_coverage)",
                       "coverage kept for tag field njets (3 databases, widest span 1.0)"),
    "coverage of no field": ("INSERT INTO tag_coverage (dataset_id, field, version, n_databases, width) "
                             "SELECT dataset_id, 'nothing', max(version), 3, 0 FROM tag_coverage "
                             "GROUP BY dataset_id", "coverage kept for tag field nothing (3 databases"),
}


@pytest.fixture
def filled(catalog_url: str, tmp_path: Path) -> str:
    with giod.open(catalog_url, create=True) as fed:
        fed.add_site("local", str(tmp_path / "site"), 0)
        ds = fed.create_dataset("d", synthetic.schema())
        for seed in range(3):
            with ds.writer() as w:
                w.append(synthetic.events(20, seed=seed))
    return catalog_url


def _edit(url: str, statement: str) -> None:
    with giod.open(url) as fed, fed.catalog._engine.begin() as conn:
        assert conn.execute(text(statement)).rowcount >= 1


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_fsck_tells_each_kept_value_that_is_not_its_rows(filled: str, edit: str) -> None:
    with giod.open(filled) as fed:
        assert fsck(fed.store).problems == []  # a sound catalog: nothing to say
    statement, words = EDITS[edit]
    _edit(filled, statement)
    with giod.open(filled) as fed:
        report = fsck(fed.store)
    assert report.damaged
    assert [p.kind for p in report.problems] in (["catalog"], ["catalog", "catalog"])
    assert any(words in p.detail and p.path == "dataset d" for p in report.problems), report.problems
    assert report.files_checked == 12  # the files of every database all the same


def test_the_command_line_prints_it_and_exits_1(filled: str) -> None:
    _edit(filled, EDITS["coverage count"][0])
    result = CliRunner().invoke(main, ["fsck", "-f", filled], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "catalog: dataset d: the coverage kept for tag field ht (4 databases" in result.output
    assert result.output.splitlines()[-1] == (
        "the catalog keeps values its rows do not hold: run giod fsck --repair to write them again")


def test_a_dataset_row_that_does_not_parse_hides_no_other_dataset(tmp_path: Path) -> None:
    root = tmp_path / "fed"
    with giod.open(root, create=True) as fed:
        for name in ("a", "b"):
            with fed.create_dataset(name, synthetic.schema()).writer() as w:
                w.append(synthetic.events(10, seed=1))
        with fed.catalog._engine.begin() as conn:  # SQLite keeps text in a number column
            conn.execute(text("UPDATE datasets SET created = 'x' WHERE name = 'a'"))
            conn.execute(text("UPDATE dataset_totals SET n_events = 11 WHERE dataset_id = "
                              "(SELECT id FROM datasets WHERE name = 'b')"))
        report = fsck(fed.store)
    said = [(p.kind, p.path, p.detail) for p in report.problems]
    assert said[0][:2] == ("catalog", "table datasets")
    assert said[0][2].startswith("malformed catalog row: dataset a is not as written: (1, 'a', 1"), said
    assert [p.path for p in report.problems] == ["table datasets", "dataset b"], said  # b still checked


def test_a_pinned_check_sees_a_later_commit_as_sound(filled: str) -> None:
    """The kept values and the rows are read at one version: a commit between the reads is no problem."""
    with giod.open(filled) as fed:
        version = fed.catalog.version()
        dbs = fed.catalog.databases("d", version)
        with fed.dataset("d").writer() as w:
            w.append(synthetic.events(5, seed=9))
        from giod.store.consistency import kept_problems
        assert kept_problems(fed.catalog, "d", version, dbs) == []
        later = kept_problems(fed.catalog, "d", fed.catalog.version(), dbs)  # the rows are older: all differ
        assert "its kept totals (65 events in 4 databases" in later[0].detail


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_repair_writes_each_kept_value_again_from_the_rows(filled: str, edit: str) -> None:
    with giod.open(filled) as fed:
        sound = fed.catalog.version()
        listed = list(fed.catalog.iter_databases("d"))
    _edit(filled, EDITS[edit][0])
    with giod.open(filled) as fed:
        edited = fed.catalog.version()
        repaired = fsck(fed.store, repair=True)
        assert repaired.problems and {p.kind for p in repaired.problems} == {"repaired"}
        assert not repaired.damaged
        assert f"written again from the rows at version {edited + 1}" in repaired.problems[0].detail
        assert fsck(fed.store).problems == []  # nothing left to say
        ds = fed.dataset("d")
        assert len(ds) == 60 and list(fed.catalog.iter_databases("d")) == listed == fed.catalog.databases("d")
        assert len(ds.select("ht > 0")) == len(fed.dataset("d").at(sound).select("ht > 0"))
        assert [line.n_events for line in fed.catalog.database_rows("d")] == [20, 20, 20]


def test_repair_after_a_pass_and_a_deletion_rewrites_summaries_as_they_read(filled: str) -> None:
    """Summaries written by a commit, a later pass and a deletion, all written again: the same records."""
    with giod.open(filled) as fed:
        cat = fed.catalog
        first, second, third = cat.databases("d")
        tag = first.container("tag")
        assert tag is not None
        cat.add_containers(first.id, [ContainerSpec("extra", tag.path.replace("tag.", "extra."), tag.checksum,
                                                    tag.size, tag.cluster_entries, tag.schema_id)],
                           "local", tag_stats={"ht": (1.0, 2.0)})
        cat.delete_database(second.id)
        before = cat.databases("d")
        totals = cat.dataset_summary("d")
        coverage = cat.tag_coverage("d")
        cat.rebuild_kept("d", [db.id for db in before])
        assert list(cat.iter_databases("d")) == before == cat.databases("d")
        assert cat.dataset_summary("d") == totals
        rebuilt = cat.tag_coverage("d")
        assert {f: n for f, (n, _) in rebuilt.items()} == {f: n for f, (n, _) in coverage.items()}
        # the span a write keeps is the widest a row ever had; written again, the rows' own, never wider
        assert all(rebuilt[f][1] <= coverage[f][1] for f in coverage)
        assert rebuilt["ht"][1] == max(hi - lo for lo, hi in (db.tag_stats["ht"] for db in before))
        assert fsck(fed.store).by_kind("catalog") == []  # (the extra container has no file: "missing")


def test_repair_is_a_new_version_that_older_snapshots_do_not_see(filled: str) -> None:
    _edit(filled, EDITS["totals"][0])
    with giod.open(filled) as fed:
        edited = fed.catalog.version()
        fsck(fed.store, repair=True)
        assert fed.catalog.versions(1)[0].description.startswith("rebuild kept values of dataset d")
        assert fed.catalog.dataset_summary("d", edited)["n_events"] == 61  # as it was read then
        assert fed.catalog.dataset_summary("d")["n_events"] == 60


def test_the_command_line_repairs_and_exits_0(filled: str) -> None:
    _edit(filled, EDITS["line"][0])
    result = CliRunner().invoke(main, ["fsck", "--repair", "-f", filled], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "repaired: dataset d: the listing's kept lines of 1 database (db2)" in result.output
    assert "): 0 problems, 2 repaired, " in result.output  # the line and the record
    again = CliRunner().invoke(main, ["fsck", "-f", filled], catch_exceptions=False)
    assert again.exit_code == 0 and "0 problems" in again.output, again.output
