"""Selections of a served federation made where the data are (``POST /api/v1/select``).

A remote client plans a selection in one request however many databases hold
the events, and reads a sparse one's stored columns in one more; the answers
equal the local read in every library, at every pinned version. What the
server sends is checked before it is used, and the server bounds what it
builds; past a bound, or from a server that cannot, the client reads the
files as before.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import awkward as ak
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import giod
from giod.catalog import framed
from giod.errors import CatalogError, ExpressionError, Forbidden, IntegrityError, NotFound
from giod.read.selection import plan_of_runs
from giod.server.app import ServerThread, create_app
from giod.testing import synthetic

DATABASES = 6
EVENTS = 300


class Server:
    def __init__(self, path: Path, url: str, local: giod.Federation, app: object) -> None:
        self.path, self.url, self.local, self.app = path, url, local, app
        self.token = local.catalog.create_token("read")[1]
        self.seen: list[tuple[str, str]] = []

    def remote(self, token: str | None = None) -> giod.Federation:
        return giod.open(self.url, token=self.token if token is None else token)

    def post(self, body: dict[str, object], token: str | None = None) -> tuple[int, bytes]:
        u = urlsplit(self.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        try:
            conn.request("POST", "/api/v1/select", body=json.dumps(body).encode(),
                         headers={"content-type": "application/json",
                                  "authorization": f"Bearer {token or self.token}"})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    from fastapi import Request

    path = tmp_path_factory.mktemp("at-source") / "fed"
    local = giod.open(path, create=True)
    ds = local.create_dataset("d", synthetic.schema())
    with ds.writer(database_events=EVENTS, cluster_events=100) as w:
        w.append(synthetic.events(EVENTS * DATABASES, seed=11))
    local.create_dataset("other", synthetic.schema())
    app = create_app(str(path))
    seen: list[tuple[str, str]] = []

    @app.middleware("http")
    async def record(request: Request, call_next: object) -> object:
        seen.append((request.method, request.url.path))
        return await call_next(request)  # type: ignore[operator]

    with ServerThread(app) as url:
        srv = Server(path, url, local, app)
        srv.seen = seen
        yield srv
    local.close()


def _asked(server: Server) -> list[tuple[str, str]]:
    got = list(server.seen)
    server.seen.clear()
    return got


def _plain(x: object) -> object:
    """Nested numpy (object arrays of arrays) as lists."""
    if isinstance(x, np.ndarray):
        return [_plain(y) for y in x] if x.dtype == object else x.tolist()
    return x


SPARSE = ["ht > 400", "lead_pt > 150 and njets >= 3", "count(jets.pt > 80) >= 2", "ht < 0"]


@pytest.mark.parametrize("expression", SPARSE)
def test_a_sparse_selection_equals_the_local_read_in_every_library(server: Server, expression: str) -> None:
    want = server.local.dataset("d").select(expression)
    fed = server.remote()
    try:
        sel = fed.dataset("d").select(expression)
        assert len(sel) == len(want) and (sel.entries() == want.entries()).all()
        for library in ("ak", "pa", "np"):
            got, local = sel.read(["jets", "ht"], library=library), want.read(["jets", "ht"], library=library)
            if library == "ak":
                assert ak.to_list(got) == ak.to_list(local) and str(got.type) == str(local.type)
            elif library == "pa":
                assert got.equals(local)
            else:
                assert got.keys() == local.keys()
                for k in got:
                    assert _plain(got[k]) == _plain(local[k])
        if len(want):
            event = sel.read()[0]  # relations navigate as in a local read
            assert ak.to_list(event.jets.tracks) == ak.to_list(want.read()[0].jets.tracks)
    finally:
        fed.close()


def test_no_file_is_read_for_a_sparse_selection_and_files_for_a_dense_one(server: Server) -> None:
    fed = server.remote()
    try:
        _asked(server)
        sparse = fed.dataset("d").select("ht > 400").read(["hits"])
        asked = _asked(server)
        assert not [p for _, p in asked if p.startswith("/files/")]
        assert asked.count(("POST", "/api/v1/select")) == 2  # the plan, then the stored columns
        dense = fed.dataset("d").select("ht > 0").read(["hits"])
        asked = _asked(server)
        assert asked.count(("POST", "/api/v1/select")) == 1  # the plan alone; the files in parallel
        assert len([p for _, p in asked if p.startswith("/files/")]) >= DATABASES
    finally:
        fed.close()
    local = server.local.dataset("d")
    assert ak.to_list(sparse) == ak.to_list(local.select("ht > 400").read(["hits"]))
    assert ak.to_list(dense) == ak.to_list(local.select("ht > 0").read(["hits"]))


def test_a_selection_pinned_before_a_commit_sees_its_own_version(tmp_path: Path) -> None:
    local = giod.open(tmp_path / "fed", create=True)
    ds = local.create_dataset("d", synthetic.schema())
    with ds.writer(database_events=EVENTS) as w:
        w.append(synthetic.events(EVENTS * 2, seed=1))
    token = local.catalog.create_token("read")[1]
    with ServerThread(create_app(str(tmp_path / "fed"))) as url:
        fed = giod.open(url, token=token)
        try:
            before = fed.dataset("d").select("ht > 300")
            n = len(before)
            with ds.writer(database_events=EVENTS) as w:
                w.append(synthetic.events(EVENTS * 2, seed=2))
            assert len(before) == n  # planned once, at its version
            pinned = fed.dataset("d", before.version).select("ht > 300")
            assert len(pinned) == n and ak.to_list(pinned.read(["ht"])) == ak.to_list(before.read(["ht"]))
            now = giod.open(url, token=token)
            try:
                later = now.dataset("d").select("ht > 300")
                assert len(later) == len(local.dataset("d").select("ht > 300")) > n
            finally:
                now.close()
        finally:
            fed.close()
    local.close()


def test_the_server_keeps_tokens_versions_and_input_to_their_rules(server: Server) -> None:
    other = server.local.catalog.create_token("read", "other")[1]
    status, _ = server.post({"dataset": "d", "where": "ht > 1", "version": server.local.version}, token=other)
    assert status in (403, 404)  # another dataset is not even said to exist
    fed = server.remote(other)
    try:
        assert len(fed.dataset("other").select("ht > 1")) == 0  # its own dataset: planned at the source
        with pytest.raises((Forbidden, NotFound)):
            len(fed.dataset("d").select("ht > 1"))
    finally:
        fed.close()
    v = server.local.version
    for body, status in [
        ({"dataset": "d", "where": "ht > 1", "version": v + 5}, 400),  # the future
        ({"dataset": "d", "where": "", "version": v}, 400),
        ({"dataset": "d", "where": "ht >", "version": v}, 400),
        ({"dataset": "d", "where": "nope > 1", "version": v}, 400),
        ({"dataset": "nope", "where": "ht > 1", "version": v}, 404),
        ({"dataset": "d", "where": "ht > 1", "version": -1}, 400),
        ({"dataset": "d", "where": "ht > 1", "version": v, "read": True, "columns": ["nope"]}, 404),
        ({"dataset": "d", "where": "x" * 10_001, "version": v}, 400),
    ]:
        got, data = server.post(body)
        assert got == status, (body, data[:200])
    fed = server.remote()
    try:
        with pytest.raises(ExpressionError):
            len(fed.dataset("d").select("ht >"))
    finally:
        fed.close()


def test_past_the_servers_bounds_the_client_reads_the_files(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    from giod.server.routes import query

    want = server.local.dataset("d").select("ht > 400").read(["jets"])
    for bound in ("MAX_RUNS", "MAX_SELECTED_BYTES"):
        with monkeypatch.context() as m:
            m.setattr(query, bound, 0)
            status, _ = server.post({"dataset": "d", "where": "ht > 400", "version": server.local.version,
                                     "read": True})
            assert status == 413
            fed = server.remote()
            try:
                _asked(server)
                got = fed.dataset("d").select("ht > 400").read(["jets"])
                files = [p for _, p in _asked(server) if p.startswith("/files/")]
            finally:
                fed.close()
            assert ak.to_list(got) == ak.to_list(want) and files, bound


def test_a_server_without_the_route_is_read_as_before(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    from giod.catalog.remote import RemoteCatalog

    fed = server.remote()
    try:
        assert isinstance(fed.catalog, RemoteCatalog)
        real = fed.catalog.endpoint.request

        def older(method: str, path: str, **kw: object) -> object:  # the route of a server of an older level
            return real(method, path.replace("/api/v1/select", "/api/v1/no-such-route"), **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(fed.catalog.endpoint, "request", older)
        got = fed.dataset("d").select("ht > 400").read(["jets"])
        assert fed.catalog._no_select
    finally:
        fed.close()
    assert ak.to_list(got) == ak.to_list(server.local.dataset("d").select("ht > 400").read(["jets"]))


# -------------------------------------------------------------- what the client accepts


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_any_body_decodes_or_is_one_catalog_error(body: bytes) -> None:
    for candidate in (body, framed.MAGIC + body):
        try:
            framed.decode(candidate, "test")
        except CatalogError:
            pass


def test_framed_bodies_round_trip_and_refuse_truncation_and_trailing_bytes() -> None:
    import pyarrow as pa

    tables = [("", framed.runs_table(np.array([[0, 3], [5, 9]]))), ("reco", pa.table({"x": [1.0, 2.0]}))]
    body = framed.encode(tables)
    got = framed.decode(body, "t")
    assert list(got) == ["", "reco"] and got["reco"].equals(tables[1][1])
    for cut in range(len(framed.MAGIC) + 1, len(body), 17):
        with pytest.raises(CatalogError):
            framed.decode(body[:cut], "t")
    with pytest.raises(CatalogError):
        framed.decode(body + b"\0", "t")
    with pytest.raises(CatalogError):
        framed.decode(framed.encode([tables[0], tables[0]]), "t")


@pytest.fixture(scope="module")
def snapshot(server: Server):  # type: ignore[no-untyped-def]
    return server.local.dataset("d").snapshot.pinned()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, EVENTS * DATABASES + 5), st.integers(-3, 400)), max_size=12))
def test_runs_from_a_server_give_the_plan_they_say_or_an_integrity_error(snapshot, pairs) -> None:  # type: ignore[no-untyped-def]
    runs = np.array([[s, s + n] for s, n in pairs], dtype=np.int64).reshape(-1, 2)
    total = EVENTS * DATABASES
    valid = (len(runs) == 0 or (
        (runs[:, 1] > runs[:, 0]).all() and (runs[1:, 0] >= runs[:-1, 1]).all()
        and (runs[:, 0] >= 0).all() and (runs[:, 1] <= total).all()
        and (runs[:, 0] // EVENTS == (runs[:, 1] - 1) // EVENTS).all()))
    try:
        plan = plan_of_runs(snapshot, runs, "test")
    except IntegrityError:
        assert not valid
        return
    assert valid
    entries = np.concatenate([np.arange(db.first_entry, db.stop_entry) if sel is None else sel + db.first_entry
                              for db, sel in plan]) if plan else np.zeros(0, np.int64)
    want = np.concatenate([np.arange(s, e) for s, e in runs]) if len(runs) else np.zeros(0, np.int64)
    assert entries.tolist() == want.tolist()
    assert [db.id for db, _ in plan] == sorted({db.id for db, _ in plan}, key=[d.id for d, _ in plan].index)
