"""A server that answers "staging" for ever cannot hold a client for ever: it gives up after ``staging_wait``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from giod.errors import ConfigError, Staging
from giod.storage import http
from tests.conftest import scripted_server


class _ForeverStaging(BaseHTTPRequestHandler):
    seen = 0

    def do_GET(self) -> None:
        type(self).seen += 1
        self.send_response(503)
        self.send_header("Retry-After", "1")
        self.send_header(http.STAGING_HEADER, "0.05")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _ForeverStaging.seen = 0
    with scripted_server(_ForeverStaging) as url:
        yield url


@pytest.mark.parametrize("preload", [True, False])
def test_a_read_gives_up_after_its_staging_wait(server, preload):
    ep = http.Endpoint(server, "t", staging_wait=0.3)
    start = time.monotonic()
    with pytest.raises(Staging, match="still staging the file from tape"):
        if preload:
            ep.request("GET", "/files/disk/a.arrow")
        else:
            ep.stream("GET", "/files/disk/a.arrow")
    took = time.monotonic() - start
    assert 0.25 <= took < 5.0, took  # it waited as told, then stopped
    assert 5 <= _ForeverStaging.seen <= 8, _ForeverStaging.seen  # asked again every 0.05 s meanwhile


def test_the_wait_comes_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("GIOD_STAGING_WAIT_SECONDS", "0")
    ep = http.Endpoint(server, "t")
    assert ep.staging_wait == 0.0
    with pytest.raises(Staging, match="GIOD_STAGING_WAIT_SECONDS=0"):
        ep.request("GET", "/files/disk/a.arrow")
    assert _ForeverStaging.seen == 1  # no second ask
    monkeypatch.setenv("GIOD_STAGING_WAIT_SECONDS", "a day")
    with pytest.raises(ConfigError, match="staging_wait_seconds must be a float"):
        http.Endpoint(server, "t")
