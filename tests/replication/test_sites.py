"""giod site add / site ls: every kind of site URL, health, and tokens from the environment only."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.errors import AuthError
from giod.replication import probe, replicate
from giod.server.app import ServerThread, create_app
from giod.storage.remote import connect, site_token_env

from .conftest import all_paths, start_remote


def run(*args: str, **kw):
    return CliRunner().invoke(main, list(args), **kw)


def test_site_add_takes_every_kind_of_url(home, remote_site, tmp_path: Path, monkeypatch):
    f = str(home.root)
    monkeypatch.chdir(tmp_path)
    r = run("site", "add", "disk", "relative/dir", "--distance", "3", "-f", f)
    assert r.exit_code == 0 and (tmp_path / "relative" / "dir").is_dir()
    assert home.catalog.site("disk").url == str(tmp_path / "relative" / "dir")  # relative to where the user is
    host = remote_site.url
    assert run("site", "add", "caltech", host, "-f", f).exit_code == 0  # the server's nearest site
    assert home.catalog.site("caltech").url == f"{host}/files/local"
    monkeypatch.setenv(site_token_env("other"), remote_site.token)
    assert run("site", "add", "other", f"{host}/?site=local", "-f", f).exit_code == 0
    assert home.catalog.site("other").url == f"{host}/files/local"
    assert run("site", "add", "mem", "memory://giod-replication-test", "-f", f).exit_code == 0
    r = run("site", "add", "x0", host, "-f", f)  # no token for it: the server says so, in one line
    assert r.exit_code == 2 and r.output.startswith("error: read access needs a token (Authorization: Bearer …); "
                                                    "none was given: set GIOD_TOKEN (GIOD_TOKEN_<SITE>")
    assert len(r.output.splitlines()) == 1
    monkeypatch.setenv("GIOD_TOKEN", remote_site.token)
    for name, url, message in (("x1", f"{host}/?site=nope", "has no site 'nope'"),
                               ("x2", f"{host}/api/v1", "neither"),
                               ("x3", "nofs://somewhere", "no file system known for nofs://"),
                               ("disk", str(tmp_path / "again"), "already exists")):
        r = run("site", "add", name, url, "-f", f)
        assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, (url, r.output)
    # a memory:// site is a real site: replicas go there and come back
    rep = replicate(home.catalog, home.site, "qcd", "mem", containers=["tag"])
    assert rep.ok and rep.copied == 4


def test_site_ls_shows_health(home, tmp_path: Path, monkeypatch):
    root = tmp_path / "server-far"
    served = giod.open(root, create=True)
    monkeypatch.setenv(site_token_env("far"), served.catalog.create_token("admin")[1])
    served.close()
    home.add_site("backup", str(tmp_path / "backup"), 5)
    replicate(home.catalog, home.site, "qcd", "backup", containers=["tag"])
    home.catalog.mark_damaged(home.catalog.databases("qcd")[0].container("tag").id, "backup")
    with ServerThread(create_app(str(root))) as url:
        home.add_site("far", f"{url}/files/local", 20)
        assert probe(home.site("far")).reachable
        up = _site_ls(str(home.root))
    down = _site_ls(str(home.root))
    assert up["local"][3] == "yes" and up["local"][5].startswith("20 ")  # 4 databases × 5 containers
    assert up["backup"][5].startswith("3 ") and up["backup"][6] == "1"  # 3 good, 1 bad
    assert up["backup"][4].endswith(("GB", "TB"))  # the free space of a disk
    assert up["far"][3] == "yes" and up["far"][4] == "?"  # a server does not tell its free space
    assert down["far"][3] == "no" and "unreachable" in down["far"][9]  # the server has stopped
    assert down["backup"][5:] == up["backup"][5:]  # (the free space moves with the machine)


def _site_ls(federation: str) -> dict[str, list[str]]:
    out = run("site", "ls", "-f", federation, env={"COLUMNS": "400"}).output
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    return {row[0]: row for row in rows}


def test_tokens_come_from_the_environment_per_site(home, tmp_path: Path, monkeypatch):
    for remote in start_remote(tmp_path, "vault", monkeypatch):
        token = remote.token
        monkeypatch.delenv(site_token_env("vault"))
        monkeypatch.delenv("GIOD_TOKEN", raising=False)
        home.add_site("vault", remote.site_url, 20)
        with pytest.raises(AuthError):
            replicate(home.catalog, home.site, "qcd", "vault", containers=["tag"])
        assert "vault" not in {r.site for reps in home.catalog.replica_states("qcd").values() for r in reps}
        # GIOD_TOKEN serves every site without one of its own (read when a process first meets the server;
        # connect() makes this process read it again) …
        monkeypatch.setenv("GIOD_TOKEN", token)
        connect(remote.url)
        fed = giod.open(home.root)
        assert replicate(fed.catalog, fed.site, "qcd", "vault", containers=["tag"]).copied == 4
        # … and GIOD_TOKEN_<NAME> wins over it
        monkeypatch.setenv("GIOD_TOKEN", "giod_1_" + "x" * 43)
        monkeypatch.setenv(site_token_env("vault"), token)
        fed = giod.open(home.root)
        assert replicate(fed.catalog, fed.site, "qcd", "vault").copied == len(all_paths(home)) - 4
        # the catalog never holds a token
        assert token not in Path(home.root, "catalog.sqlite").read_bytes().decode("latin-1")
