"""A latency laboratory: a TCP proxy on loopback that makes a connection look far away.

:class:`LatencyProxy` forwards connections made to ``127.0.0.1:proxy.port`` to a
target ``host:port``, adding a round-trip time and, optionally, a bandwidth cap::

    with LatencyProxy(target=("127.0.0.1", 8080), rtt=0.05, bandwidth=125e6) as proxy:
        httpx.get(f"http://127.0.0.1:{proxy.port}/...")

The model (docs/latency.md has the measured limits):

- **delay**: bytes read from one side at time *t* are written to the other side
  at *t + rtt/2*. Reading never waits for delivery, so a connection behaves
  like a long fat pipe: a byte is in flight until its acknowledgement would
  be back (*t + rtt*), and reading pauses while ``window`` bytes per
  direction and connection are in flight, as TCP does with such a window.
- **handshake**: a new connection costs one round trip before its first byte
  can arrive, as TCP's SYN / SYN-ACK does: the client's first bytes reach the
  target no earlier than *accept + rtt + rtt/2*.
- **bandwidth**: one token bucket per direction, shared by all connections
  through the proxy, like one bottleneck link. A sender above the rate is
  slowed by TCP back-pressure (the proxy stops reading), not by an ever
  growing queue in the proxy.
- **faults** (:class:`Faults`), for tests of clients: cut a connection after
  N bytes from the server, flip one byte of the server's stream.

The proxy runs an asyncio loop in a background thread, or with
``isolate=True`` in a child process, so that a benchmark's client does not
share an interpreter (and its GIL) with the proxy.
"""

from __future__ import annotations

import asyncio
import os
import re
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from giod.errors import ConfigError, GiodError

if TYPE_CHECKING:
    from giod.bench.report import Outcome

#: Bytes in flight per connection and direction: more than 1 Gbit/s × 250 ms, so one
#: connection can fill such a link. Linux's default TCP window tops out near 6 MiB.
DEFAULT_WINDOW = 32 * 2**20
#: The longest a sender may run ahead of the bandwidth cap before the proxy stops reading.
MAX_QUEUE_SECONDS = 0.002
#: A burst the token bucket allows at once: one read of asyncio's transports.
BURST_BYTES = 256 * 1024

_EOF = object()
_RESET = object()


@dataclass(frozen=True)
class Faults:
    """Faults injected into the server→client stream of new connections.

    ``drop_after``: the connection is cut (the client sees end of stream, the
    server a reset) once this many bytes have reached the client.
    ``flip_at``: the byte at this offset of the server→client stream is
    inverted (xor 0xFF). ``connections``: how many new connections get the
    faults, counted from when they are set (None: every connection).
    """

    drop_after: int | None = None
    flip_at: int | None = None
    connections: int | None = None

    def __post_init__(self) -> None:
        for name in ("drop_after", "flip_at", "connections"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"fault {name} must not be negative, got {value}")

    @property
    def any(self) -> bool:
        return self.drop_after is not None or self.flip_at is not None


@dataclass
class Stats:
    """What went through a proxy: connections accepted, bytes delivered each way."""

    connections: int = 0
    active: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    dropped: int = 0
    flipped: int = 0


@dataclass(frozen=True)
class Settings:
    """A proxy's configuration: where it listens and forwards to, and the network it imitates."""

    target: tuple[str, int]
    rtt: float = 0.0
    bandwidth: float | None = None
    window: int = DEFAULT_WINDOW
    handshake: bool = True
    listen: tuple[str, int] = ("127.0.0.1", 0)
    faults: Faults = field(default_factory=Faults)

    def __post_init__(self) -> None:
        if self.rtt < 0:
            raise ConfigError(f"rtt must not be negative, got {self.rtt}")
        if self.bandwidth is not None and self.bandwidth <= 0:
            raise ConfigError(f"bandwidth must be positive (bytes/s), got {self.bandwidth}")
        if self.window < 1:
            raise ConfigError(f"window must be at least one byte, got {self.window}")
        _check_port(self.target[1], "target")
        _check_port(self.listen[1], "listen")


