"""File bodies sent by ``sendfile`` (plain TCP), and by reads where the connection offers no zero-copy send.

A real server on loopback over files of random bytes larger than the one
chunk an answer is read whole below: exact bytes back for whole files, ranges
at odd offsets and multi-ranges; a file that shrinks under the server ends the
connection, never an answer that looks whole; a client that stops reading is
dropped after the send timeout and one that leaves is let go, the file closed
either way; many clients at once get their own bytes.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import giod
from giod.server import sendfile
from giod.server.app import ServerThread, create_app
from giod.server.state import ServerState
from giod.storage.remote import Limits
from tests.server.test_ranges import parse_multipart

SIZE = 5_000_011  # bytes: past the 1 MiB an answer is read whole below, and odd
BIG = "qcd/big.bin"
LIMITS = Limits(max_ranges=64, max_request_bytes=64 << 20)
SEND_TIMEOUT = 2.0


@dataclass
class Server:
    url: str
    state: ServerState
    admin: str
    root: Path
    data: bytes

    def get(self, path: str = BIG, range_header: str | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(*self.address(), timeout=30)
        headers = {"Authorization": f"Bearer {self.admin}"}
        if range_header is not None:
            headers["Range"] = range_header
        try:
            conn.request("GET", f"/files/local/{path}", headers=headers)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def address(self) -> tuple[str, int]:
        host, port = self.url.split("//", 1)[1].rsplit(":", 1)
        return host, int(port)

    def raw(self, path: str, rcvbuf: int = 4096) -> socket.socket:
        """A socket that has asked for ``path`` whole and read nothing yet."""
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect(self.address())
        s.sendall(f"GET /files/local/{path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {self.admin}\r\n\r\n"
                  .encode())
        return s

    def settled(self, within: float = 20.0) -> int:
        """The server's open files once none is left open (polled; fails after ``within`` seconds)."""
        deadline = time.monotonic() + within
        while self.state.metrics.open_files and time.monotonic() < deadline:
            time.sleep(0.01)  # polling a counter the server's task lowers once the answer has ended
        return self.state.metrics.open_files


def _serve(base: Path, zerocopy: bool, sndbuf: int | None = None) -> Iterator[Server]:
    local = giod.open(base, create=True)
    data = np.random.default_rng(7).integers(0, 256, SIZE, dtype=np.uint8).tobytes()
    root = Path(local.site("local").root)
    (root / "qcd").mkdir(parents=True, exist_ok=True)
    (root / BIG).write_bytes(data)
    (root / "qcd/huge.bin").write_bytes(bytes(64 << 20))
    app = create_app(str(base), limits=LIMITS, settings={"send_timeout_seconds": SEND_TIMEOUT})
    thread = ServerThread(app, zerocopy=zerocopy)
    if sndbuf is not None:  # the connections it accepts keep this send buffer (the kernel grows it no more)
        thread._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    with thread as url:
        yield Server(url, app.state.giod, local.catalog.create_token("admin", note="tests")[1], root, data)
    local.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _serve(tmp_path_factory.mktemp("sendfile") / "fed", True)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The same server offering no zero-copy send, as under TLS: file bodies are read and written."""
    yield from _serve(tmp_path_factory.mktemp("plain") / "fed", False)


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The byte counts of the spans sent by ``sendfile``, in order."""
    seen: list[int] = []
    original = sendfile._sendfile

    async def counted(sockfd: int, span: Any, timeout: float | None) -> None:
        seen.append(span.count)
        await original(sockfd, span, timeout)

    monkeypatch.setattr(sendfile, "_sendfile", counted)
    return seen


