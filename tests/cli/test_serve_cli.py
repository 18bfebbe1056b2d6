"""`giod serve` refused before it serves: one line on stderr, exit code 2."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

import giod


@pytest.fixture
def fed_dir(tmp_path: Path) -> str:
    giod.open(tmp_path / "fed", create=True).close()
    return str(tmp_path / "fed")


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from giod.cli import main; main()", "serve", *args],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.timeout(180)
def test_a_port_in_use_is_one_line_and_exit_2(fed_dir: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = _serve("-f", fed_dir, "--port", str(port))
    assert done.returncode == 2, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert lines == [f"error: cannot listen on 127.0.0.1:{port}: Address already in use"], done.stderr
    assert done.stdout == ""


@pytest.mark.timeout(180)
def test_an_address_that_is_not_of_this_host_is_one_line_and_exit_2(fed_dir: str) -> None:
    done = _serve("-f", fed_dir, "--host", "nosuchhost.invalid", "--port", "0")
    assert done.returncode == 2, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot listen on nosuchhost.invalid:0: "), done.stderr
