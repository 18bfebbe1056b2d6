"""Long answers are bounded per token: change-feed streams, their lifetime, and clients that stop reading.

Against a real server on loopback with small bounds (``create_app(settings=…)``).
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import giod
from giod.server.app import ServerThread, create_app
from giod.testing import synthetic
from tests.server.test_security import call

BOUNDS = {"feed_streams_per_token": 3, "feed_streams": 5, "feed_max_seconds": 1.0}


@pytest.fixture(scope="module")
def fed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, giod.Federation]]:
    path = tmp_path_factory.mktemp("streams") / "fed"
    with giod.open(path, create=True) as f:
        ds = f.create_dataset("qcd", synthetic.schema())
        with ds.writer(database_events=50, cluster_events=50) as w:
            w.append(synthetic.events(50, seed=1))
        yield path, f


class Stream:
    """A feed request whose answer is left unread after its head."""

    def __init__(self, url: str, token: str, target: str = "/api/v1/feed?after=-1"):
        host, port = url.split("//", 1)[1].rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=10)
        self.conn.request("GET", target, headers={"Authorization": f"Bearer {token}"})
        self.response = self.conn.getresponse()
        self.status = self.response.status
        if self.status != 200:
            self.response.read()

    def close(self) -> None:
        self.response.close()
        self.conn.close()


def test_a_token_holds_a_bounded_number_of_feed_streams(fed: tuple[Path, giod.Federation]) -> None:
    path, f = fed
    greedy, other, third = (f.catalog.create_token("read", "qcd")[1] for _ in range(3))
    admin = f.catalog.create_token("admin")[1]
    with ServerThread(create_app(str(path), settings={**BOUNDS, "feed_max_seconds": 600.0})) as url:
        held: list[Stream] = []
        try:
            for _ in range(20):  # a token trying to take every connection of the server
                held.append(Stream(url, greedy))
            assert [s.status for s in held] == [200] * 3 + [429] * 17
            a = call(url, "GET", "/api/v1/feed?after=-1", greedy)
            assert json.loads(a.body)["error"] == "QuotaExceeded" and b"feed_streams_per_token" in a.body
            # other tokens are served: their own share, then the server's bound, which the admin passes
            held += [Stream(url, other), Stream(url, other)]
            assert [s.status for s in held[-2:]] == [200, 200]
            a = call(url, "GET", "/api/v1/feed?after=-1", third)  # five streams: the server's most
            assert a.status == 429 and b"(feed_streams)" in a.body
            held.append(Stream(url, admin))
            assert held[-1].status == 200
            assert call(url, "GET", "/api/v1/federation", admin).status == 200
            # a stream closed gives its slot back
            held.pop(0).close()
            held.pop().close()  # the admin's
            deadline = time.monotonic() + 10
            while (again := Stream(url, greedy)).status != 200:
                again.close()
                assert time.monotonic() < deadline, "the closed stream's slot never came back"
            again.close()
        finally:
            for stream in held:
                stream.close()


def test_a_stream_ends_after_the_server_s_longest_lifetime(fed: tuple[Path, giod.Federation]) -> None:
    path, f = fed
    token = f.catalog.create_token("read", "qcd")[1]
    with ServerThread(create_app(str(path), settings=BOUNDS)) as url:
        for target in ("/api/v1/feed?after=-1", "/api/v1/feed?after=-1&seconds=3600"):
            stream = Stream(url, token, target)
            try:
                assert stream.status == 200
                body = stream.response.read()  # to its end: the server ends the stream (else: timed out)
                assert b"event: version" in body
            finally:
                stream.close()
