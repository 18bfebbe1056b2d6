"""A server's change feed is a hint, and untrusted: a version it announces is taken no further than the
server's catalog says, a value that is not a version is refused, and an event that never ends is not held
whole. A real giod server on loopback behind a relay that answers ``GET /api/v1/feed`` with a script."""

from __future__ import annotations

import http.client
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import giod
from giod.exchange.feed import MAX_EVENT, ServerFeed
from giod.testing import synthetic
from tests.server.conftest import Served, serve

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


class Relay:
    """Relays every request to ``upstream`` but the change feed, which answers ``script`` and ends."""

    def __init__(self, upstream: str):
        target = urlsplit(upstream)
        self.script = b""
        self.feeds = 0  # feed requests received: one more means the stream before it was read to its end
        self.served = threading.Condition()
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.startswith("/api/v1/feed"):
                    with relay.served:
                        relay.feeds += 1
                        relay.served.notify_all()
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    self.wfile.write(relay.script)
                    self.close_connection = True
                    return
                upstream = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=60)
                try:
                    upstream.request("GET", self.path,
                                     headers={k: v for k, v in self.headers.items() if k.lower() not in _HOP})
                    answer = upstream.getresponse()
                    data = answer.read()
                    self.send_response(answer.status)
                    for k, v in answer.getheaders():
                        if k.lower() not in _HOP:
                            self.send_header(k, v)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    upstream.close()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda *args: None  # type: ignore[method-assign] # a feed let go mid-event
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def relayed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Relay]]:
    for served in serve(tmp_path_factory.mktemp("feed") / "fed"):
        with served.local.create_dataset("d", synthetic.schema()).writer() as w:
            w.append(synthetic.events(10, seed=1))
        relay = Relay(served.url)
        try:
            yield served, relay
        finally:
            relay.close()


def _feed(served: Served, relay: Relay, script: bytes) -> tuple[giod.Federation, ServerFeed]:
    relay.script, relay.feeds = script, 0
    fed = giod.open(relay.url, token=served.admin)
    return fed, ServerFeed(fed)


def _until_read(relay: Relay, times: int) -> None:
    """Wait until the feed asked for the script ``times`` times (the streams before the last read whole)."""
    with relay.served:
        assert relay.served.wait_for(lambda: relay.feeds >= times, timeout=30)


def test_a_version_past_the_catalog_s_is_taken_as_the_catalog_s(relayed: tuple[Served, Relay]) -> None:
    served, relay = relayed
    current = served.local.catalog.version()
    fed, feed = _feed(served, relay, b'data: {"version": 1000000000000000}\n\n')
    try:
        _until_read(relay, 2)  # the stream ended once and was read again: the event was taken
        # the follower would pin its copy at the announced version and, finding nothing new, wait on
        # it at once again; the hint goes no further than the catalog
        assert feed.wait(current, 0.2) == current
        with served.local.dataset("d").writer() as w:  # a real commit, announced by no event of its own
            w.append(synthetic.events(10, seed=2))
        assert feed.wait(current, 30) == current + 1  # the next reading of the script reaches it
    finally:
        feed.close()
        fed.close()


@pytest.mark.parametrize("data", [b'{"version": "7"}', b'{"version": 1.5}', b'{"version": true}',
                                  b'{"version": 18446744073709551616}', b"[7]", b"{}"])
def test_a_value_that_is_no_version_is_refused(relayed: tuple[Served, Relay], data: bytes,
                                               caplog: pytest.LogCaptureFixture) -> None:
    served, relay = relayed
    current = served.local.catalog.version()
    caplog.set_level(logging.WARNING, "giod.exchange")
    fed, feed = _feed(served, relay, b"data: " + data + b"\n\n")
    try:
        _until_read(relay, 2)
        assert feed.wait(current, 0.1) == current
        assert "change feed of" in caplog.text and "interrupted: malformed answer from the server" in caplog.text
    finally:
        feed.close()
        fed.close()


def test_an_event_that_never_ends_is_not_held_whole(relayed: tuple[Served, Relay],
                                                   caplog: pytest.LogCaptureFixture) -> None:
    served, relay = relayed
    caplog.set_level(logging.WARNING, "giod.exchange")
    fed, feed = _feed(served, relay, b"data: " + b"7" * (8 * MAX_EVENT))
    try:
        _until_read(relay, 2)
        assert f"runs past {MAX_EVENT} bytes" in caplog.text
    finally:
        feed.close()
        fed.close()


def test_the_relay_passes_a_sound_event(relayed: tuple[Served, Relay], tmp_path: Path) -> None:
    """The script is what the feed reads: an event of the next version wakes a waiter with it."""
    served, relay = relayed
    current = served.local.catalog.version()
    with served.local.dataset("d").writer() as w:
        w.append(synthetic.events(10, seed=3))
    fed, feed = _feed(served, relay, f'data: {{"version": {current + 1}}}\n\n'.encode())
    try:
        assert feed.wait(current, 10) == current + 1
    finally:
        feed.close()
        fed.close()
