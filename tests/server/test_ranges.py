"""Byte ranges on a real server: exact bytes back, abusive headers refused fast, other clients unharmed.

The server runs with small bounds (64 ranges, 1 MiB per request) over a
300 kB file of random bytes, so that every limit can be reached cheaply.
"""

from __future__ import annotations

import http.client
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from giod.server.byteranges import RangeRefused, parse_range
from giod.storage.remote import Limits
from tests.server.conftest import Served, serve

SIZE = 300_000
LIMITS = Limits(max_ranges=64, max_request_bytes=1 << 20)
PATH = "qcd/blob.bin"
HEAD_BYTES = 16 << 10  # the server's bound on a request head (431 past it)


@dataclass
class Blob:
    served: Served
    data: bytes

    def get(self, range_header: str | None, token: str | None = None) -> tuple[int, dict[str, str], bytes, float]:
        """Status, headers, body and seconds of one GET of the blob.

        A head past the server's 16 KiB is refused before it is read whole: the server answers 431 and
        closes, and closing a socket with bytes still unread makes the kernel send a reset, which may
        reach the client before the answer does. That reset is the refusal too (status 431, no body)."""
        host, port = self.served.url.split("//", 1)[1].rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        headers = {"Authorization": f"Bearer {token or self.served.admin}"}
        if range_header is not None:
            headers["Range"] = range_header
        t0 = time.perf_counter()
        try:
            conn.request("GET", f"/files/local/{PATH}", headers=headers)
            r = conn.getresponse()
            body = r.read()
        except ConnectionResetError:
            if len(range_header or "") <= HEAD_BYTES:
                raise
            return 431, {}, b"", time.perf_counter() - t0
        finally:
            conn.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body, time.perf_counter() - t0


@pytest.fixture(scope="module")
def blob(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Blob]:
    base = tmp_path_factory.mktemp("ranges")
    for served in serve(base / "fed", limits=LIMITS):
        data = np.random.default_rng(5).integers(0, 256, SIZE, dtype=np.uint8).tobytes()
        target = Path(served.local.site("local").root) / PATH
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        yield Blob(served, data)


def parse_multipart(content_type: str, body: bytes) -> list[tuple[int, int, int, bytes]]:
    """``(first, last, size, bytes)`` of each part of a multipart/byteranges body, strictly."""
    m = re.fullmatch(r"multipart/byteranges; boundary=([0-9A-Za-z'()+_,./:=?-]{1,70})", content_type)
    assert m, content_type
    delim = b"--" + m.group(1).encode()
    assert body.startswith(delim + b"\r\n") and body.endswith(b"\r\n" + delim + b"--\r\n")
    parts = []
    for chunk in body[len(delim) + 2 : -(len(delim) + 6)].split(b"\r\n" + delim + b"\r\n"):
        head, sep, payload = chunk.partition(b"\r\n\r\n")
        assert sep, chunk[:200]
        fields = dict(line.split(b": ", 1) for line in head.split(b"\r\n"))
        cr = re.fullmatch(rb"bytes (\d+)-(\d+)/(\d+)", fields[b"Content-Range"])
        assert cr, fields
        first, last, size = (int(x) for x in cr.groups())
        assert len(payload) == last - first + 1
        parts.append((first, last, size, payload))
    return parts


def test_single_ranges(blob: Blob) -> None:
    d = blob.data
    for header, (a, b) in {"bytes=0-0": (0, 1), "bytes=10-19": (10, 20), f"bytes={SIZE - 5}-": (SIZE - 5, SIZE),
                           "bytes=-7": (SIZE - 7, SIZE), f"bytes=100-{10 * SIZE}": (100, SIZE),
                           f"bytes=-{10 * SIZE}": (0, SIZE), " BYTES = 3 - 4 ": (3, 5)}.items():
        status, headers, body, _ = blob.get(header)
        assert status == 206, header
        assert body == d[a:b], header
        assert headers["content-range"] == f"bytes {a}-{b - 1}/{SIZE}"
        assert int(headers["content-length"]) == b - a


def test_empty_file_has_no_satisfiable_range(blob: Blob) -> None:
    empty = Path(blob.served.local.site("local").root) / "qcd" / "empty.bin"
    empty.write_bytes(b"")
    host, port = blob.served.url.split("//", 1)[1].rsplit(":", 1)
    for header in ("bytes=-5", "bytes=0-", "bytes=0-0"):
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", "/files/local/qcd/empty.bin",
                     headers={"Authorization": f"Bearer {blob.served.admin}", "Range": header})
        r = conn.getresponse()
        r.read()
        conn.close()
        assert (r.status, r.getheader("content-range")) == (416, "bytes */0"), header


