"""`giod token create|list|revoke|rm` on a real embedded federation."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import giod
from giod.cli import main
from giod.errors import AuthError
from giod.testing import synthetic


@pytest.fixture
def fed_dir(tmp_path: Path) -> str:
    path = tmp_path / "fed"
    with giod.open(path, create=True) as fed:
        fed.create_dataset("qcd", synthetic.schema())
    return str(path)


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _create(fed_dir: str, *args: str) -> tuple[Result, str]:
    r = run("token", "create", *args, "-f", fed_dir)
    assert r.exit_code == 0, r.output
    return r, r.stdout.rstrip("\n").splitlines()[-1]


def test_create_prints_the_secret_alone_on_the_last_line(fed_dir: str) -> None:
    r, secret = _create(fed_dir, "--scope", "write", "--dataset", "qcd", "--expires-in", "30d", "--note", "daq")
    assert secret.startswith("giod_") and " " not in secret
    with giod.open(fed_dir, create=False) as fed:
        token = fed.catalog.verify_token(secret)
    assert (token.scope, token.dataset, token.note) == ("write", "qcd", "daq")
    assert token.expires is not None and token.expires - token.created == pytest.approx(30 * 86400, abs=60)
    assert f"token {token.id}: write on dataset qcd" in r.stdout
    assert "does not exist" not in r.stdout


@pytest.mark.parametrize(("given", "seconds"), [("12h", 12 * 3600), ("3600s", 3600), ("90m", 5400), ("2w", 14 * 86400)])
def test_expires_in_units(fed_dir: str, given: str, seconds: int) -> None:
    _, secret = _create(fed_dir, "--scope", "read", "--expires-in", given)
    with giod.open(fed_dir, create=False) as fed:
        token = fed.catalog.verify_token(secret)
    assert token.expires is not None and token.expires - token.created == pytest.approx(seconds, abs=60)


def test_a_dataset_that_does_not_exist_yet_is_said(fed_dir: str) -> None:
    r, secret = _create(fed_dir, "--scope", "write", "--dataset", "run2026")
    assert "dataset run2026 does not exist (yet)" in r.stdout
    assert r.stdout.rstrip("\n").splitlines()[-1] == secret


def test_list_and_revoke(fed_dir: str) -> None:
    _, reader = _create(fed_dir, "--scope", "read", "--note", "students")
    _, admin = _create(fed_dir, "--scope", "admin")
    listed = run("token", "list", "-f", fed_dir)
    assert listed.exit_code == 0
    for secret in (reader, admin):
        assert secret not in listed.output and secret.split("_", 2)[2] not in listed.output
    assert "students" in listed.output and "admin" in listed.output and listed.output.count("active") == 2
    with giod.open(fed_dir, create=False) as fed:
        reader_id = fed.catalog.verify_token(reader).id

    r = run("token", "revoke", str(reader_id), "-f", fed_dir)
    assert r.exit_code == 0 and f"token {reader_id} revoked" in r.output
    with giod.open(fed_dir, create=False) as fed:
        with pytest.raises(AuthError, match="revoked"):
            fed.catalog.verify_token(reader)
        assert fed.catalog.verify_token(admin).scope == "admin"
    listed = run("token", "list", "-f", fed_dir)
    assert listed.output.count("revoked") == 1 and listed.output.count("active") == 1


def test_rm_removes_the_row_and_a_running_server_refuses_the_token(fed_dir: str) -> None:
    import http.client
    import time
    from urllib.parse import urlsplit

    from giod.server.app import ServerThread, create_app
    from giod.server.auth import CACHE_SECONDS

    _, reader = _create(fed_dir, "--scope", "read", "--note", "students")
    _, unused = _create(fed_dir, "--scope", "read", "--note", "never used")
    with giod.open(fed_dir, create=False) as fed:
        reader_id, unused_id = fed.catalog.verify_token(reader).id, fed.catalog.verify_token(unused).id

    def status(url: str, secret: str) -> int:
        u = urlsplit(url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        try:
            conn.request("GET", "/api/v1/datasets", headers={"authorization": f"Bearer {secret}"})
            response = conn.getresponse()
            response.read()
            return response.status
        finally:
            conn.close()

    with ServerThread(create_app(fed_dir)) as url:
        assert status(url, reader) == 200  # verified, and remembered by the server for a moment
        r = run("token", "rm", str(reader_id), "-f", fed_dir)
        assert r.exit_code == 0 and r.output.strip() == f"token {reader_id} removed", r.output
        r = run("token", "rm", str(unused_id), "-f", fed_dir)
        assert r.exit_code == 0
        assert status(url, unused) == 401  # never verified before: refused at once
        removed = time.monotonic()
        while status(url, reader) == 200:  # a token verified a moment ago: refused once its check is due
            assert time.monotonic() - removed < CACHE_SECONDS + 1, "the server still takes a removed token"
        assert status(url, reader) == 401
    listed = run("token", "list", "-f", fed_dir)
    assert "students" not in listed.output and "never used" not in listed.output
    with giod.open(fed_dir, create=False) as fed:
        assert fed.catalog.tokens() == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["create"], "--scope"),
        (["create", "--scope", "root"], "'root'"),
        (["create", "--scope", "admin", "--dataset", "qcd"], "whole federation"),
        (["create", "--scope", "read", "--expires-in", "30"], "unit"),
        (["create", "--scope", "read", "--expires-in", "-3d"], "positive"),
        (["create", "--scope", "read", "--expires-in", "soon"], "'soon'"),
        (["create", "--scope", "read", "--expires-in", "99999999999999d"], "at most 3650d"),
        (["create", "--scope", "read", "--expires-in", "1" + "0" * 400 + "s"], "at most 3650d"),
        (["create", "--scope", "read", "--expires-in", "522w"], "at most 3650d"),
        (["revoke", "x"], "not a number"),
        (["revoke", "42"], "no token 42"),
        (["rm", "x"], "not a number"),
        (["rm", "42"], "no token 42"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(fed_dir: str, args: list[str], says: str) -> None:
    r = CliRunner().invoke(main, ["token", *args, "-f", fed_dir])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], r.output
    with giod.open(fed_dir, create=False) as fed:
        assert fed.catalog.tokens() == []


def test_list_survives_a_row_whose_expiry_is_not_a_date(fed_dir: str) -> None:
    # such rows were stored before expiries were bounded; listing must still show every token
    import sqlite3

    _, secret = _create(fed_dir, "--scope", "read", "--expires-in", "3650d", "--note", "old")
    with sqlite3.connect(Path(fed_dir) / "catalog.sqlite") as db:
        db.execute("UPDATE tokens SET expires = 8.64e18")
    r = run("token", "list", "-f", fed_dir)
    assert r.exit_code == 0, r.output
    assert "not a date" in r.output and "old" in r.output and "active" in r.output
    with giod.open(fed_dir, create=False) as fed:
        assert fed.catalog.verify_token(secret).note == "old"


def test_a_missing_federation_is_exit_2(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["token", "list", "-f", str(tmp_path / "nothing")])
    assert r.exit_code == 2 and "no giod federation" in r.output
    assert not (tmp_path / "nothing").exists()


def test_ls_is_the_listing_of_sites_rules_and_tokens_and_list_a_hidden_alias(fed_dir: str) -> None:
    run("rule", "add", "qcd", "--copies", "1", "-f", fed_dir)
    _create(fed_dir, "--scope", "read", "--note", "alias")
    for group, word in (("site", "local"), ("rule", "qcd"), ("token", "alias")):
        canonical, alias = run(group, "ls", "-f", fed_dir), run(group, "list", "-f", fed_dir)
        assert canonical.exit_code == alias.exit_code == 0, canonical.output + alias.output
        assert word in canonical.stdout and canonical.stdout == alias.stdout
        shown = run(group, "--help").stdout
        assert " ls " in shown and " list " not in shown
