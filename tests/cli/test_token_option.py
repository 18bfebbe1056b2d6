"""A token for a server that needs one: ``giod --token``, ``--token`` after the command, or ``GIOD_TOKEN``;
without one, the error line says how to give it. Against a real ``giod serve`` on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from click.testing import CliRunner, Result

import giod
from giod.cli import main
from giod.errors import AuthError
from giod.testing import synthetic

EVENTS = 120


@dataclass
class Server:
    url: str
    token: str  # a read token


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("token-option") / "fed"
    with giod.open(root, create=True) as fed:
        with fed.create_dataset("qcd", synthetic.schema()).writer(database_events=60) as w:
            w.append(synthetic.events(EVENTS, seed=8))
        token = fed.catalog.create_token("read", note="tests")[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIOD_TOKEN")}
    proc = subprocess.Popen([sys.executable, "-m", "giod", "serve", "-f", str(root), "--port", "0"], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # "giod serving … at http://127.0.0.1:PORT", once listening
        assert "giod serving" in line, line + proc.stderr.read()
        yield Server(line.split(" at ", 1)[1].strip(), token)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        if proc.stderr is not None:
            proc.stderr.close()


def run(*args: str, token_env: str | None = None) -> Result:
    env = {"GIOD_TOKEN": token_env, "GIOD_FEDERATION": None}
    return CliRunner().invoke(main, list(args), env=env)


def one_error_line(r: Result) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    return lines[0]


def test_without_a_token_the_error_says_how_to_give_one(server: Server) -> None:
    for args in (["-f", server.url, "ls"], ["select", "qcd", "ht > 0", "--count", "-f", server.url]):
        line = one_error_line(run(*args))
        assert "GIOD_TOKEN" in line and "--token" in line, line


def test_the_library_says_so_too(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GIOD_TOKEN", raising=False)
    with pytest.raises(AuthError, match="GIOD_TOKEN"):
        giod.open(server.url)


@pytest.mark.parametrize("where", ["before", "after"])
def test_token_option_before_or_after_the_command(server: Server, where: str) -> None:
    given = ["--token", server.token]
    args = [*given, "-f", server.url, "select", "qcd", "ht > 0", "--count"] if where == "before" else \
        ["select", "qcd", "ht > 0", "--count", "-f", server.url, *given]
    r = run(*args)
    assert r.exit_code == 0, r.output
    expected = len(giod.open(server.url, token=server.token).dataset("qcd").select("ht > 0"))
    assert r.output.startswith(f"{expected:,} of {EVENTS:,} events selected")


def test_giod_token_in_the_environment(server: Server) -> None:
    r = run("-f", server.url, "ls", token_env=server.token)
    assert r.exit_code == 0 and "qcd" in r.output, r.output


def test_the_option_wins_over_the_environment_and_the_command_over_the_group(server: Server) -> None:
    r = run("-f", server.url, "ls", "--token", server.token, token_env="not-a-token")
    assert r.exit_code == 0 and "qcd" in r.output, r.output
    r = run("--token", "not-a-token", "-f", server.url, "ls", "--token", server.token)
    assert r.exit_code == 0 and "qcd" in r.output, r.output
    line = one_error_line(run("--token", server.token, "-f", server.url, "ls", "--token", "not-a-token"))
    assert "none was given" not in line


def test_an_empty_token_option_is_refused() -> None:
    line = one_error_line(run("--token", "", "ls"))
    assert "--token" in line and "empty" in line
