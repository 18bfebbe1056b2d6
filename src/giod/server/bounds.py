"""Bounds on what one request may make the server hold: its head and, outside file uploads, its body.

FastAPI reads a JSON body whole, and parses it, before a route can look at
the token; without a bound an anonymous client could make the server buffer
any number of bytes. File uploads (``PUT /files/…``) are streamed to disk
and bounded by ``Limits.max_upload_bytes`` in their route instead.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["RequestBounds", "MAX_HEAD_BYTES", "MAX_BODY_BYTES"]

MAX_HEAD_BYTES = 16 << 10  # request line and headers, as the HTTP parser is told
MAX_BODY_BYTES = 64 << 20  # a bulk add of tens of thousands of containers fits
MAX_ECHO_BYTES = 1 << 20  # of a body, kept for the error handler to know the names the client gave

Scope = dict[str, Any]


class RequestBounds:
    """ASGI middleware: 431 for a request head over ``max_head``, 413 for an API body over ``max_body``."""

    def __init__(self, app: Any, *, max_head: int = MAX_HEAD_BYTES, max_body: int = MAX_BODY_BYTES):
        self.app, self.max_head, self.max_body = app, max_head, max_body

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        head += sum(len(k) + len(v) + 4 for k, v in scope["headers"])
        if head > self.max_head:
            await _refuse(send, 431, f"request head of {head} bytes; at most {self.max_head}")
            return
        if scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS") or scope["path"].startswith("/files/"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_body:
            await _refuse(send, 413, f"request body of {int(declared)} bytes; at most {self.max_body}")
            return
        # a chunked body has no declared length: read it here, counting, and hand it on
        messages, size = [], 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_body:
                await _refuse(send, 413, f"request body over {self.max_body} bytes")
                return
            if not message.get("more_body", False):
                break

        # what the client sent, for the error handler: a name the client gave is no leak (server.app)
        scope["giod.body"] = b"".join(m.get("body", b"") for m in messages)[:MAX_ECHO_BYTES]

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


async def _refuse(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": "TooLarge" if status == 413 else "DataError", "message": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