def test_no_range_is_the_whole_file(blob: Blob) -> None:
    status, headers, body, _ = blob.get(None)
    assert status == 200 and body == blob.data
    assert headers["accept-ranges"] == "bytes" and int(headers["x-giod-max-ranges"]) == LIMITS.max_ranges


@pytest.mark.parametrize("seed", range(6))
def test_multirange_answers_parse_back_to_the_asked_bytes(blob: Blob, seed: int) -> None:
    """Random ranges (overlapping, out of order, suffixes, open ends, some past the end): exactly those bytes."""
    rng = np.random.default_rng(seed)
    specs, want = [], []
    for _ in range(int(rng.integers(2, LIMITS.max_ranges + 1))):
        kind = rng.integers(0, 5)
        a = int(rng.integers(0, SIZE))
        n = int(rng.integers(1, 20_000))
        if kind == 0:  # suffix
            specs.append(f"-{n}")
            want.append((max(0, SIZE - n), SIZE))
        elif kind == 1:  # open end
            a = SIZE - n if SIZE > n else 0
            specs.append(f"{a}-")
            want.append((a, SIZE))
        elif kind == 2:  # past the end: skipped, the others are served
            specs.append(f"{SIZE + n}-{SIZE + 2 * n}")
        else:
            specs.append(f"{a}-{a + n - 1}")
            want.append((a, min(a + n, SIZE)))
    specs.append("0-99")  # overlaps whatever else starts at 0, and keeps the answer multi-part
    want.append((0, 100))
    status, headers, body, _ = blob.get("bytes=" + ",".join(specs))
    assert status == 206
    assert int(headers["content-length"]) == len(body)
    if len(want) == 1:
        a, b = want[0]
        assert body == blob.data[a:b]
        return
    parts = parse_multipart(headers["content-type"], body)
    assert [(first, last + 1) for first, last, _, _ in parts] == want  # in the order asked, overlaps kept
    for first, last, size, payload in parts:
        assert size == SIZE and payload == blob.data[first : last + 1]


ABUSE = {
    "bytes=abc": 400,
    "bytes=5-1": 400,
    "items=0-1": 400,
    "": 400,
    "bytes=": 400,
    "bytes=-": 400,
    "bytes=0-1;2-3": 400,
    "bytes=--1": 400,
    "bytes=1-2-3": 400,
    "bytes=0x10-0x20": 400,
    "bytes=99999999999999999999-": 400,  # 20 digits
    "bytes=0-99999999999999999999": 400,
    "bytes=-99999999999999999999": 400,
    f"bytes={2**63 - 1}-": 416,  # 19 digits: a number, just not in the file
    f"bytes={SIZE}-": 416,
    f"bytes={SIZE}-{SIZE + 10},{2 * SIZE}-": 416,
    "bytes=-0": 416,
    "bytes=" + ",".join(["0-0"] * (LIMITS.max_ranges + 1)): 413,  # one range too many
    "bytes=" + ",".join(["0-"] * 5000): 413,  # thousands of overlapping ranges
    # headers longer than any honest one: refused by the range parser (413) or, past 16 kB, as a head (431)
    "bytes=" + ",".join(f"{i}-{i + 10}" for i in range(5000)): 431,
    "bytes=" + "0" * 10_000 + "-1": 413,
    "bytes=0-,0-,0-,0-": 413,  # 4 × 300 kB over the 1 MiB a request may ask
}


def test_abusive_ranges_are_refused_fast(blob: Blob) -> None:
    took = []
    for header, want in ABUSE.items():
        status, headers, body, seconds = blob.get(header)
        assert status == want, (header[:60], status, body[:200])
        assert (body.startswith(b"{") and b"error" in body) or (status == 431 and not headers)  # or reset
        if status == 416:
            assert headers["content-range"] == f"bytes */{SIZE}"
        took.append(seconds)
    # each refusal is a parse of one header: far below a second even on a loaded machine
    assert max(took) < 1.0, took


