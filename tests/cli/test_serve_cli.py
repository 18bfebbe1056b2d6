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


@pytest.mark.timeout(180)
@pytest.mark.parametrize("anonymous", [False, True])
def test_serve_prints_the_display_url_and_whether_anonymous_reading_is_on(fed_dir: str, anonymous: bool) -> None:
    import os
    import signal
    import urllib.request

    args = ["--port", "0", *(["--anonymous-read"] if anonymous else [])]
    proc = subprocess.Popen([sys.executable, "-m", "giod", "serve", "-f", fed_dir, *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first.startswith(f"giod serving {fed_dir} at http://127.0.0.1:"), first
        base = first.split(" at ", 1)[1].strip()
        display = proc.stderr.readline().strip()
        assert display == f"event display: {base}/display"
        with urllib.request.urlopen(display.split(": ", 1)[1], timeout=30) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
        if anonymous:
            assert proc.stderr.readline().startswith("anonymous reading is on: requests without a token can read")
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    rest = proc.stderr.read()
    proc.stderr.close()
    assert ("anonymous reading is on" in rest) is False  # said once, and only when it is on
