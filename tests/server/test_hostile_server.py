"""A server is untrusted by its client: answers changed anywhere give data or a GiodError.

A real giod server on loopback, and in front of it a proxy that changes one value of some of its JSON
answers (a number made text, a count negative, a list emptied, an id beyond 64 bits, an object made a
list...). The client is opened through the proxy and reads every way it can; each outcome must be valid
data or a GiodError, never another exception. File bodies pass unchanged (their checksums are the
containers' fuzzers' business, ``test_fuzz_containers``); the Arrow tables of a query's or a selection's
answer have a few bytes overwritten.

``GIOD_SERVER_CASES`` sets the number of cases.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import giod
from giod.catalog import framed
from giod.errors import CatalogError, GiodError
from giod.storage.http import Limits
from giod.testing import synthetic
from tests.outcomes import failures, outcomes
from tests.server.conftest import Served, serve

CASES = int(os.environ.get("GIOD_SERVER_CASES", "25"))
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}
#: answers made of Arrow tables: a query's stream, a selection's framed tables
_TABLES = ("application/vnd.apache.arrow.stream", "application/vnd.giod.selection")
_VALUES: list[Any] = [None, -1, 0, 1 << 64, 1.5, "", "x", "1", [], {}, [1 << 64], [-1], ["a"], True, float("inf")]


def _mutated(doc: Any, rng: random.Random) -> Any:
    """``doc`` with one value, somewhere down its lists and objects, replaced."""
    if isinstance(doc, list) and doc and rng.random() < 0.8:
        i = rng.randrange(len(doc))
        doc[i] = _mutated(doc[i], rng)
        return doc
    if isinstance(doc, dict) and doc and rng.random() < 0.8:
        key = rng.choice(sorted(doc))
        doc[key] = _mutated(doc[key], rng)
        return doc
    return rng.choice(_VALUES)


def _garbled(data: bytes, rng: random.Random) -> bytes:
    """``data`` with a few bytes overwritten (an offset, a length, a flag…), or cut short."""
    out = bytearray(data)
    if rng.random() < 0.2:
        return bytes(out[: rng.randrange(len(out))])
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(out))
        out[at] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
    return bytes(out)


class Proxy:
    """An HTTP proxy on loopback to ``upstream`` that changes a JSON answer with probability ``rate``."""

    def __init__(self, upstream: str):
        target = urlsplit(upstream)
        self.host, self.port = target.hostname or "127.0.0.1", target.port or 80
        self.rng = random.Random(0)
        self.rate = 0.0
        self.changed = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _relay(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                upstream = http.client.HTTPConnection(proxy.host, proxy.port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    data = answer.read()
                    kind = answer.getheader("content-type") or ""
                    if kind.startswith("application/json") and data:
                        with proxy._lock:
                            if proxy.rng.random() < proxy.rate:
                                data = json.dumps(_mutated(json.loads(data), proxy.rng)).encode()
                                proxy.changed += 1
                    elif kind.startswith(_TABLES) and data:
                        with proxy._lock:
                            if proxy.rng.random() < proxy.rate:
                                data = _garbled(data, proxy.rng)
                                proxy.changed += 1
                    self.send_response(answer.status)
                    for k, v in answer.getheaders():
                        if k.lower() not in _HOP and k.lower() != "etag":
                            self.send_header(k, v)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    upstream.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _relay

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Proxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Proxy]]:
    for served in serve(tmp_path_factory.mktemp("hostile") / "fed"):
        ds = served.local.create_dataset("d", synthetic.schema())
        for seed in range(2):
            with ds.writer() as w:
                w.append(synthetic.events(20, seed=seed))
        with Proxy(served.url) as proxy:
            yield served, proxy


def _outcomes(url: str, token: str) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        fed = giod.open(url, token=token)
    except GiodError:
        return {"open": "refused"}
    except Exception as exc:
        return {"open": f"{type(exc).__name__}: {exc}"}
    try:
        def dataset() -> Any:
            return fed.dataset("d")

        steps: dict[str, Callable[[], Any]] = {
            "datasets": lambda: fed.datasets(),
            "len": lambda: len(dataset()),
            "read": lambda: dataset().read(["hits"]),
            "event": lambda: dataset().event(3),
            "event in the second": lambda: dataset().event(25),
            "selection": lambda: dataset().select("ht > 0").read(["hits"]),
            # sparse: the server selects and reads it (one framed answer), its tables checked here
            "sparse selection": lambda: dataset().select("ht > 275").read(["hits", "ht"]),
            "count": lambda: len(dataset().select("ht > 0")),
            "records": lambda: [(d.containers, d.tag_stats) for d in dataset().databases()],
            "lines": lambda: list(fed.catalog.database_rows("d")),
            "sites": lambda: fed.sites(),
            "query": lambda: dataset().query("ht > 0", ["ht"]),
        }
        out.update(outcomes(steps))
    finally:
        try:
            fed.close()
        except GiodError:
            pass
    return out


def test_through_the_proxy_unchanged_every_path_reads(server: tuple[Served, Proxy]) -> None:
    served, proxy = server
    proxy.rate = 0.0
    assert set(_outcomes(proxy.url, served.admin).values()) == {"ok"}


@settings(max_examples=CASES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), rate=st.sampled_from([0.2, 0.5, 1.0]))
def test_a_server_whose_answers_lie_gives_data_or_a_giod_error(server: tuple[Served, Proxy], seed: int,
                                                               rate: float) -> None:
    served, proxy = server
    proxy.rng, proxy.rate = random.Random(seed), rate
    try:
        outcome = _outcomes(proxy.url, served.admin)
    finally:
        proxy.rate = 0.0
    assert failures(outcome) == {}


def test_the_proxy_changes_answers(server: tuple[Served, Proxy], tmp_path: Path) -> None:
    """The fuzzer's own check: at rate 1 every JSON answer is changed, and some path is refused."""
    served, proxy = server
    before = proxy.changed
    proxy.rng, proxy.rate = random.Random(1), 1.0
    try:
        outcome = _outcomes(proxy.url, served.admin)
    finally:
        proxy.rate = 0.0
    assert proxy.changed > before
    assert "refused" in outcome.values()


@pytest.mark.parametrize("value", [None, 0, -5, "x", [1], {}, float("inf"), 1 << 70])
def test_limits_a_server_publishes_that_are_not_positive_integers_keep_their_defaults(value: Any) -> None:
    assert Limits.from_headers({"x-giod-max-ranges": value, "x-giod-max-request-bytes": "4096"}) == Limits(
        max_request_bytes=4096)


def test_a_selection_answer_whose_list_offsets_run_past_their_values_is_refused() -> None:
    """The IPC reader checks buffer sizes, not offsets: without a full validation the second list below read
    47 doubles of whatever memory followed its three values."""
    table = pa.table({"x": pa.array([[1.0, 2.0], [3.0]], type=pa.list_(pa.float64()))})
    body = bytearray(framed.encode([("c", table)], compression=None))
    offsets = np.array([0, 2, 3], dtype=np.int32).tobytes()
    at = body.find(offsets)
    assert at > 0 and framed.decode(bytes(body), "answer")["c"].equals(table)
    body[at:at + len(offsets)] = np.array([0, 2, 50], dtype=np.int32).tobytes()
    with pytest.raises(CatalogError, match="table 'c' is malformed: .*offsets"):
        framed.decode(bytes(body), "answer")
