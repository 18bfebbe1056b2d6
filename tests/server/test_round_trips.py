"""Round trips of a far read: the requests a real server sees for ``giod.open(url)`` and one read.

Far away every request the client waits for costs a round trip, so their
number is pinned here: the open brings the datasets' snapshots, and a read of
one collection then costs the file requests alone, the same for every file.
The connections opened ahead carry no request at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import awkward as ak
import pytest
from fastapi import Request

import giod
from giod.server.app import ServerThread, create_app
from giod.testing import synthetic

DATABASES = 3


@dataclass
class Recorded:
    url: str
    local: giod.Federation
    token: str
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, query
    ports: list[int] = field(default_factory=list)  # the client's port of each request seen

    def asked(self) -> list[tuple[str, str, str]]:
        """What the server was asked since the last call."""
        got = list(self.seen)
        self.seen.clear()
        self.ports.clear()
        return got


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    path = tmp_path_factory.mktemp("round-trips") / "fed"
    local = giod.open(path, create=True)
    ds = local.create_dataset("d", synthetic.schema())
    with ds.writer(database_events=400, cluster_events=100) as w:
        w.append(synthetic.events(400 * DATABASES, seed=3))
    app = create_app(str(path))
    seen: list[tuple[str, str, str]] = []
    ports: list[int] = []

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Any:
        seen.append((request.method, request.url.path, request.url.query))
        ports.append(request.client.port if request.client else 0)
        return await call_next(request)

    with ServerThread(app) as url:
        yield Recorded(url, local, local.catalog.create_token("read")[1], seen, ports)
    local.close()


def _open_and_read(rec: Recorded, collection: str) -> tuple[ak.Array, list[tuple[str, str, str]]]:
    rec.asked()
    fed = giod.open(rec.url, token=rec.token)
    try:
        got = fed.dataset("d").read([collection])
    finally:
        fed.close()
    return got, rec.asked()


def _files(asked: list[tuple[str, str, str]], container: str) -> Counter[str]:
    return Counter(p for m, p, _ in asked if m == "GET" and p.startswith("/files/") and p.endswith(container))


@pytest.fixture
def far(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server as a far one: no read is gathered (its round trip would cost more than the copy it saves)."""
    from giod.storage import remote

    monkeypatch.setattr(remote, "GATHER_RTT", -1.0)


