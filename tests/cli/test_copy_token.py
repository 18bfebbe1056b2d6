"""``giod --token`` and ``giod copy``: the group's token goes to the one server of SRC and DST (or to both when
they are the same server), never from one server to another. Against a real ``giod serve`` on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import giod
from giod.cli import main
from giod.testing import synthetic

EVENTS = 40


@dataclass
class Server:
    url: str
    read: str  # a read token
    write: str  # a write token


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("copy-token") / "fed"
    with giod.open(root, create=True) as fed:
        with fed.create_dataset("qcd", synthetic.schema()).writer() as w:
            w.append(synthetic.events(EVENTS, seed=8))
        read = fed.catalog.create_token("read", note="tests")[1]
        write = fed.catalog.create_token("write", note="tests")[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIOD_")}
    proc = subprocess.Popen([sys.executable, "-m", "giod", "serve", "-f", str(root), "--port", "0"], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # "giod serving … at http://127.0.0.1:PORT", once listening
        assert "giod serving" in line, line + proc.stderr.read()
        yield Server(line.split(" at ", 1)[1].strip(), read, write)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        if proc.stderr is not None:
            proc.stderr.close()


def run(*args: str, **env: str) -> Result:
    unset = {k: None for k in ("GIOD_TOKEN", "GIOD_FROM_TOKEN", "GIOD_TO_TOKEN", "GIOD_FEDERATION")}
    return CliRunner().invoke(main, list(args), env={**unset, **env})


def test_the_group_token_goes_to_the_one_server(server: Server, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    assert run("init", str(dst)).exit_code == 0
    r = run("--token", server.read, "copy", "qcd", "--from", server.url, "--to", str(dst))
    assert r.exit_code == 0, r.output
    with giod.open(dst) as fed:
        assert len(fed.dataset("qcd")) == EVENTS
    # the side's own option wins over the group's, and the group's over the side's variable
    r = run("--token", "giod_1_bogus", "copy", "qcd", "--from", server.url, "--from-token", server.read,
            "--to", str(dst))
    assert r.exit_code == 0, r.output
    r = run("--token", server.read, "copy", "qcd", "--from", server.url, "--to", str(dst),
            GIOD_FROM_TOKEN="giod_1_bogus")
    assert r.exit_code == 0, r.output


def test_the_group_token_is_never_sent_to_a_second_server(server: Server, tmp_path: Path) -> None:
    other = "http://127.0.0.1:9/"  # never asked: the command stops before it opens anything
    r = run("--token", server.read, "copy", "qcd", "--from", server.url, "--to", other)
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "--from-token and --to-token" in lines[0], r.output
    # with the other side's own token, the group's can mean only one server
    r = run("--token", server.read, "copy", "qcd", "--from", server.url, "--to", other, "--to-token", "x")
    assert r.exit_code != 0 and "--from-token and --to-token" not in r.output, r.output


def test_one_server_on_both_sides_takes_the_group_token_on_both(server: Server) -> None:
    r = run("--token", server.write, "copy", "qcd", "--from", server.url, "--to", server.url.rstrip("/") + "/",
            "--as", "qcd_copy")
    assert r.exit_code == 0, r.output
    r = run("--token", server.read, "-f", server.url, "ls")
    assert r.exit_code == 0 and "qcd_copy" in r.output, r.output
