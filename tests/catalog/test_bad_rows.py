"""Catalog rows that do not parse: skipped with a warning by every ordinary command, reported by fsck,
removable by ``giod site rm`` / ``giod token rm``. The rows are written with raw SQL, on both backends."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import text

import giod
from giod.cli import main
from giod.store.consistency import fsck
from giod.testing import synthetic


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)  # a traceback fails the test


@pytest.fixture
def poisoned(catalog_url: str, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """A federation with data, and bad rows: table key -> words of what is wrong."""
    with giod.open(catalog_url, create=True) as fed:
        fed.add_site("local", str(tmp_path / "site"), 0)
        with fed.create_dataset("qcd", synthetic.schema()).writer() as w:
            w.append(synthetic.events(20, seed=1))
        good, _ = fed.catalog.create_token("read", note="good")
        sqlite = fed.catalog.url.startswith("sqlite")
        bad: dict[str, str] = {"sites name 'v6'": "not a URL", "sites name 'port'": "port"}
        with fed.catalog._engine.begin() as conn:
            insert_site = text("INSERT INTO sites (name, url, distance, created) VALUES (:n, :u, :d, 0)")
            conn.execute(insert_site, {"n": "v6", "u": "http://[::1", "d": 5})
            conn.execute(insert_site, {"n": "port", "u": "http://data.example:99999", "d": 7})
            insert_token = text("INSERT INTO tokens (note, scope, hash, created, expires) "
                                "VALUES ('bad', 'read', 'sha256:0', :c, :e)")
            if sqlite:  # SQLite keeps text in a number column as it is given
                conn.execute(insert_site, {"n": "far", "u": "/srv/far", "d": "far"})
                bad["sites name 'far'"] = "distance 'far' is not an integer"
                conn.execute(insert_token, {"c": "yesterday", "e": None})
            else:
                conn.execute(insert_token, {"c": 0.0, "e": float("nan")})
            token_id = conn.execute(text("SELECT max(id) FROM tokens")).scalar_one()
        bad[f"tokens id {token_id}"] = "not a time"
        assert good.id != token_id
    return catalog_url, bad


def test_bad_rows_are_skipped_with_a_warning_and_reported_by_fsck(poisoned, caplog: pytest.LogCaptureFixture):
    url, bad = poisoned
    caplog.set_level(logging.WARNING)
    for args in (["ls"], ["site", "ls"], ["gc", "--dry-run"], ["verify"], ["token", "list"],
                 ["select", "qcd", "njets >= 0", "--limit", "1"]):
        r = run(*args, "-f", url)
        assert r.exit_code == 0, (args, r.output)
    warned = caplog.text
    for key in bad:
        assert f"skipped catalog row: table {key}" in warned, (key, warned)
    assert "good" in run("token", "list", "-f", url).output
    r = run("site", "ls", "-f", url)
    assert "local" in r.output and "v6" not in r.output

    with giod.open(url) as fed:
        assert [s.name for s in fed.sites()] == ["local"]
        assert len(fed.dataset("qcd").read()) == 20
        report = fsck(fed.store)
    found = {p.path: p.detail for p in report.by_kind("catalog")}
    assert set(found) == {f"table {key}" for key in bad}, found
    for key, words in bad.items():
        assert words in found[f"table {key}"], (key, found)
    assert report.damaged
    r = run("fsck", "-f", url)
    assert r.exit_code == 1 and r.output.startswith("catalog: table sites name 'v6': "), r.output  # no site, no ':'


def test_one_command_warns_of_a_bad_row_once(poisoned, caplog: pytest.LogCaptureFixture):
    url, _ = poisoned
    caplog.set_level(logging.WARNING)
    r = run("token", "rm", "12345", "-f", url)
    assert r.exit_code == 2 and "no token 12345" in r.output, r.output
    with giod.open(url) as fed, giod.open(url) as again:  # two catalog objects of one catalog, in one process
        assert [s.name for s in fed.sites()] == [s.name for s in again.sites()] == ["local"]
    assert caplog.text.count("skipped catalog row: table sites name 'v6'") == 1, caplog.text


def test_site_rm_and_token_rm_remove_bad_rows(poisoned):
    url, bad = poisoned
    for key in bad:
        table, _, value = key.split(" ", 2)
        value = value.strip("'")
        r = run("site" if table == "sites" else "token", "rm", value, "-f", url)
        assert r.exit_code == 0, r.output
    with giod.open(url) as fed:
        assert fed.catalog.bad_rows() == []
        report = fsck(fed.store)
        assert not report.damaged, report.problems
        assert [t.note for t in fed.catalog.tokens()] == ["good"]
