"""TLS: the server with a self-signed certificate, the client verifying it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import giod

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")


def _certificate(tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


@contextmanager
def _tls_server(fed: Path, cert: Path, key: Path) -> Iterator[str]:
    """``giod serve --certfile --keyfile`` in a process of its own; the line it printed on starting."""
    proc = subprocess.Popen([sys.executable, "-c", "from giod.cli import main; main()", "serve", "-f",
                             str(fed), "--port", "0", "--certfile", str(cert), "--keyfile", str(key)],
                            stderr=subprocess.PIPE, text=True)
    try:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stderr.readline()), daemon=True)
        reader.start()
        reader.join(60)
        assert line and "https://" in line[0], f"server did not start: {line}"
        yield line[0].strip()
    finally:
        proc.terminate()
        proc.wait(20)


def test_https_with_a_self_signed_certificate(tmp_path):
    cert, key = _certificate(tmp_path)
    local = giod.open(tmp_path / "fed", create=True)
    token = local.catalog.create_token("read")[1]
    with _tls_server(tmp_path / "fed", cert, key) as started:
        url = started.rsplit(" at ", 1)[1]
        fed = giod.open(url, token=token, verify=str(cert))
        assert fed.datasets() == []
        with pytest.raises(giod.StorageError):  # an unknown certificate is refused
            giod.open(url.replace("127.0.0.1", "localhost"), token=token, verify=True)


def test_file_bodies_over_tls_are_the_file_s_bytes(tmp_path):
    """Under TLS the kernel cannot send a file: large bodies are read and written, byte for byte the file."""
    import http.client
    import ssl

    cert, key = _certificate(tmp_path)
    local = giod.open(tmp_path / "fed", create=True)
    token = local.catalog.create_token("admin")[1]
    data = os.urandom(3_000_017)
    target = Path(local.site("local").root) / "qcd/big.bin"
    target.parent.mkdir(parents=True)
    target.write_bytes(data)
    with _tls_server(tmp_path / "fed", cert, key) as started:
        port = int(started.rsplit(":", 1)[1])
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30,
                                           context=ssl.create_default_context(cafile=str(cert)))
        auth = {"Authorization": f"Bearer {token}"}
        for asked, want in [(None, data), ("bytes=5-2500004", data[5:2_500_005]),
                            ("bytes=1-1200000,2000001-3000000", None)]:
            conn.request("GET", "/files/local/qcd/big.bin", headers=auth | ({"Range": asked} if asked else {}))
            r = conn.getresponse()
            body = r.read()
            assert len(body) == int(r.getheader("content-length"))
            if want is not None:
                assert body == want
            else:
                assert data[1:1_200_001] in body and data[2_000_001:3_000_001] in body
