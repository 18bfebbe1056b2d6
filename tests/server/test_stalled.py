"""Clients that stop reading a query answer: bounded server memory, a timeout, and memory given back.

``giod serve`` runs in a process of its own, so that its memory is measured
alone (``/proc``); the clients are real sockets with a small receive buffer
that send a query and never read the answer. Issue 24 measured 20–40 MB held
per such client, and none of it returned after they had gone.
"""

from __future__ import annotations

import json
import select
import socket
import time
from pathlib import Path

import pytest

import giod
from giod.testing import synthetic
from tests.server.test_query_bounds import Server, call

CLIENTS = 8
SEND_TIMEOUT = 6.0
pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc to measure memory")


def _anon(server: Server) -> int:
    return server.status("RssAnon")


def _settled(server: Server, within: float = 20.0) -> int:
    """The server's anonymous memory once it has stopped growing (polled; fails after ``within`` seconds)."""
    deadline = time.monotonic() + within
    last = _anon(server)
    while time.monotonic() < deadline:
        time.sleep(0.5)  # polling a measurement; nothing waits on it
        now = _anon(server)
        if abs(now - last) < 1 << 20:
            return now
        last = now
    raise AssertionError("the server's memory kept moving")


def _stall(url: str, token: str, body: bytes) -> socket.socket:
    """A client that sends a query and never reads the answer."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((host, int(port)))
    s.sendall(b"POST /api/v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer "
              + token.encode() + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return s


def _dropped(s: socket.socket, within: float) -> bool:
    """Whether the server drops ``s`` (a reset or an end) within ``within`` seconds, the answer still unread."""
    p = select.poll()
    p.register(s, select.POLLERR | select.POLLHUP | select.POLLRDHUP)
    return bool(p.poll(within * 1000))


@pytest.mark.slow  # stalled clients held until dropped
@pytest.mark.timeout(300)
def test_stalled_query_clients_hold_little_are_dropped_and_their_memory_goes(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "fed"
    with giod.open(path, create=True) as fed:
        ds = fed.create_dataset("big", synthetic.schema())
        with ds.writer(database_events=20_000, cluster_events=1_000) as w:
            for first in (0, 10_000):
                w.append(synthetic.events(10_000, seed=first, first_event=first))
        token = fed.catalog.create_token("read", "big")[1]
        another = fed.catalog.create_token("read", "big")[1]
    monkeypatch.setenv("GIOD_SEND_TIMEOUT_SECONDS", str(SEND_TIMEOUT))
    monkeypatch.setenv("GIOD_QUERY_STREAMS_PER_TOKEN", str(CLIENTS))
    server = Server(path)
    body = json.dumps({"dataset": "big", "columns": ["jets", "tracks"]}).encode()
    clients: list[socket.socket] = []
    try:
        status, _, answer = call(server.url, "POST", "/api/v1/query", token, body, {"Content-Type": "application/json"})
        assert status == 200 and len(answer) > 30e6  # one answer is tens of MB
        before = _settled(server)
        clients = [_stall(server.url, token, body) for _ in range(CLIENTS)]
        stalled = _settled(server)
        each = (stalled - before) / CLIENTS
        print(f"{CLIENTS} stalled clients of a {len(answer) / 1e6:.0f} MB answer: server anonymous memory "
              f"{before / 1e6:.0f} MB -> {stalled / 1e6:.0f} MB ({each / 1e6:.1f} MB each)")
        assert each < 16e6, f"each stalled client holds {each / 1e6:.0f} MB of the server's memory"
        # the token holds its most answers: one more is refused, another token is served
        small = json.dumps({"dataset": "big", "columns": ["ht"], "limit": 5}).encode()
        hdr = {"Content-Type": "application/json"}
        status, _, refused = call(server.url, "POST", "/api/v1/query", token, small, hdr)
        assert status == 429 and json.loads(refused)["error"] == "QuotaExceeded"
        assert call(server.url, "POST", "/api/v1/query", another, small, hdr)[0] == 200
        # the server drops them once they have taken nothing for the send timeout
        assert all(_dropped(s, SEND_TIMEOUT + 20) for s in clients)
        after = _settled(server)
        print(f"after they were dropped: {after / 1e6:.0f} MB")
        assert after - before < (stalled - before) / 2 + 8e6
        # and the server answers as before
        status, _, again = call(server.url, "POST", "/api/v1/query", token, body, {"Content-Type": "application/json"})
        assert status == 200 and again == answer
    finally:
        for s in clients:
            s.close()
        server.stop()