@pytest.mark.parametrize("which", ["server", "plain"])
def test_whole_files_ranges_and_multiranges_are_the_file_s_bytes(which: str, request: pytest.FixtureRequest,
                                                                 spans: list[int]) -> None:
    s: Server = request.getfixturevalue(which)
    status, headers, body = s.get()
    assert status == 200 and body == s.data and headers["content-length"] == str(SIZE)
    for a, b in [(1, 1_048_577), (999_983, 4_999_999), (3, SIZE - 1), (SIZE - 2_000_001, SIZE - 1)]:
        status, headers, body = s.get(range_header=f"bytes={a}-{b}")
        assert status == 206 and body == s.data[a:b + 1], (a, b)
        assert headers["content-range"] == f"bytes {a}-{b}/{SIZE}"
    status, headers, body = s.get(range_header="bytes=-1500001")
    assert status == 206 and body == s.data[-1_500_001:]
    asked = [(7, 700_006), (4_000_001, 4_999_999), (5, 11), (1_234_567, 2_345_677)]
    status, headers, body = s.get(range_header="bytes=" + ",".join(f"{a}-{b}" for a, b in asked))
    assert status == 206 and int(headers["content-length"]) == len(body)
    parts = parse_multipart(headers["content-type"], body)
    assert [(first, last) for first, last, _, _ in parts] == asked
    assert all(payload == s.data[first:last + 1] for first, last, _, payload in parts)
    if which == "server":  # every span of a file went by sendfile: the whole file, 5 ranges, 4 parts
        assert spans == [SIZE, 1_048_577, 4_000_017, SIZE - 3, 2_000_001, 1_500_001,
                         700_000, 999_999, 7, 1_111_111]
    else:
        assert spans == []
    assert s.settled() == 0


def test_a_small_answer_is_sent_whole_without_sendfile(server: Server, spans: list[int]) -> None:
    status, _, body = server.get(range_header="bytes=10-1000009")
    assert status == 206 and body == server.data[10:1_000_010]
    assert spans == []


def _shrinking(monkeypatch: pytest.MonkeyPatch, path: Path, keep: int) -> None:
    """The file is cut to ``keep`` bytes after the server opened it, before the first byte of its body is sent."""
    original = sendfile._sendfile

    async def cut(sockfd: int, span: Any, timeout: float | None) -> None:
        os.truncate(path, keep)
        await original(sockfd, span, timeout)

    monkeypatch.setattr(sendfile, "_sendfile", cut)


