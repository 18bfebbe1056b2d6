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
share an interpreter (and its GIL) with the proxy. The settings and the
model live in :mod:`giod.testing.proxyloop`; the loopback servers and
clients that measure a path in :mod:`giod.testing.netprobe`.
"""

from __future__ import annotations

import asyncio
import re
import selectors
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import Any

from giod.errors import ConfigError, GiodError
from giod.testing.netprobe import echo_server, fetch, ping, source_server  # noqa: F401 - re-exported
from giod.testing.proxyloop import (  # noqa: F401 - BURST_BYTES, MAX_QUEUE_SECONDS: re-exported
    BURST_BYTES,
    DEFAULT_WINDOW,
    MAX_QUEUE_SECONDS,
    Faults,
    ProxyLoop,
    Settings,
    Stats,
    check_port,
)

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
        self._proxy: ProxyLoop | None = None
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
                self._proxy = ProxyLoop(self.settings, loop)
                ready.append(loop.run_until_complete(self._proxy.start()))
            except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
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
        stats: Stats = self._call(lambda: Stats(**vars(proxy.stats)))
        return stats

    @property
    def faults(self) -> Faults:
        return self._running().faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        """Faults for connections opened from now on (those open keep theirs)."""
        proxy = self._running()
        self._call(lambda: proxy.set_faults(faults))

    def _running(self) -> ProxyLoop:
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
            sys.executable, "-m", "giod.testing.netlab",
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
        errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed once the child answers
        # this interpreter, with arguments built above from typed settings
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, stdin=subprocess.DEVNULL,  # noqa: S603
                                 text=True)
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

    from giod.server.allocator import keep_freed_memory

    keep_freed_memory()  # the bytes in flight come and go: keep the memory that held them

    async def main() -> None:
        loop = asyncio.get_running_loop()
        proxy = ProxyLoop(settings, loop)
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


def parse_target(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``[IPv6]:PORT``) as a tuple; ConfigError when malformed."""
    match = re.fullmatch(r"\[?([^\[\]]+?)\]?:(\d+)", text.strip())
    if match is None:
        raise ConfigError(f"expected HOST:PORT, got {text!r}")
    port = int(match.group(2))
    check_port(port, "target")
    return match.group(1), port


def _child(argv: list[str]) -> None:
    """The isolated proxy's process: the options :meth:`LatencyProxy._start_child` passes, then :func:`serve`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m giod.testing.netlab")
    parser.add_argument("--target", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--listen", type=int, default=0)
    parser.add_argument("--rtt", type=float, default=0.0, help="milliseconds")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW)
    parser.add_argument("--bandwidth", type=float, default=None, help="Mbit/s")
    parser.add_argument("--no-handshake", action="store_true")
    for name in ("--drop-after", "--flip-at", "--connections"):
        parser.add_argument(name, type=int, default=None)
    args = parser.parse_args(argv)
    settings = Settings(
        target=parse_target(args.target),
        rtt=args.rtt / 1000,
        bandwidth=None if args.bandwidth is None else args.bandwidth * 1e6 / 8,
        window=args.window,
        handshake=not args.no_handshake,
        listen=(args.host, args.listen),
        faults=Faults(drop_after=args.drop_after, flip_at=args.flip_at, connections=args.connections),
    )
    serve(settings, lambda line: print(line, flush=True))


if __name__ == "__main__":  # the child process of LatencyProxy(isolate=True)
    try:
        _child(sys.argv[1:])
    except GiodError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
