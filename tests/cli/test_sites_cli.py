"""`giod site add|rm|ls` and the commands about every site, with a site that cannot be reached.

A site whose host does not resolve must be reported on a line of its own,
naming it and why, while fsck, gc, site ls and verify still do their work
on the other sites; bad URLs are refused before anything is stored.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import giod
from giod.cli import main
from giod.errors import ConfigError, ConflictError
from giod.testing import synthetic

UNREACHABLE = "ftp://nosuchhost.invalid/x"


def run(*args: str) -> Result:
    # catch_exceptions=False: anything but a GiodError (socket.gaierror, OSError) fails the test
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def fed_dir(tmp_path: Path) -> str:
    path = tmp_path / "fed"
    with giod.open(path, create=True) as fed:
        ds = fed.create_dataset("qcd", synthetic.schema())
        with ds.writer(database_events=100, program="test") as w:
            w.append(synthetic.events(200, seed=5))
    return str(path)


def _one_error_line(r: Result) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.output, r.output
    return lines[0]


def _n_containers(fed_dir: str) -> int:
    with giod.open(fed_dir) as fed:
        return sum(len(db.containers) for db in fed.catalog.databases("qcd"))


def _site_names(fed_dir: str) -> list[str]:
    with giod.open(fed_dir, create=False) as fed:
        return [s.name for s in fed.sites()]


@pytest.mark.parametrize("url, says", [
    ("ftp://", "names no host"),
    ("ftp:///x", "names no host"),
    ("http://", "names no host"),
    ("https://:8470/files/x", "names no host"),
    ("http://host:99999", "invalid port"),
    ("nosuchkind://host/x", "no file system known for nosuchkind://"),
    ("1ftp://host/x", "does not start with a URL scheme"),
    ("ftp://user:secret@host/x", "holds a password"),
    ("ftp://host/a b", "holds spaces"),
    ("root://host//data/../etc", "holds a '.' or '..' in its path"),
    ("root://host//./data", "holds a '.' or '..' in its path"),
    ("memory://a/../b", "holds a '.' or '..' in its path"),
    ("root://host//data?authz=secret", "holds a token"),
    ("root://host//data?x=1&AUTHZ=secret", "holds a token"),
    ("/data/x\n", "control characters"),
])
def test_site_add_refuses_a_url_of_the_wrong_form_and_stores_nothing(fed_dir: str, url: str, says: str) -> None:
    before = _site_names(fed_dir)
    line = _one_error_line(CliRunner().invoke(main, ["site", "add", "new", url, "-f", fed_dir]))
    assert says in line
    assert _site_names(fed_dir) == before


def test_the_api_refuses_the_same_urls(fed_dir: str) -> None:
    with giod.open(fed_dir, create=False) as fed:
        with pytest.raises(ConfigError, match="names no host"):
            fed.add_site("new", "ftp:///x")
        with pytest.raises(ConfigError, match="holds a password"):
            fed.add_site("new", "ftp://user:secret@host/x")
        assert [s.name for s in fed.sites()] == ["local"]


def test_a_site_that_does_not_answer_is_registered_with_a_warning(fed_dir: str) -> None:
    r = CliRunner().invoke(main, ["site", "add", "bad", UNREACHABLE, "-f", fed_dir], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert f"site bad at {UNREACHABLE}" in r.stdout
    assert "warning: site bad does not answer now: site bad cannot be reached" in r.stderr
    assert "bad" in _site_names(fed_dir)


def test_an_unreachable_site_is_reported_while_the_others_are_checked_and_cleaned(fed_dir: str) -> None:
    assert run("site", "add", "bad", UNREACHABLE, "-f", fed_dir).exit_code == 0
    orphan = Path(fed_dir) / "data" / "leftover.parquet"
    orphan.write_bytes(b"left by a crash")
    old = time.time() - 7200
    os.utime(orphan, (old, old))

    r = run("fsck", "-f", fed_dir)
    assert r.exit_code == 1  # a site that does not answer is not a clean bill of health
    assert "unreachable: bad: " in r.output and "nosuchhost.invalid" in r.output
    assert "orphan: local:leftover.parquet" in r.output
    n = _n_containers(fed_dir)
    assert f"checked {n} files" in r.output  # every replica at the site that answers

    r = run("site", "ls", "-f", fed_dir)
    assert r.exit_code == 0
    assert [ln for ln in r.output.splitlines() if ln.startswith("unreachable: ")] == [
        f"unreachable: bad: site bad cannot be reached at {UNREACHABLE}: "
        "gaierror: [Errno -2] Name or service not known"]

    r = run("verify", "-f", fed_dir)
    assert r.exit_code == 1
    assert "unreachable: bad: " in r.output and f"checked {n} replicas" in r.output

    r = run("gc", "--grace", "60", "-f", fed_dir)
    assert r.exit_code == 1
    assert "unreachable: bad: site bad cannot be reached" in r.output
    assert "removed local:leftover.parquet" in r.output and not orphan.exists()

    r = run("replicator", "--once", "-f", fed_dir)
    assert "away: bad" in r.output and "Traceback" not in r.output


def test_site_rm(fed_dir: str, tmp_path: Path) -> None:
    line = _one_error_line(CliRunner().invoke(main, ["site", "rm", "nosuch", "-f", fed_dir]))
    assert "no site named 'nosuch'" in line

    second = tmp_path / "second"
    assert run("site", "add", "second", str(second), "-f", fed_dir).exit_code == 0
    assert run("replicate", "qcd", "--to", "second", "-f", fed_dir).exit_code == 0
    files = sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    n = _n_containers(fed_dir)
    assert len(files) == n

    line = _one_error_line(CliRunner().invoke(main, ["site", "rm", "second", "-f", fed_dir]))
    assert f"site second still has {n} replicas" in line and "--force" in line

    assert run("rule", "add", "qcd", "--copies", "1", "--sites", "second", "-f", fed_dir).exit_code == 0
    line = _one_error_line(CliRunner().invoke(main, ["site", "rm", "second", "--force", "-f", fed_dir]))
    assert "rule 1 names site second" in line
    assert run("rule", "rm", "1", "-f", fed_dir).exit_code == 0

    with giod.open(fed_dir, create=False) as fed:
        version = fed.version
    r = run("site", "rm", "second", "--force", "-f", fed_dir)
    assert r.exit_code == 0 and "site second removed with its replica rows" in r.output
    assert _site_names(fed_dir) == ["local"]
    assert sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file()) == files  # files untouched
    with giod.open(fed_dir, create=False) as fed:
        assert fed.version == version + 1
        assert len(fed.dataset("qcd").select("njets >= 0")) == 200
        assert all(len(fed.catalog.replicas(c.id)) == 1 for db in fed.catalog.databases("qcd")
                   for c in db.containers)

    # the last good copy of the data is never dropped, --force or not
    line = _one_error_line(CliRunner().invoke(main, ["site", "rm", "local", "--force", "-f", fed_dir]))
    assert f"site local holds the only good copy of {n} containers" in line and "giod replicate qcd" in line
    assert _site_names(fed_dir) == ["local"]


def test_remove_site_from_the_api(fed_dir: str) -> None:
    with giod.open(fed_dir, create=False) as fed:
        fed.add_site("empty", "memory://giod-empty-site")
        assert fed.remove_site("empty") == fed.version
        assert [s.name for s in fed.sites()] == ["local"]
        with pytest.raises(ConflictError, match="only good copy"):
            fed.remove_site("local", force=True)


def test_site_ls_asks_every_site_at_once(fed_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sites that do not answer cost their timeout once, not once each: every health check is under way
    before any returns (each waits for all the others here; asked one after another, the first one's wait
    would run out and the command would fail)."""
    import threading

    from giod.replication import sites
    from giod.storage.kind import SiteHealth

    for name in ("far", "farther"):
        assert run("site", "add", name, str(tmp_path / name), "-f", fed_dir).exit_code == 0
    everyone = threading.Barrier(3, timeout=30)
    asked: list[str] = []

    def probe(site: object) -> SiteHealth:
        asked.append(getattr(site, "name", "?"))
        everyone.wait()
        return SiteHealth(True, "", 1 << 30, 1 << 31)

    monkeypatch.setattr(sites, "probe", probe)
    r = run("site", "ls", "-f", fed_dir)
    assert r.exit_code == 0, r.output
    assert sorted(asked) == ["far", "farther", "local"]
    assert "unreachable" not in r.output
