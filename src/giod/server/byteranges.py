"""HTTP ``Range`` headers: parsing, bounds, and multipart/byteranges bodies."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["RangeRefused", "parse_range", "multipart_parts", "file_chunks"]

CHUNK = 1 << 20
_SPEC = re.compile(r"^\s*(\d*)\s*-\s*(\d*)\s*$")


@dataclass
class RangeRefused(Exception):
    status: int  # 400 malformed, 413 over the bounds, 416 unsatisfiable
    message: str


def parse_range(header: str, size: int, *, max_ranges: int, max_bytes: int) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges of a ``bytes=…`` header for a file of ``size`` bytes.

    Refuses (``RangeRefused``) malformed headers (400), more than
    ``max_ranges`` ranges or more than ``max_bytes`` in all (413), and
    headers of which no range lies in the file (416). Ranges are answered in
    the order asked, overlaps included (they count against the bounds).
    """
    if len(header) > 16 * max_ranges + 64:
        raise RangeRefused(413, f"Range header too long (at most {max_ranges} ranges)")
    unit, sep, spec = header.partition("=")
    if not sep or unit.strip().lower() != "bytes":
        raise RangeRefused(400, "malformed Range header: expected bytes=START-END[,…]")
    parts = spec.split(",")
    if len(parts) > max_ranges:
        raise RangeRefused(413, f"{len(parts)} ranges asked; at most {max_ranges} per request")
    out: list[tuple[int, int]] = []
    for part in parts:
        m = _SPEC.match(part)
        if m is None or (not m.group(1) and not m.group(2)):
            raise RangeRefused(400, f"malformed byte range {part.strip()!r}")
        a, b = m.group(1), m.group(2)
        if len(a) > 19 or len(b) > 19:
            raise RangeRefused(400, f"byte range {part.strip()!r} out of bounds")
        if not a:  # suffix: the last b bytes
            n = int(b)
            if n == 0 or size == 0:
                continue  # unsatisfiable: no last bytes to send (an empty range would be "bytes 0--1/0")
            out.append((max(0, size - n), size))
            continue
        start = int(a)
        stop = size if not b else int(b) + 1
        if b and stop <= start:
            raise RangeRefused(400, f"malformed byte range {part.strip()!r}: end before start")
        if start >= size:
            continue  # unsatisfiable on its own; the others may still be served
        out.append((start, min(stop, size)))
    if not out:
        raise RangeRefused(416, f"no asked range lies within the file's {size} bytes")
    total = sum(b - a for a, b in out)
    if total > max_bytes:
        raise RangeRefused(413, f"{total} bytes asked in one request; at most {max_bytes}")
    return out


def file_chunks(fd: int, start: int, stop: int) -> Iterator[bytes]:
    """The bytes ``[start, stop)`` of an open file, a chunk at a time."""
    at = start
    while at < stop:
        data = os.pread(fd, min(CHUNK, stop - at), at)
        if not data:
            raise OSError(f"file shrank while being sent ({at} of {stop})")
        yield data
        at += len(data)


def multipart_parts(ranges: list[tuple[int, int]], size: int, content_type: str,
                    boundary: str | None = None) -> tuple[str, int, list[bytes | tuple[int, int]]]:
    """Boundary, body length and parts of a ``multipart/byteranges`` answer: its own bytes (the parts'
    heads, the end) between the ``(start, stop)`` spans of the file."""
    boundary = boundary or secrets.token_hex(12)
    heads = [(f"--{boundary}\r\nContent-Type: {content_type}\r\n"
              f"Content-Range: bytes {a}-{b - 1}/{size}\r\n\r\n").encode() for a, b in ranges]
    tail = f"\r\n--{boundary}--\r\n".encode()
    length = sum(len(h) for h in heads) + sum(b - a for a, b in ranges) + 2 * (len(ranges) - 1) + len(tail)
    parts: list[bytes | tuple[int, int]] = []
    for i, (head, span) in enumerate(zip(heads, ranges, strict=True)):
        parts += [(b"\r\n" if i else b"") + head, span]
    parts.append(tail)
    return boundary, length, parts