@pytest.fixture
def near(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server as a near one whatever the machine's load: a loaded machine's loopback may take longer than
    the gather's bound to answer even a small request."""
    from giod.storage import remote

    monkeypatch.setattr(remote, "GATHER_RTT", float("inf"))


def test_open_brings_the_snapshot_and_a_whole_container_costs_one_request_per_file(recorded: Recorded,
                                                                                    far: None) -> None:
    got, asked = _open_and_read(recorded, "hits")
    assert ak.to_list(got) == ak.to_list(recorded.local.dataset("d").read(["hits"]))
    catalog = [r for r in asked if r[1].startswith("/api/")]
    assert catalog == [("GET", "/api/v1/federation", "snapshots=2000")]  # no snapshot of its own
    files = _files(asked, "/raw.tracker.arrow")
    assert len(files) == DATABASES and set(files.values()) == {1}
    assert len(asked) == 1 + DATABASES  # nothing else: no HEAD for a size, no second look at a file


def test_the_open_is_one_request_and_the_connections_opened_ahead_carry_the_reads(recorded: Recorded) -> None:
    recorded.asked()
    fed = giod.open(recorded.url, token=recorded.token)
    try:
        endpoint = fed.catalog.endpoint  # type: ignore[attr-defined]
        for t in endpoint.warming:
            t.join()
        assert recorded.asked() == [("GET", "/api/v1/federation", "snapshots=2000")]  # no warming request
        pool = endpoint._http.connection_from_url(recorded.url)
        ahead = {c.sock.getsockname()[1] for c in list(pool.pool.queue) if c is not None and c.sock is not None}
        assert len(ahead) >= endpoint.streams  # opened, idle, waiting in the pool
        fed.dataset("d").read(["hits"])
        used = set(recorded.ports)
    finally:
        fed.close()
    assert used and used <= ahead  # every read went on a connection opened before it was needed


def test_near_a_whole_container_costs_one_request_for_the_layouts_then_one_request_per_file(
        recorded: Recorded, near: None) -> None:
    got, asked = _open_and_read(recorded, "hits")
    assert ak.to_list(got) == ak.to_list(recorded.local.dataset("d").read(["hits"]))
    files = _files(asked, "/raw.tracker.arrow")
    # every file's footer and batches' metadata first, in one request, then the buffers, gathered
    assert len(files) == DATABASES and set(files.values()) == {1}
    assert [r for r in asked if r[0] == "POST"] == [("POST", "/files/local", "")]
    assert len(asked) == 2 + DATABASES


def test_near_and_an_older_server_the_layouts_cost_a_request_per_file(recorded: Recorded, near: None,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from giod.server.routes import files
    from giod.storage import remote

    def older(*args: Any, **kw: Any) -> Any:
        raise giod.NotFound("no route")  # what a server without the route answers (404)

    monkeypatch.setattr(remote.RemoteSite, "_fetch_many_heads", older)
    got, asked = _open_and_read(recorded, "hits")
    assert ak.to_list(got) == ak.to_list(recorded.local.dataset("d").read(["hits"]))
    assert Counter(q for m, p, q in asked if p.endswith("/raw.tracker.arrow")) == {"": DATABASES,
                                                                                   "buffers=no": DATABASES}
    assert files.MAX_HEADS >= remote.HEADS_PER_REQUEST


def test_a_partial_container_costs_one_request_per_file_planned_by_the_server(recorded: Recorded,
                                                                                far: None) -> None:
    got, asked = _open_and_read(recorded, "tracks")  # tracks share their container with jets
    assert ak.to_list(got) == ak.to_list(recorded.local.dataset("d").read(["tracks"]))
    assert [r for r in asked if r[1].startswith("/api/")] == [("GET", "/api/v1/federation", "snapshots=2000")]
    files = _files(asked, "/reco.arrow")
    # footer, batches' metadata and the columns' buffers in one answer, not one round trip each
    assert len(files) == DATABASES and set(files.values()) == {1}
    assert {q for m, p, q in asked if p.endswith("/reco.arrow")} == {"columns=tracks"}


def test_a_server_that_does_not_plan_costs_three_requests_per_file(recorded: Recorded,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from giod.server.routes import files

    monkeypatch.setattr(files, "_planned", lambda *a: None)  # as a server of an older level: the Range alone
    got, asked = _open_and_read(recorded, "jets")
    assert ak.to_list(got) == ak.to_list(recorded.local.dataset("d").read(["jets"]))
    files_asked = _files(asked, "/reco.arrow")
    assert len(files_asked) == DATABASES and max(files_asked.values()) <= 3  # footer, metadata, buffers


def test_a_dataset_opened_later_or_beyond_the_bound_asks_for_its_snapshot(recorded: Recorded,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from giod.catalog import remote

    monkeypatch.setattr(remote, "SNAPSHOT_DATABASES", DATABASES - 1)  # the dataset does not fit in the open
    recorded.asked()
    fed = giod.open(recorded.url, token=recorded.token)
    try:
        assert len(fed.dataset("d").databases()) == DATABASES
    finally:
        fed.close()
    assert [r[1] for r in recorded.asked()] == ["/api/v1/federation", "/api/v1/datasets/d/snapshot"]


def _get(url: str, target: str, token: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    import http.client
    from urllib.parse import urlsplit

    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request("GET", target, headers={"authorization": f"Bearer {token}", **headers})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def test_a_plan_the_server_cannot_make_answers_the_range(recorded: Recorded) -> None:
    rec = recorded.local.dataset("d").databases()[0].container("reco")
    assert rec is not None
    target = f"/files/local/{rec.path}"
    status, headers, body = _get(recorded.url, f"{target}?columns=nope", recorded.token, {"range": "bytes=0-9"})
    assert status == 206 and "x-giod-plan" not in headers and body[:6] == b"ARROW1" and len(body) == 10
    status, headers, body = _get(recorded.url, f"{target}?columns=tracks", recorded.token, {"range": "bytes=0-9"})
    assert status == 206 and headers["x-giod-plan"] == "whole"
    assert headers["content-type"].startswith("multipart/byteranges") and int(headers["content-length"]) == len(body)
    for bad in ("x" * 9000, ","):
        status, _, body = _get(recorded.url, f"{target}?columns={bad}", recorded.token, {"range": "bytes=0-9"})
        assert status == 400


def test_a_plan_beyond_the_servers_bound_sends_the_metadata_and_the_client_plans_the_rest(tmp_path: Path) -> None:
    from giod.storage.http import Limits

    local = giod.open(tmp_path / "fed", create=True)
    ds = local.create_dataset("d", synthetic.schema())
    with ds.writer(database_events=400, cluster_events=100) as w:
        w.append(synthetic.events(800, seed=5))
    token = local.catalog.create_token("read")[1]
    with ServerThread(create_app(str(tmp_path / "fed"), limits=Limits(max_request_bytes=80 << 10))) as url:
        rec = ds.databases()[0].container("reco")
        assert rec is not None and rec.size > 80 << 10
        status, headers, _ = _get(url, f"/files/local/{rec.path}?columns=tracks", token, {"range": "bytes=0-9"})
        assert status == 206 and headers["x-giod-plan"] == "metadata"
        fed = giod.open(url, token=token)
        try:
            assert ak.to_list(fed.dataset("d").read(["tracks"])) == ak.to_list(ds.read(["tracks"]))
        finally:
            fed.close()
    local.close()


def test_a_sparse_selection_read_from_the_files_reads_each_footer_once(recorded: Recorded,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from giod.read import selection

    monkeypatch.setattr(selection, "AT_SOURCE_SHARE", 0.0)  # as a dense one: the client reads the files
    expression = "ht > 400"
    recorded.asked()
    fed = giod.open(recorded.url, token=recorded.token)
    try:  # read before the local read below, whose pages the process keeps
        got = fed.dataset("d").select(expression).read(["jets"])
    finally:
        fed.close()
    files = _files(recorded.asked(), "/reco.arrow")
    want = recorded.local.dataset("d").select(expression).read(["jets"])
    assert ak.to_list(got) == ak.to_list(want)
    assert 0 < len(want) < 40  # a few events per database: the page-level reads, not whole columns
    # the footer (kept when the file is opened again), the batches' metadata, the events' buffers
    assert files and max(files.values()) <= 3


def test_a_sparse_selection_is_planned_and_read_at_the_source_in_two_requests(recorded: Recorded) -> None:
    expression = "ht > 400"
    recorded.asked()
    fed = giod.open(recorded.url, token=recorded.token)
    try:
        sel = fed.dataset("d").select(expression)
        n = len(sel)
        counted = recorded.asked()
        got = sel.read(["jets"])
        read = recorded.asked()
    finally:
        fed.close()
    want = recorded.local.dataset("d").select(expression)
    assert n == len(want) and ak.to_list(got) == ak.to_list(want.read(["jets"]))
    assert str(got.type) == str(want.read(["jets"]).type)  # the same records, behaviours and all
    assert [r[:2] for r in counted] == [("GET", "/api/v1/federation"), ("POST", "/api/v1/select")]
    assert [r[:2] for r in read] == [("POST", "/api/v1/select")]  # no file request at all


def test_the_snapshots_the_open_brings_stay_within_the_databases_asked(recorded: Recorded) -> None:
    """A dataset with more databases than ``snapshots=N`` allows is left to its own request; N is bounded."""
    import urllib3

    def federation(query: str) -> tuple[int, Any]:
        r = urllib3.request("GET", f"{recorded.url}/api/v1/federation?{query}",
                            headers={"authorization": f"Bearer {recorded.token}"})
        return r.status, r.json() if r.status == 200 else None

    status, doc = federation(f"snapshots={DATABASES}")
    assert status == 200 and len(doc["snapshots"]["d"]["databases"]) == DATABASES
    status, doc = federation(f"snapshots={DATABASES - 1}")
    assert status == 200 and doc["snapshots"] == {}
    assert "snapshots" not in federation("")[1]
    for bad in ("snapshots=-1", "snapshots=10001", "snapshots=abc"):
        assert federation(bad)[0] in (400, 422), bad