@pytest.mark.parametrize("which", ["server", "plain"])
def test_a_file_that_shrinks_under_the_server_ends_the_connection(which: str, request: pytest.FixtureRequest,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    s: Server = request.getfixturevalue(which)
    path = s.root / "qcd/shrinks.bin"
    path.write_bytes(s.data)
    keep = 3_000_000
    if which == "server":
        _shrinking(monkeypatch, path, keep)
    else:
        from giod.server import byteranges

        chunks = byteranges.file_chunks

        def cut(fd: int, start: int, stop: int) -> Iterator[bytes]:
            os.truncate(path, keep)
            return chunks(fd, start, stop)

        monkeypatch.setattr("giod.server.streams.file_chunks", cut)
    conn = http.client.HTTPConnection(*s.address(), timeout=30)
    conn.request("GET", "/files/local/qcd/shrinks.bin", headers={"Authorization": f"Bearer {s.admin}"})
    r = conn.getresponse()
    assert r.status == 200 and r.getheader("content-length") == str(SIZE)
    got = bytearray()
    with contextlib.suppress(ConnectionError):  # a reset, or an end: the connection is over either way
        while chunk := r.read1(1 << 20):
            got += chunk
    conn.close()
    # what arrived is the file's first bytes, short of the length announced: the client knows it is cut
    assert 0 < len(got) <= keep and bytes(got) == s.data[:len(got)]
    assert s.settled() == 0
    assert s.get()[2] == s.data  # the server is unharmed


def _dropped(s: socket.socket, within: float) -> bool:
    """Whether the server drops ``s`` (a reset or an end) within ``within`` seconds, the answer still unread."""
    p = select.poll()
    p.register(s, select.POLLERR | select.POLLHUP | select.POLLRDHUP)
    return bool(p.poll(within * 1000))


@pytest.mark.parametrize("which", ["server", "plain"])
def test_a_client_that_stops_reading_is_dropped_after_the_send_timeout(which: str,
                                                                       request: pytest.FixtureRequest) -> None:
    s: Server = request.getfixturevalue(which)
    t0 = time.monotonic()
    stalled = [s.raw("qcd/huge.bin") for _ in range(3)]
    try:
        # the server is not held meanwhile: others are answered while the stalled clients wait
        for _ in range(3):
            assert s.get()[2] == s.data
        assert all(_dropped(c, SEND_TIMEOUT + 15) for c in stalled)
        assert time.monotonic() - t0 >= SEND_TIMEOUT
        assert s.settled() == 0
    finally:
        for c in stalled:
            c.close()


@pytest.mark.parametrize("which", ["server", "plain"])
def test_a_client_that_leaves_mid_answer_is_let_go(which: str, request: pytest.FixtureRequest) -> None:
    s: Server = request.getfixturevalue(which)
    for _ in range(4):
        c = s.raw("qcd/huge.bin", rcvbuf=1 << 16)
        assert len(c.recv(1 << 16)) > 0
        c.close()
    assert s.settled() == 0
    assert s.get()[2] == s.data


def test_many_clients_at_once_get_their_own_bytes(server: Server, spans: list[int]) -> None:
    rng = np.random.default_rng(3)
    asked = [(int(a), int(a + n)) for a, n in zip(rng.integers(0, SIZE // 2, 48), rng.integers(1 << 20, SIZE // 2, 48),
                                                 strict=True)]
    wrong: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def client(mine: list[tuple[int, int]]) -> None:
        try:
            for a, b in mine:
                status, _, body = server.get(range_header=f"bytes={a}-{b - 1}")
                if status != 206 or body != server.data[a:b]:
                    wrong.append((a, b))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(asked[i::16],)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and not wrong
    assert sorted(spans) == sorted(b - a for a, b in asked)
    assert server.settled() == 0



@pytest.fixture
def narrow(tmp_path: Path) -> Iterator[Server]:
    """A server whose connections have a small, fixed send buffer: a few tens of kB fill the kernel's part
    of a connection whose client reads nothing, whatever the kernel would have grown it to."""
    yield from _serve(tmp_path / "fed", True, sndbuf=4096)


def test_bytes_the_connection_still_holds_go_before_the_file_s(narrow: Server, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """Pipelined requests: three answers written whole are still in the connection's buffer (the client reads
    nothing yet) when the fourth, sent by sendfile, starts; its file bytes wait for them.

    The three answers (36 kB) fill the kernel's buffers (the server's is fixed at a few kB, the client's
    4 kB) and leave the rest in the transport's, under the size at which the server would stop and wait
    for the client: the fourth request is then answered at once, its head queued behind them."""
    server = narrow
    held = threading.Event()
    original = sendfile._flushed

    async def watched(cycle: Any, timeout: float | None) -> None:
        if cycle.transport.get_write_buffer_size():
            held.set()
        await original(cycle, timeout)

    monkeypatch.setattr(sendfile, "_flushed", watched)
    small = [(i * 1_000_003, i * 1_000_003 + 12_000) for i in range(3)]
    asked = [*small, (17, SIZE - 17)]
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.connect(server.address())
    c.sendall(b"".join(f"GET /files/local/{BIG} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.admin}\r\n"
                       f"Range: bytes={a}-{b - 1}\r\n\r\n".encode() for a, b in asked))
    try:
        assert held.wait(30)
        f = c.makefile("rb")
        for a, b in asked:
            status = f.readline()
            assert status.startswith(b"HTTP/1.1 206"), status
            length = None
            while (line := f.readline()) != b"\r\n":
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            assert length == b - a
            assert f.read(length) == server.data[a:b]
        f.close()
    finally:
        c.close()
    assert server.settled() == 0
