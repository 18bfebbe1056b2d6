"""The latency proxy's engine: its settings and the network model, on one asyncio event loop.

:class:`giod.testing.netlab.LatencyProxy` is the handle that runs it; the
module docstring there describes the model (delay, handshake, bandwidth,
faults).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from giod.errors import ConfigError

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
        check_port(self.target[1], "target")
        check_port(self.listen[1], "listen")


def check_port(port: int, what: str) -> None:
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

    def __init__(self, proxy: ProxyLoop):
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


class ProxyLoop:
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
