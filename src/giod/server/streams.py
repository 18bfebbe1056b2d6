"""Long answers (the change feed, query answers): how many one token may hold, and how they are sent.

A stream holds a connection, and a query answer holds memory, for as long as
its client keeps it. :class:`StreamSlots` bounds the streams of one kind that
one token holds at once (``QuotaExceeded``, 429, past its share), and all
tokens together below the connections the server takes, so that the rest stay
free for every other client; an unrestricted admin token is never refused for
others' streams (its own share still holds).

:class:`PacedStream` sends an answer in small slices and asks its source for
the next piece only once the client has taken the last one: a client that stops
reading holds one piece in the server, not the whole answer. A client that
takes nothing for ``send_timeout`` seconds has its connection aborted (the
kernel's buffers and the server's go with it), whatever was left to send.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
from starlette.concurrency import iterate_in_threadpool
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from giod.errors import QuotaExceeded
from giod.server.allocator import give_back_freed_memory
from giod.server.auth import Caller
from giod.server.byteranges import file_chunks
from giod.server.sendfile import TIMEOUT_KEY, ZEROCOPY, SendStalled, send_file

__all__ = ["SEND_SLICE", "FileBody", "PacedStream", "StreamSlots", "abort_connection", "connection_protocol"]

SEND_SLICE = 256 << 10  # bytes handed to the connection at a time


class StreamSlots:
    """Streams of one kind held at once: at most ``per_token`` per token, ``total`` in all."""

    def __init__(self, kind: str, per_token: int, total: int):
        self.kind, self.per_token, self.total = kind, per_token, total
        self._held: dict[str, int] = {}
        self._all = 0
        self._lock = threading.Lock()

    @staticmethod
    def holder(who: Caller, client: tuple[str, int] | None) -> str:
        """Whom a stream counts against: its token, or an anonymous client's address."""
        if who.token is not None:
            return f"token {who.token.id}"
        return f"anonymous {client[0] if client else '?'}"

    def held(self, holder: str) -> int:
        with self._lock:
            return self._held.get(holder, 0)

    def take(self, who: Caller, client: tuple[str, int] | None) -> str:
        """A slot for ``who``; QuotaExceeded (429) past its share or past the server's."""
        holder = self.holder(who, client)
        privileged = who.token is not None and who.token.scope == "admin" and who.token.dataset is None
        with self._lock:
            mine = self._held.get(holder, 0)
            if mine >= self.per_token:
                raise QuotaExceeded(f"{holder} holds {mine} {self.kind} streams, its most "
                                    f"({self.kind}_streams_per_token): close one first")
            if self._all >= self.total and not privileged:
                raise QuotaExceeded(f"the server holds {self._all} {self.kind} streams, its most "
                                    f"({self.kind}_streams): try again later")
            self._held[holder] = mine + 1
            self._all += 1
        return holder

    def give_back(self, holder: str) -> None:
        """The stream of ``holder`` has ended; the last one to end gives the process's free memory back."""
        with self._lock:
            left = self._held.get(holder, 0) - 1
            if left > 0:
                self._held[holder] = left
            else:
                self._held.pop(holder, None)
            self._all -= 1
            idle = self._all == 0
        if idle and self.kind == "query":
            give_back_freed_memory()


# ------------------------------------------------------------------ the connections of this process

_connections: dict[tuple[str, int], asyncio.Transport] = {}


def connection_protocol(zerocopy: bool = True) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, keeping each connection's transport so that a stalled one can be aborted, and
    sending file bodies by ``sendfile`` on plain TCP (:mod:`giod.server.sendfile`) unless ``zerocopy`` is
    False."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Protocol(H11Protocol):
        def __init__(self, *args: Any, **kw: Any):
            super().__init__(*args, **kw)
            self.sockfd: int | None = None  # the socket's descriptor on plain TCP: file bodies go by sendfile
            app = self.app

            async def with_sendfile(scope: Scope, receive: Receive, send: Send) -> None:
                cycle = getattr(send, "__self__", None)
                if self.sockfd is None or scope["type"] != "http" or cycle is None:
                    await app(scope, receive, send)
                    return
                scope["extensions"] = {**scope.get("extensions", {}), ZEROCOPY: {}}

                async def sending(message: Any) -> None:
                    if message["type"] == ZEROCOPY:
                        assert self.sockfd is not None
                        await send_file(cycle, self.sockfd, message)
                    else:
                        await send(message)

                await app(scope, receive, sending)

            self.app = with_sendfile

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            if zerocopy and sock is not None and not transport.get_extra_info("sslcontext") and sock.family in (
                    socket.AF_INET, socket.AF_INET6):
                self.sockfd = sock.fileno()
            if self.client is not None:
                _connections[(str(self.client[0]), int(self.client[1]))] = transport
            # a connection that never sends a request is closed like one idle after its answer (uvicorn
            # starts that clock only after an answer): clients open their connections ahead, and those a
            # read did not need would otherwise be held, and counted against the server's limit, for good
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                                self.timeout_keep_alive_handler)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.client is not None:
                _connections.pop((str(self.client[0]), int(self.client[1])), None)
            super().connection_lost(exc)

    return Protocol


