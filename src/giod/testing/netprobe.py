"""Loopback servers and clients that measure a path: echo and source servers, ping and fetch.

They measure the latency proxy (``giod bench proxy --check``) and
serve the tests of clients that go through it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from giod.errors import GiodError


class _Background:
    """An asyncio TCP server in a thread of its own; closes its connections when stopped."""

    def __init__(self, handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any], host: str):
        self.handler = handler
        self.host = host
        self.loop = asyncio.new_event_loop()
        self.writers: set[asyncio.StreamWriter] = set()
        self.port = 0
        self.thread = threading.Thread(target=self._run, name="giod-test-server", daemon=True)
        self._started = threading.Event()
        self._server: asyncio.base_events.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            await self.handler(reader, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.writers.discard(writer)
            writer.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._server = self.loop.run_until_complete(asyncio.start_server(self._handle, self.host, 0, backlog=1024))
        self.port = self._server.sockets[0].getsockname()[1]
        self._started.set()
        self.loop.run_forever()
        self.loop.close()

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self.writers):
            writer.transport.abort()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()

    @contextmanager
    def running(self) -> Iterator[tuple[str, int]]:
        self.thread.start()
        self._started.wait()
        try:
            yield self.host, self.port
        finally:
            asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(timeout=10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(256 * 1024):
        writer.write(data)
        await writer.drain()
    writer.write_eof()
    await writer.drain()


_BLOCK = bytes(1 << 20)


async def _source(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while header := await reader.readexactly(8):
        left = int.from_bytes(header, "big")
        while left > 0:
            writer.write(_BLOCK[: min(left, len(_BLOCK))])
            left -= len(_BLOCK)
            await writer.drain()


@contextmanager
def echo_server(host: str = "127.0.0.1") -> Iterator[tuple[str, int]]:
    """A TCP server in a background thread that sends back what it receives; yields its address."""
    with _Background(_echo, host).running() as address:
        yield address


@contextmanager
def source_server(host: str = "127.0.0.1") -> Iterator[tuple[str, int]]:
    """A TCP server answering each 8-byte big-endian size with that many zero bytes; yields its address."""
    with _Background(_source, host).running() as address:
        yield address


def ping(address: tuple[str, int], count: int = 5, size: int = 32, timeout: float = 30) -> list[float]:
    """Round-trip times (s) of ``count`` small messages through an echo at ``address``, one connection.

    The connection is opened and warmed by one exchange first, so the times
    exclude the handshake.
    """
    payload = os.urandom(size)
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _exchange(sock, payload)
        times = []
        for _ in range(count):
            start = time.perf_counter()
            _exchange(sock, payload)
            times.append(time.perf_counter() - start)
    return times


def _exchange(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = sock.recv(len(payload) - len(got))
        if not chunk:
            raise GiodError("the echo server closed the connection")
        got += chunk
    if got != payload:
        raise GiodError("the echo server answered different bytes")


def fetch(address: tuple[str, int], size: int, timeout: float = 120) -> float:
    """Seconds to receive ``size`` bytes in one request from a :func:`source_server` at ``address``.

    The connection is opened and warmed by a one-byte request first, so the
    time is one round trip plus the transfer.
    """
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buffer = bytearray(1 << 20)
        _receive(sock, 1, buffer)
        start = time.perf_counter()
        _receive(sock, size, buffer)
        return time.perf_counter() - start


def _receive(sock: socket.socket, size: int, buffer: bytearray) -> None:
    sock.sendall(size.to_bytes(8, "big"))
    left = size
    while left > 0:
        n = sock.recv_into(buffer, min(left, len(buffer)))
        if n == 0:
            raise GiodError(f"the connection closed with {left} bytes still to come")
        left -= n