def _check_port(port: int, what: str) -> None:
    if not 0 <= port <= 65535:
        raise ConfigError(f"{what} port must be in 0..65535, got {port}")


# --------------------------------------------------------------- the model


class _Link:
    """One direction of the bottleneck: a token bucket of ``rate`` bytes/s (None: no cap)."""

    def __init__(self, rate: float | None, now: float):
        self.rate = rate
        self.burst = max(BURST_BYTES, rate * 0.001) if rate else 0.0
        self.tokens = self.burst
        self.stamp = now

    def reserve(self, n: int, now: float) -> float:
        """Take ``n`` bytes' tokens; the seconds until they have passed the bottleneck."""
        if self.rate is None:
            return 0.0
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate) - n
        self.stamp = now
        return max(0.0, -self.tokens / self.rate)


class _Pipe:
    """One direction of one connection: bytes queued with their delivery time, written on time.

    ``unacked`` counts the bytes read and not yet acknowledged, as a TCP
    sender counts its window: a byte delivered at *t* is acknowledged at
    *t + rtt/2*, and reading stops while ``window`` bytes are unacknowledged.
    """

    def __init__(self, conn: _Connection, link: _Link, floor: float, faults: Faults | None, down: bool):
        self.conn = conn
        self.loop = conn.proxy.loop
        self.link = link
        self.delay = conn.proxy.settings.rtt / 2
        self.window = conn.proxy.settings.window
        self.floor = floor  # no byte is delivered before floor + delay (the handshake)
        self.faults = faults
        self.down = down
        self.src: asyncio.Transport | None = None
        self.dst: asyncio.Transport | None = None
        self.queue: deque[tuple[float, Any]] = deque()
        self.unacked = 0
        self.offset = 0  # bytes delivered so far
        self.timer: asyncio.TimerHandle | None = None
        self.pauses: set[str] = set()

    # reading side

    def feed(self, data: bytes) -> None:
        if self.conn.closed:
            return  # a cut connection: what the client still sends goes nowhere
        now = self.loop.time()
        wait = self.link.reserve(len(data), now)
        self.queue.append((max(now + wait, self.floor) + self.delay, data))
        self.unacked += len(data)
        if wait > MAX_QUEUE_SECONDS:
            # the sender runs ahead of the link: hold it back, as a full bottleneck queue would
            self.pause("link")
            self.loop.call_later(wait - MAX_QUEUE_SECONDS, self.resume, "link")
        if self.unacked >= self.window:
            self.pause("window")
        self.schedule()

    def feed_end(self, marker: object) -> None:
        now = self.loop.time()
        self.queue.append((max(now, self.floor) + self.delay, marker))
        self.schedule()

    def pause(self, reason: str) -> None:
        if not self.pauses and self.src is not None:
            self.src.pause_reading()
        self.pauses.add(reason)

    def resume(self, reason: str) -> None:
        if reason not in self.pauses:
            return
        self.pauses.discard(reason)
        if not self.pauses and self.src is not None and not self.src.is_closing():
            self.src.resume_reading()

    def ack(self, n: int) -> None:
        self.unacked -= n
        if self.unacked < self.window:
            self.resume("window")

    # writing side

    def schedule(self) -> None:
        if self.timer is not None or not self.queue or self.dst is None:
            return
        when = self.queue[0][0]
        if when <= self.loop.time():
            self.flush()
        else:
            self.timer = self.loop.call_at(when, self.flush)

    def flush(self) -> None:
        self.timer = None
        dst = self.dst
        if dst is None or self.conn.closed:
            return
        now = self.loop.time()
        sent = 0
        while self.queue and self.queue[0][0] <= now:
            _, item = self.queue.popleft()
            if item is _EOF:
                if dst.can_write_eof():
                    dst.write_eof()
                self.conn.eof_delivered()
            elif item is _RESET:
                self.conn.close(abort=True)
            else:
                sent += len(item)
                self.deliver(dst, item)
            if self.conn.closed:
                return
        if sent:
            if self.delay:
                self.loop.call_later(self.delay, self.ack, sent)
            else:
                self.ack(sent)
        self.schedule()

    def deliver(self, dst: asyncio.Transport, data: bytes) -> None:
        """Write ``data``, with the faults of a server→client stream."""
        start, end = self.offset, self.offset + len(data)
        faults = self.faults
        if faults is not None and faults.flip_at is not None and start <= faults.flip_at < end:
            changed = bytearray(data)
            changed[faults.flip_at - start] ^= 0xFF
            data = bytes(changed)
            self.conn.proxy.stats.flipped += 1
        if faults is not None and faults.drop_after is not None and end >= faults.drop_after:
            data = data[: faults.drop_after - start]
            dst.write(data)
            self.count(len(data))
            self.conn.proxy.stats.dropped += 1
            self.conn.cut()
            return
        dst.write(data)
        self.count(len(data))

    def count(self, n: int) -> None:
        self.offset += n
        if self.down:
            self.conn.proxy.stats.bytes_down += n
        else:
            self.conn.proxy.stats.bytes_up += n

    def discard(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.queue.clear()


class _Side(asyncio.Protocol):
    """The protocol of one of a connection's two sockets: feeds ``out``, is written by ``into``."""

    def __init__(self, conn: _Connection, out: _Pipe, into: _Pipe):
        self.conn = conn
        self.out = out
        self.into = into
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.out.src = transport
        if self.out.pauses:
            transport.pause_reading()
        self.into.dst = transport
        self.into.schedule()

    def data_received(self, data: bytes) -> None:
        self.out.feed(data)

    def eof_received(self) -> bool:
        if self.conn.closed:
            return False  # a cut connection: the client has now closed too
        self.out.pause("eof")  # for good: resuming would read the end of stream again
        self.out.feed_end(_EOF)
        return True  # keep the other direction open: a half-close travels like data

    def connection_lost(self, exc: Exception | None) -> None:
        self.into.dst = None
        if not self.conn.closed:
            self.out.feed_end(_RESET)
        self.conn.side_lost()

    def pause_writing(self) -> None:
        self.into.pause("buffer")  # the receiver is slow: stop reading from its peer

    def resume_writing(self) -> None:
        self.into.resume("buffer")


class _Connection:
    """A client's connection and the proxy's connection to the target, with the pipes between."""

    def __init__(self, proxy: _Proxy):
        self.proxy = proxy
        self.closed = False
        self.eofs = 0
        self.sides = 2  # sockets not yet lost; the connection is forgotten at 0
        now = proxy.loop.time()
        settings = proxy.settings
        # with the handshake, the client's first bytes can leave one RTT after it connected, and the
        # server, which accepts only when the handshake's last packet arrives, RTT/2 later still
        shake = settings.rtt if settings.handshake else 0.0
        faults = proxy.take_faults()
        self.up = _Pipe(self, proxy.links[0], now + shake, None, down=False)
        self.down = _Pipe(self, proxy.links[1], now + 1.5 * shake, faults, down=True)
        self.client = _Side(self, self.up, self.down)
        self.server = _Side(self, self.down, self.up)
        self.task: asyncio.Task[Any] | None = None

    def start(self) -> None:
        self.proxy.connections.add(self)
        self.proxy.stats.connections += 1
        self.proxy.stats.active += 1
        self.task = self.proxy.loop.create_task(self._connect())

    async def _connect(self) -> None:
        host, port = self.proxy.settings.target
        try:
            await self.proxy.loop.create_connection(lambda: self.server, host, port)
        except OSError:
            self.side_lost()
            self.close(abort=True)  # the client sees a reset, as for a refused connection
            return
        if self.closed and self.server.transport is not None:
            self.server.transport.abort()

    def eof_delivered(self) -> None:
        self.eofs += 1
        if self.eofs == 2:
            self.close()

    def side_lost(self) -> None:
        self.sides -= 1
        if self.sides <= 0:
            self.proxy.connections.discard(self)

    def cut(self) -> None:
        """The drop fault: the client gets what was written, then end of stream; the server a reset.

        The client's socket is half-closed and drained until the client closes
        it, so that unread bytes do not turn the end of stream into a reset.
        """
        if self.client.transport is not None:
            self.client.transport.write_eof()
            self.up.pauses.clear()
            self.client.transport.resume_reading()
        if self.server.transport is not None:
            self.server.transport.abort()
        self._closed()

    def close(self, abort: bool = False) -> None:
        for side in (self.client, self.server):
            if side.transport is not None:
                side.transport.abort() if abort else side.transport.close()
        self._closed()

    def _closed(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.up.discard()
        self.down.discard()
        self.proxy.stats.active -= 1


class _Proxy:
    """The listening socket and the connections of one proxy, on one event loop."""

    def __init__(self, settings: Settings, loop: asyncio.AbstractEventLoop):
        self.settings = settings
        self.loop = loop
        now = loop.time()
        self.links = (_Link(settings.bandwidth, now), _Link(settings.bandwidth, now))
        self.connections: set[_Connection] = set()
        self.stats = Stats()
        self.faults = settings.faults
        self.faults_left = settings.faults.connections
        self.server: asyncio.base_events.Server | None = None

    def take_faults(self) -> Faults | None:
        if not self.faults.any:
            return None
        if self.faults_left is None:
            return self.faults
        if self.faults_left <= 0:
            return None
        self.faults_left -= 1
        return self.faults

    def set_faults(self, faults: Faults) -> None:
        self.faults = faults
        self.faults_left = faults.connections

    def _accept(self) -> asyncio.Protocol:
        conn = _Connection(self)
        conn.start()
        return conn.client

    async def start(self) -> int:
        host, port = self.settings.listen
        self.server = await self.loop.create_server(self._accept, host, port, reuse_address=True, backlog=1024)
        return int(self.server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for conn in list(self.connections):
            if conn.task is not None:
                conn.task.cancel()
            conn.close(abort=True)
        if self.server is not None:
            await self.server.wait_closed()
        await asyncio.sleep(0)  # let the aborted transports close their sockets


# -------------------------------------------------------------- the handle


class LatencyProxy:
    """A TCP proxy adding ``rtt`` seconds of round trip and a ``bandwidth`` cap (bytes/s).

    Use it as a context manager; ``port`` is where clients connect (on
    ``listen``'s host, loopback by default). ``window`` bounds the bytes in
    flight per connection and direction; ``handshake`` makes a new connection
    cost one round trip; ``faults`` injects errors (see :class:`Faults`).
    With ``isolate=True`` the proxy runs in a child process (``stats`` and
    changing ``faults`` are then not available).
    """

    def __init__(
        self,
        target: tuple[str, int],
        *,
        rtt: float = 0.0,
        bandwidth: float | None = None,
        window: int = DEFAULT_WINDOW,
        handshake: bool = True,
        listen: tuple[str, int] = ("127.0.0.1", 0),
        faults: Faults | None = None,
        isolate: bool = False,
    ):
        self.settings = Settings(
            target=(target[0], int(target[1])),
            rtt=float(rtt),
            bandwidth=None if bandwidth is None else float(bandwidth),
            window=int(window),
            handshake=handshake,
            listen=(listen[0], int(listen[1])),
            faults=faults or Faults(),
        )
        self.isolate = isolate
        self.port: int = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._proxy: _Proxy | None = None
        self._child: subprocess.Popen[str] | None = None

    @property
    def host(self) -> str:
        return self.settings.listen[0]

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def __enter__(self) -> LatencyProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Listen and forward, in a background thread (or child process) until :meth:`stop`."""
        if self._thread is not None or self._child is not None:
            raise ConfigError("the proxy is already running")
        if self.isolate:
            self._start_child()
            return
        loop = asyncio.new_event_loop()
        ready: list[Any] = []
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                self._proxy = _Proxy(self.settings, loop)
                ready.append(loop.run_until_complete(self._proxy.start()))
            except BaseException as exc:  # reported to the starting thread
                ready.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="giod-latency-proxy", daemon=True)
        self._thread.start()
        started.wait()
        if isinstance(ready[0], BaseException):
            self._thread.join()
            self._thread = None
            raise ConfigError(f"the proxy cannot listen on {self.host}:{self.settings.listen[1]}: {ready[0]}")
        self.port = ready[0]

    def stop(self) -> None:
        """Close the listening socket and every connection through the proxy."""
        if self._child is not None:
            self._stop_child()
        if self._thread is None or self._loop is None or self._proxy is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._proxy.stop(), self._loop)
        future.result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread = None
        self._proxy = None

    @property
    def stats(self) -> Stats:
        """A snapshot of the connections and bytes so far."""
        proxy = self._running()
        return self._call(lambda: Stats(**vars(proxy.stats)))

    @property
    def faults(self) -> Faults:
        return self._running().faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        """Faults for connections opened from now on (those open keep theirs)."""
        proxy = self._running()
        self._call(lambda: proxy.set_faults(faults))

    def _running(self) -> _Proxy:
        if self._proxy is None:
            if self._child is not None:
                raise ConfigError("stats and faults are not available from an isolated proxy")
            raise ConfigError("the proxy is not running")
        return self._proxy

    def _call(self, fn: Callable[[], Any]) -> Any:
        assert self._loop is not None

        async def call() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(timeout=10)

    # ------------------------------------------------------------ isolated

    def _start_child(self) -> None:
        s = self.settings
        argv = [
            sys.executable, "-m", "giod.bench.netlab",
            "--target", f"{s.target[0]}:{s.target[1]}",
            "--host", s.listen[0], "--listen", str(s.listen[1]),
            "--rtt", repr(s.rtt * 1000), "--window", str(s.window),
        ]  # fmt: skip
        if s.bandwidth is not None:
            argv += ["--bandwidth", repr(s.bandwidth * 8 / 1e6)]
        if not s.handshake:
            argv.append("--no-handshake")
        for name in ("drop_after", "flip_at", "connections"):
            value = getattr(s.faults, name)
            if value is not None:
                argv += [f"--{name.replace('_', '-')}", str(value)]
        # errors go to a file: a pipe nobody reads while the proxy runs could fill and stall it
        errors = tempfile.TemporaryFile(mode="w+")
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, stdin=subprocess.DEVNULL, text=True)
        self._child = child
        assert child.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(child.stdout, selectors.EVENT_READ)
            line = child.stdout.readline() if sel.select(timeout=30) else ""
        match = re.search(r"listening on \S+:(\d+)", line)
        if match is None:
            self._stop_child()
            errors.seek(0)
            said = (line.strip() + " " + errors.read().strip()).strip().splitlines()
            errors.close()
            raise ConfigError(f"the isolated proxy did not start: {said[-1] if said else 'no answer'}")
        errors.close()  # the child keeps its own descriptor
        self.port = int(match.group(1))

    def _stop_child(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        child.terminate()
        try:
            child.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()


def serve(settings: Settings, announce: Callable[[str], None]) -> None:
    """Run a proxy in the foreground until interrupted (the ``giod bench proxy`` command)."""
    import signal

    async def main() -> None:
        loop = asyncio.get_running_loop()
        proxy = _Proxy(settings, loop)
        try:
            port = await proxy.start()
        except OSError as exc:
            raise ConfigError(f"cannot listen on {settings.listen[0]}:{settings.listen[1]}: {exc}") from exc
        host, tport = settings.target
        cap = "no cap" if settings.bandwidth is None else f"{settings.bandwidth * 8 / 1e6:g} Mbit/s"
        announce(f"listening on {settings.listen[0]}:{port} -> {host}:{tport}, rtt {settings.rtt * 1000:g} ms, {cap}")
        done = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, done.set)
        await done.wait()
        await proxy.stop()

    asyncio.run(main())


# ------------------------------------------------------------- measuring


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


def calibrate(
    rtts: tuple[float, ...] = (0.0, 0.010, 0.050, 0.150, 0.250),
    *,
    bandwidth: float | None = None,
    size: int = 100_000_000,
    pings: int = 10,
    repeat: int = 3,
    isolate: bool = True,
) -> Outcome:
    """Measure the proxy itself: ping times against the asked RTT, one-request transfers against the model.

    Servers run on loopback; the first row is the direct path, without proxy, as the peer.
    """
    from giod.bench.report import Column, Outcome, Table

    rows: list[dict[str, Any]] = []
    with echo_server() as echo, source_server() as source:

        def measure(label: str, rtt: float | None, echo_at: tuple[str, int], source_at: tuple[str, int]) -> None:
            times = sorted(ping(echo_at, count=pings))
            seconds = sorted(fetch(source_at, size) for _ in range(repeat))
            ping_s, fetch_s = times[len(times) // 2], seconds[len(seconds) // 2]
            model = None if rtt is None else rtt + (size / bandwidth if bandwidth else 0.0)
            rows.append({
                "path": label, "rtt_ms": None if rtt is None else rtt * 1000, "ping_ms": ping_s * 1000,
                "excess_ms": None if rtt is None else (ping_s - rtt) * 1000, "fetch_s": fetch_s,
                "model_s": model, "rate": size / fetch_s / 1e6,
                "goodput": size / (fetch_s - rtt) / 1e6 if rtt is not None and fetch_s > rtt else None,
            })  # fmt: skip

        measure("direct", None, echo, source)
        for rtt in rtts:
            with (
                LatencyProxy(echo, rtt=rtt, bandwidth=bandwidth, isolate=isolate) as pe,
                LatencyProxy(source, rtt=rtt, bandwidth=bandwidth, isolate=isolate) as ps,
            ):
                measure("proxy", rtt, pe.address, ps.address)
    cap = "no cap" if bandwidth is None else f"{bandwidth * 8 / 1e6:g} Mbit/s cap"
    columns = [
        Column("path", "path"), Column("rtt_ms", "asked RTT ms", "{:.0f}"),
        Column("ping_ms", "ping ms", "{:.2f}"), Column("excess_ms", "ping − asked ms", "{:+.2f}"),
        Column("fetch_s", f"{size / 1e6:.0f} MB s", "{:.3f}"), Column("model_s", "model s", "{:.3f}"),
        Column("rate", "MB/s", "{:,.0f}"), Column("goodput", "MB/s after 1st RTT", "{:,.0f}"),
    ]  # fmt: skip
    return Outcome(
        name="proxy",
        parameters={
            "rtts": list(rtts),
            "bandwidth": bandwidth,
            "size": size,
            "pings": pings,
            "repeat": repeat,
            "isolate": isolate,
        },
        tables=[Table("results", f"latency proxy on loopback ({cap}, medians)", columns, rows)],
        notes=[
            "ping: median of one-connection request/response of 32 bytes; model: RTT + size / bandwidth",
            "fetch: one request of SIZE bytes on a warm connection, one RTT included",
        ],
    )


def parse_target(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``[IPv6]:PORT``) as a tuple; ConfigError when malformed."""
    match = re.fullmatch(r"\[?([^\[\]]+?)\]?:(\d+)", text.strip())
    if match is None:
        raise ConfigError(f"expected HOST:PORT, got {text!r}")
    port = int(match.group(2))
    _check_port(port, "target")
    return match.group(1), port


if __name__ == "__main__":  # the child process of LatencyProxy(isolate=True)
    from giod.bench.cli import bench

    try:
        bench(["proxy", *sys.argv[1:]], prog_name="giod bench")
    except GiodError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