def abort_connection(scope: Scope) -> bool:
    """Drop the connection of ``scope`` now, its unsent bytes with it; False when it is not known here."""
    client = scope.get("client")
    transport = _connections.get((str(client[0]), int(client[1]))) if client else None
    if transport is None:
        return False
    sock = transport.get_extra_info("socket")
    if sock is not None:
        # a reset, not a close: a close would leave the unsent bytes in the kernel, queued before the end
        # of the stream, for a client that takes nothing
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
    return True


class SendTimeout(Exception):
    """The client took nothing for the send timeout."""


class PacedStream(StreamingResponse):
    """A streamed answer whose next piece is made only once the client has taken the last one.

    ``pieces`` is a blocking iterator (run in a worker thread); ``release`` is
    called once the answer ends, however it ends.
    """

    def __init__(self, pieces: Iterator[bytes] | AsyncIterator[bytes | str], *, send_timeout: float,
                 release: Any = None, **kw: Any):
        super().__init__(pieces if isinstance(pieces, AsyncIterator) else iterate_in_threadpool(pieces), **kw)
        self.send_timeout = send_timeout
        self.release = release

    async def stream_response(self, send: Send) -> None:
        async def timed(message: Any) -> None:
            try:
                await asyncio.wait_for(send(message), self.send_timeout)
            except TimeoutError:
                raise SendTimeout from None

        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        async for piece in self.body_iterator:
            data = piece.encode(self.charset) if isinstance(piece, str) else piece
            view = memoryview(data)
            for at in range(0, len(view), SEND_SLICE):
                await timed({"type": "http.response.body", "body": bytes(view[at:at + SEND_SLICE]),
                             "more_body": True})
            del view, data, piece
            # nothing is written, but the server waits until the connection has taken what it holds:
            # the next piece is made only then
            await timed({"type": "http.response.body", "body": b"", "more_body": True})
        await timed({"type": "http.response.body", "body": b"", "more_body": False})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except SendTimeout:
            if not abort_connection(scope):
                raise  # a server that does not tell its connections: it closes this one itself
            await asyncio.sleep(0)  # the connection is gone before the answer ends: nothing more is sent
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
            if self.release is not None:
                self.release()


Part = bytes | tuple[int, int]  # bytes of the answer's own, or the span [start, stop) of its file


class FileBody(Response):
    """An answer of ``parts`` of the open file ``fd`` (closed once the answer ends, however it ends).

    On a connection that offers ``http.response.zerocopysend`` (plain TCP: see
    :mod:`giod.server.sendfile`) the file's spans go by ``sendfile``; otherwise (TLS) they are read in worker
    threads, a chunk at a time, and sent as they come. ``sent(n)`` counts the bytes handed to the
    connection. A client that takes nothing for ``send_timeout`` seconds, a file that ends before its
    span, or a send that fails has its connection reset: the answer is never ended as if it were whole.
    """

    def __init__(self, fd: int, parts: list[Part], *, send_timeout: float, sent: Callable[[int], None],
                 done: Callable[[], None], status_code: int, headers: dict[str, str], media_type: str):
        super().__init__(None, status_code=status_code, headers=headers, media_type=media_type)
        self.fd, self.parts, self.send_timeout, self.sent, self.done = fd, parts, send_timeout, sent, done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as tasks:
                async def gone() -> None:  # a client that left ends the answer (its sends do nothing)
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tasks.cancel_scope.cancel()

                tasks.start_soon(gone)
                try:
                    await self._send(scope, send)
                except (SendTimeout, SendStalled, OSError):
                    if not abort_connection(scope):
                        raise  # a server that does not tell its connections: it closes this one itself
                tasks.cancel_scope.cancel()
        finally:
            os.close(self.fd)
            self.done()

    async def _send(self, scope: Scope, send: Send) -> None:
        async def timed(message: Any) -> None:
            try:
                await asyncio.wait_for(send(message), self.send_timeout)
            except TimeoutError:
                raise SendTimeout from None

        zerocopy = ZEROCOPY in scope.get("extensions", {})
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        for part in self.parts:
            if isinstance(part, bytes):
                await timed({"type": "http.response.body", "body": part, "more_body": True})
                self.sent(len(part))
            elif zerocopy:
                start, stop = part
                await send({"type": ZEROCOPY, "file": self.fd, "offset": start, "count": stop - start,
                            "more_body": True, TIMEOUT_KEY: self.send_timeout})
                self.sent(stop - start)
            else:
                async for chunk in iterate_in_threadpool(file_chunks(self.fd, *part)):
                    await timed({"type": "http.response.body", "body": chunk, "more_body": True})
                    self.sent(len(chunk))
        await timed({"type": "http.response.body", "body": b"", "more_body": False})
