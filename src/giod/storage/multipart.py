"""Range answers of an HTTP server: ``Content-Range`` values and ``multipart/byteranges`` bodies.

Nothing here is trusted: a malformed or truncated answer is an :class:`IntegrityError`.
"""

from __future__ import annotations

from typing import Any

from giod.errors import IntegrityError

__all__ = ["content_range", "parse_multipart"]


def content_range(value: str) -> tuple[int, int]:
    """``bytes a-b/size`` → (a, b + 1)."""
    try:
        span = value.split()[1].split("/")[0]
        a, b = span.split("-")
        return int(a), int(b) + 1
    except (IndexError, ValueError) as exc:
        raise IntegrityError(f"malformed Content-Range {value!r} from the server") from exc


def parse_multipart(body: bytes, boundary: str, *, view: bool = False) -> dict[int, Any]:
    """The parts of a multipart/byteranges body, by start offset (lengths from Content-Range, not scanning);
    ``view``: as views of ``body``, not copies."""
    out: dict[int, Any] = {}
    whole = memoryview(body) if view else body
    mark = f"--{boundary}".encode()
    at = 0
    while True:
        at = body.find(mark, at)
        if at < 0 or body[at + len(mark):at + len(mark) + 2] == b"--":
            return out
        head_end = body.find(b"\r\n\r\n", at)
        if head_end < 0:
            raise IntegrityError("malformed multipart answer from the server")
        headers = body[at + len(mark):head_end].decode("latin-1").split("\r\n")
        value = next((h.split(":", 1)[1].strip() for h in headers if h.lower().startswith("content-range:")), "")
        a, b = content_range(value)
        start = head_end + 4
        out[a] = whole[start:start + b - a]
        if len(out[a]) != b - a:
            raise IntegrityError("truncated multipart answer from the server")
        at = start + b - a
