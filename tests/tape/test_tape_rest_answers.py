"""A Tape REST endpoint is another site's: whatever it answers, the client raises a GiodError or returns
what the API says, and it never sends its token to a server the discovery document points at."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod.errors import GiodError, StorageError
from giod.storage.tape import rest
from giod.storage.tape.rest import TapeRestClient


class _Crafted:
    """A loopback HTTP server answering every request with ``body`` (and recording the headers it got)."""

    def __init__(self) -> None:
        self.body, self.status, self.seen = b"null", 200, []
        crafted = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                self.rfile.read(n)
                crafted.seen.append((self.path, self.headers.get("authorization")))
                self.send_response(crafted.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(crafted.body)))
                self.end_headers()
                self.wfile.write(crafted.body)

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def crafted() -> Iterator[_Crafted]:
    c = _Crafted()
    yield c
    c.server.shutdown()
    c.server.server_close()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["files", "requestId", "released", "onDisk", "state", "estimatedSeconds", "path", "x"]),
        inner, max_size=4),
    max_leaves=12,
)


def _calls(client: TapeRestClient) -> list[Any]:
    # not wait(): a request whose files stay STARTED is waited for as long as the endpoint answers
    return [lambda: client.stage(["/vault/a"]), lambda: client.poll("r1"), lambda: client.poll("r2"),
            lambda: client.release("r1", ["/vault/a"]), lambda: client.cancel("r1", ["/vault/a"]),
            lambda: client.delete("r1"), lambda: client.archiveinfo(["/vault/a"])]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answer=_JSON, status=st.sampled_from([200, 200, 200, 404, 500]), which=st.integers(0, 6))
def test_any_answer_is_a_giod_error_or_what_the_api_says(crafted: _Crafted, answer: Any, status: int,
                                                         which: int) -> None:
    crafted.body, crafted.status = json.dumps(answer).encode(), status
    client = TapeRestClient(f"{crafted.url}/api/v1/tape", "secret", timeout=5)
    try:
        got = _calls(client)[which]()
    except GiodError:
        return
    if which == 0:
        assert isinstance(got, str) and got == answer["requestId"]
    elif which in (1, 2):
        assert isinstance(got["files"], list) and isinstance(got["estimatedSeconds"], float)
        assert all(isinstance(f, dict) for f in got["files"])
    elif which == 6:
        assert isinstance(got, list) and all(isinstance(a, dict) for a in got)
    else:
        assert isinstance(got, int) and got >= 0


@pytest.mark.parametrize("answer", [
    {"requestId": "../../admin"}, {"requestId": ""}, {"requestId": 7}, {"requestId": "a/b"}, [], "x"])
def test_a_request_id_that_would_change_the_next_paths_is_refused(crafted: _Crafted, answer: Any) -> None:
    crafted.body, crafted.status = json.dumps(answer).encode(), 200
    with pytest.raises(StorageError, match="no request id"):
        TapeRestClient(f"{crafted.url}/api/v1/tape").stage(["/vault/a"])


def test_a_poll_without_end_is_refused_not_a_crash(crafted: _Crafted) -> None:
    crafted.body = json.dumps({"files": [{"onDisk": "yes"}]}).encode()
    with pytest.raises(StorageError, match="onDisk"):
        TapeRestClient(f"{crafted.url}/api/v1/tape").poll("r1")
    crafted.body = b'{"files": [], "estimatedSeconds": 1e999}'  # json reads Infinity
    with pytest.raises(StorageError, match="estimate"):
        TapeRestClient(f"{crafted.url}/api/v1/tape").poll("r1")


def test_an_answer_past_the_bound_is_refused(crafted: _Crafted, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rest, "MAX_ANSWER", 1000)
    crafted.body, crafted.status = json.dumps({"files": [{"path": "x" * 2000}]}).encode(), 200
    with pytest.raises(StorageError, match="more than 1000 bytes"):
        TapeRestClient(f"{crafted.url}/api/v1/tape").poll("r1")


@pytest.mark.parametrize("uri", ["http://evil.example/api/v1/tape", "https://{host}/api/v1/tape",
                                 "http://{host}.evil.example/api", "file:///etc/passwd", "//evil.example/x"])
def test_discovery_never_leads_the_token_to_another_server(crafted: _Crafted, uri: str) -> None:
    host = crafted.url.split("//", 1)[1]
    crafted.body = json.dumps({"endpoints": [{"version": "v1", "uri": uri.format(host=host)}]}).encode()
    crafted.status = 200
    crafted.seen.clear()
    with pytest.raises(StorageError, match="another server"):
        TapeRestClient.discover(crafted.url, "secret")
    assert [path for path, _ in crafted.seen] == ["/.well-known/wlcg-tape-rest-api"]  # nothing followed


def test_discovery_on_the_same_server_is_followed(crafted: _Crafted) -> None:
    crafted.body = json.dumps({"endpoints": [{"version": "v1", "uri": f"{crafted.url}/api/v1/tape"}]}).encode()
    crafted.status = 200
    assert TapeRestClient.discover(crafted.url, "secret").endpoint == f"{crafted.url}/api/v1/tape"