def test_other_clients_are_served_while_ranges_are_abused(blob: Blob) -> None:
    stop = threading.Event()
    refused: list[int] = []
    bad_answers: list[str] = []

    def abuse() -> None:
        headers = list(ABUSE)
        i = 0
        while not stop.is_set():
            status, _, _, _ = blob.get(headers[i % len(headers)])
            if status != ABUSE[headers[i % len(headers)]]:
                bad_answers.append(f"{headers[i % len(headers)][:40]} -> {status}")
            refused.append(status)
            i += 1

    abusers = [threading.Thread(target=abuse, daemon=True) for _ in range(4)]
    for t in abusers:
        t.start()
    try:
        rng = np.random.default_rng(1)
        for _ in range(40):
            a = int(rng.integers(0, SIZE - 1))
            b = int(rng.integers(a + 1, min(SIZE, a + 200_000) + 1))
            status, _, body, seconds = blob.get(f"bytes={a}-{b - 1}")
            assert status == 206 and body == blob.data[a:b]
            assert seconds < 5.0  # served promptly, not starved behind the abusers
    finally:
        stop.set()
        for t in abusers:
            t.join(timeout=10)
    assert len(refused) > 40 and not bad_answers  # the abuse really ran alongside, refused each time


# --------------------------------------------------------------------------- parse_range against a model

MAX_RANGES, MAX_BYTES = 8, 1000

Spec = tuple[str, int, int]  # ("full", a, b) | ("open", a, 0) | ("suffix", n, 0) | ("bad", 0, 0)


def render(spec: Spec) -> str:
    kind, a, b = spec
    return {"full": f"{a}-{b}", "open": f"{a}-", "suffix": f"-{a}"}.get(kind, "x-1")


def model(specs: list[Spec], size: int, header: str) -> tuple[int, list[tuple[int, int]]]:
    """What RFC 9110 and the server's bounds say: (status, ranges), status 206 when served."""
    if len(header) > 16 * MAX_RANGES + 64 or len(specs) > MAX_RANGES:
        return 413, []
    ranges = []
    for kind, a, b in specs:
        if kind == "bad" or (kind == "full" and b < a) or len(str(a)) > 19 or len(str(b)) > 19:
            return 400, []
        if kind == "suffix":
            if a > 0 and size > 0:  # an empty file has no last bytes
                ranges.append((max(0, size - a), size))
        elif a < size:
            ranges.append((a, size if kind == "open" else min(b + 1, size)))
    if not ranges:
        return 416, []
    if sum(b - a for a, b in ranges) > MAX_BYTES:
        return 413, []
    return 206, ranges


numbers = st.one_of(st.integers(0, 1200), st.integers(0, 10**21))
specs = st.lists(st.one_of(
    st.tuples(st.just("full"), numbers, numbers),
    st.tuples(st.just("open"), numbers, st.just(0)),
    st.tuples(st.just("suffix"), numbers, st.just(0)),
    st.tuples(st.just("bad"), st.just(0), st.just(0)),
), min_size=1, max_size=MAX_RANGES + 2)


@settings(max_examples=400, deadline=None)
@given(specs=specs, size=st.integers(0, 1100), unit=st.sampled_from(["bytes", "Bytes", " bytes "]),
       space=st.sampled_from(["", " "]))
@example(specs=[("suffix", 5, 0)], size=0, unit="bytes", space="")  # an empty file: nothing to send
def test_parse_range_matches_the_model(specs: list[Spec], size: int, unit: str, space: str) -> None:
    header = f"{unit}=" + ",".join(space + render(s) for s in specs)
    status, ranges = model(specs, size, header)
    try:
        got = parse_range(header, size, max_ranges=MAX_RANGES, max_bytes=MAX_BYTES)
    except RangeRefused as exc:
        assert exc.status == status, (header, exc)
        return
    assert status == 206 and got == ranges, header


@settings(max_examples=400, deadline=None)
@given(header=st.one_of(st.text(max_size=200), st.from_regex(r"\Abytes=[0-9, \-]{0,60}\Z")),
       size=st.integers(0, 2000))
@example(header="bytes=-5", size=0)
def test_parse_range_never_escapes_its_bounds(header: str, size: int) -> None:
    """Any header at all: refused with 400/413/416, or ranges inside the file and the bounds."""
    try:
        got = parse_range(header, size, max_ranges=MAX_RANGES, max_bytes=MAX_BYTES)
    except RangeRefused as exc:
        assert exc.status in (400, 413, 416)
        return
    assert 0 < len(got) <= MAX_RANGES
    assert all(0 <= a < b <= size for a, b in got)
    assert sum(b - a for a, b in got) <= MAX_BYTES
