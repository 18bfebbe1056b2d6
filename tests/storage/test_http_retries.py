"""An endpoint retries what may be sent again, on a real HTTP server on loopback.

GET, HEAD and requests said ``idempotent`` are tried up to ``RETRIES`` times when the connection
fails or the server answers 5xx; anything else is tried once. Answers the server gives on
purpose (4xx) are never retried. Both ``request`` and ``stream`` behave alike.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from giod.errors import NotFound, StorageError
from giod.storage.http import RETRIES, Endpoint


class Script(BaseHTTPRequestHandler):
    """Answers each path with the next status of its script (the last one repeats); counts requests."""

    scripts: dict[str, list[int]] = {}
    seen: dict[str, int] = {}

    def _answer(self) -> None:
        n = self.seen.get(self.path, 0)
        self.seen[self.path] = n + 1
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        script = self.scripts.get(self.path, [200])
        status = script[min(n, len(script) - 1)]
        if status == 0:  # the connection is cut before any answer
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        doc = {"error": "NotFound", "message": "no such thing"} if status == 404 else {"attempt": n + 1}
        data = json.dumps({**doc, "echo": body.decode()}).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_HEAD = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, dict[str, list[int]], dict[str, int]]]:
    Script.scripts, Script.seen = {}, {}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Script)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", Script.scripts, Script.seen
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("streamed", [False, True])
def test_an_idempotent_request_is_retried_until_it_succeeds(server, streamed):
    url, scripts, seen = server
    scripts["/a"] = [503, 0, 200]
    ep = Endpoint(url)
    call = ep.stream if streamed else ep.request
    r = call("GET", "/a")
    data = r.read() if streamed else r.data
    assert json.loads(data)["attempt"] == 3 == seen["/a"] == RETRIES
    scripts["/b"] = [500, 200]
    assert json.loads(call("PUT", "/b", body=b"x", idempotent=True).read() if streamed
                      else call("PUT", "/b", body=b"x", idempotent=True).data)["echo"] == "x"
    assert seen["/b"] == 2


@pytest.mark.parametrize("streamed", [False, True])
def test_a_request_that_may_not_be_sent_twice_is_tried_once(server, streamed):
    url, scripts, seen = server
    scripts["/c"] = [503, 200]
    ep = Endpoint(url)
    call = ep.stream if streamed else ep.request
    with pytest.raises(StorageError, match="503"):
        call("POST", "/c", body=b"{}")
    assert seen["/c"] == 1
    scripts["/d"] = [0, 200]
    with pytest.raises(StorageError, match="unreachable"):
        call("GET", "/d", idempotent=False)
    assert seen["/d"] == 1


@pytest.mark.parametrize("streamed", [False, True])
def test_a_server_that_keeps_failing_gives_its_error_after_the_last_try(server, streamed):
    url, scripts, seen = server
    scripts["/e"] = [502]
    ep = Endpoint(url)
    call = ep.stream if streamed else ep.request
    with pytest.raises(StorageError, match="502"):
        call("GET", "/e")
    assert seen["/e"] == RETRIES
    scripts["/f"] = [0]
    with pytest.raises(StorageError, match="unreachable"):
        call("GET", "/f")
    assert seen["/f"] == RETRIES
    scripts["/g"] = [404]  # an answer given on purpose: the typed error, at once
    with pytest.raises(NotFound, match="no such thing"):
        call("GET", "/g")
    assert seen["/g"] == 1


def test_a_server_that_is_not_there_is_unreachable(server):
    url, _, _ = server
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(StorageError, match="unreachable"):
        Endpoint(f"http://127.0.0.1:{port}").request("GET", "/healthz")
