"""Round trips of a far read: the requests a real server sees for ``giod.open(url)`` and one read.

Far away every request the client waits for costs a round trip, so their
number is pinned here: the open brings the datasets' snapshots, and a read of
one collection then costs the file requests alone, the same for every file.
The requests that only open connections ahead (``HEAD /healthz``) wait for
nothing and are left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
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

    def asked(self) -> list[tuple[str, str, str]]:
        """What the server was asked since the last call, warming requests left out."""
        got = [r for r in self.seen if r[1] != "/healthz"]
        self.seen.clear()
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

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Any:
        seen.append((request.method, request.url.path, request.url.query))
        return await call_next(request)

    with ServerThread(app) as url:
        yield Recorded(url, local, local.catalog.create_token("read")[1], seen)
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


def test_open_brings_the_snapshot_and_a_whole_container_costs_one_request_per_file(recorded: Recorded) -> None:
    got, asked = _open_and_read(recorded, "hits")
    assert ak.to_list(got) == ak.to_list(recorded.local.dataset("d").read(["hits"]))
    catalog = [r for r in asked if r[1].startswith("/api/")]
    assert catalog == [("GET", "/api/v1/federation", "snapshots=2000")]  # no snapshot of its own
    files = _files(asked, "/raw.tracker.arrow")
    assert len(files) == DATABASES and set(files.values()) == {1}
    assert len(asked) == 1 + DATABASES  # nothing else: no HEAD for a size, no second look at a file


def test_a_partial_container_costs_at_most_three_requests_per_file(recorded: Recorded) -> None:
    got, asked = _open_and_read(recorded, "tracks")  # tracks share their container with jets
    assert ak.to_list(got) == ak.to_list(recorded.local.dataset("d").read(["tracks"]))
    assert [r for r in asked if r[1].startswith("/api/")] == [("GET", "/api/v1/federation", "snapshots=2000")]
    files = _files(asked, "/reco.arrow")
    assert len(files) == DATABASES and max(files.values()) <= 3  # footer, batches' metadata, buffers


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
