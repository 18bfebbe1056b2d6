"""File bodies sent by ``os.sendfile``: the ASGI extension ``http.response.zerocopysend`` on plain TCP.

uvicorn offers no zero-copy send and uvloop's transports no ``sendfile``; a
file body sent through them is read into a fresh buffer and copied into the
socket (half of the server's CPU for a large range). The connection protocol
(:func:`giod.server.streams.connection_protocol`) advertises the extension in
the scope of each request on a plain-TCP connection (never under TLS, where
the kernel cannot send the file) and hands its messages to :func:`send_file`:

``{"type": "http.response.zerocopysend", "file": <fd or file object>,
"offset": int, "count": int, "more_body": bool}``, sent between the
response's start and its end. h11 counts the bytes against the response's
Content-Length (``send_with_data_passthrough`` hands back the span unread),
the transport's own buffer is let drain first, and the kernel then copies the
file's pages into the socket. The socket is non-blocking: ``sendfile`` sends
what the socket takes, in a worker thread (a page not in memory waits for
the disk there, not on the event loop), and the loop waits for the socket to
take more, on a duplicate of its descriptor (uvloop refuses a watcher on a
transport's own), at most ``giod.send_timeout`` seconds each time
(:class:`SendStalled`). A file that ends before the span does raises
:class:`FileShrank`: its bytes were counted as sent, so the connection must be
reset, never ended as if the answer were whole.
"""

from __future__ import annotations

import asyncio
import os
import select
import weakref
from typing import Any

import h11
from anyio import CapacityLimiter, to_thread

__all__ = ["ZEROCOPY", "FileShrank", "SendStalled", "send_file"]

ZEROCOPY = "http.response.zerocopysend"
TIMEOUT_KEY = "giod.send_timeout"  # ours: seconds the socket may take nothing before the send gives up
POLL_SECONDS = 0.02  # a worker thread waits this long for the socket to take more, then hands back to the loop
SEND_THREADS = 32  # worker threads sending at once
_LIMITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CapacityLimiter] = weakref.WeakKeyDictionary()


class FileShrank(OSError):
    """The file ended before the bytes its answer announced: the connection must be reset."""


class SendStalled(Exception):
    """The client took nothing for the send timeout."""


class _Span:
    """``count`` bytes of the open file ``fd`` from ``offset``: what h11 counts and hands back unread."""

    __slots__ = ("count", "fd", "offset")

    def __init__(self, fd: int, offset: int, count: int):
        self.fd, self.offset, self.count = fd, offset, count

    def __len__(self) -> int:
        return self.count


async def send_file(cycle: Any, sockfd: int, message: Any) -> None:
    """Send the file span of ``message`` on the connection of uvicorn's h11 request-response ``cycle``."""
    timeout = message.get(TIMEOUT_KEY)
    if cycle.flow.write_paused and not cycle.disconnected:
        await _within(cycle.flow.drain(), timeout)
    if cycle.disconnected:
        return  # as uvicorn does with a body sent after the client left
    if not cycle.response_started or cycle.response_complete:
        raise RuntimeError(f"Unexpected ASGI message '{ZEROCOPY}' outside a response body.")
    file = message["file"]
    fd = file if isinstance(file, int) else file.fileno()
    offset = message.get("offset")
    if offset is None:
        offset = os.lseek(fd, 0, os.SEEK_CUR)
    count = message.get("count")
    if count is None:
        count = os.fstat(fd).st_size - offset
    if count > 0 and cycle.scope["method"] != "HEAD":
        pieces = cycle.conn.send_with_data_passthrough(h11.Data(data=_Span(fd, int(offset), int(count))))  # type: ignore[arg-type]
        for piece in pieces:
            if isinstance(piece, _Span):
                await _flushed(cycle, timeout)
                await _sendfile(sockfd, piece, timeout)
            else:  # a chunk's head and tail, had the answer no Content-Length
                cycle.transport.write(piece)
    await cycle.send({"type": "http.response.body", "body": b"", "more_body": bool(message.get("more_body"))})


async def _within(waiting: Any, timeout: float | None) -> None:
    try:
        await asyncio.wait_for(waiting, timeout)
    except TimeoutError:
        raise SendStalled(f"the client took nothing for {timeout} s") from None


async def _flushed(cycle: Any, timeout: float | None) -> None:
    """Return once the transport holds no unsent bytes (they go before the file's)."""
    transport = cycle.transport
    if not transport.get_write_buffer_size():
        return
    transport.set_write_buffer_limits(high=0, low=0)  # paused until its buffer is empty
    try:
        await _within(cycle.flow.drain(), timeout)
    finally:
        if not transport.is_closing():
            transport.set_write_buffer_limits()


async def _sendfile(sockfd: int, span: _Span, timeout: float | None) -> None:
    loop = asyncio.get_running_loop()
    # a descriptor of our own: the loop closes its own when the client leaves, and that number may be
    # reused by another connection while a send of ours is still under way
    out = os.dup(sockfd)
    try:
        at, stop = span.offset, span.offset + span.count
        while at < stop:
            sent, ended = await to_thread.run_sync(_send_some, out, span.fd, at, stop, limiter=_limiter())
            at += sent
            if ended:
                raise FileShrank(f"file shrank while being sent ({at - span.offset} of {span.count} bytes)")
            if at < stop:  # the client takes its time: the loop waits for it, not a thread
                await _writable(loop, out, timeout)
    finally:
        os.close(out)


def _send_some(out: int, fd: int, at: int, stop: int) -> tuple[int, bool]:
    """Bytes ``[at, stop)`` of ``fd`` sent on the non-blocking socket ``out`` while the socket takes them within
    ``POLL_SECONDS`` each time (a worker thread's work); how many were sent, and whether the file ended."""
    first = at
    poller: select.poll | None = None
    while at < stop:
        try:
            n = os.sendfile(out, fd, at, stop - at)
        except BlockingIOError:
            if poller is None:
                poller = select.poll()
                poller.register(out, select.POLLOUT)
            if not poller.poll(POLL_SECONDS * 1000):
                break
            continue
        if n == 0:
            return at - first, True
        at += n
    return at - first, False


def _limiter() -> CapacityLimiter:
    """The worker threads sends may hold at once on this event loop (apart from the routes' own)."""
    loop = asyncio.get_running_loop()
    limiter = _LIMITERS.get(loop)
    if limiter is None:
        limiter = _LIMITERS[loop] = CapacityLimiter(SEND_THREADS)
    return limiter


async def _writable(loop: asyncio.AbstractEventLoop, fd: int, timeout: float | None) -> None:
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(fd, wake)
    try:
        await _within(ready, timeout)
    finally:
        loop.remove_writer(fd)
