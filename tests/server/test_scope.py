"""A token restricted to one dataset sees nothing of any other, names included, on every route.

Against a real server on loopback: the datasets ``qcd`` and ``secretzebra``
(a name that appears nowhere else), and tokens restricted to ``qcd``. Every
operation of the OpenAPI spec is sent with them; no answer may hold the other
dataset's name, and asking for the other dataset (or one of its objects by id)
is answered exactly as asking for one that does not exist.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from giod.testing import synthetic
from tests.server.conftest import serve
from tests.server.test_security import Answer, Route, World, call, routes

SECRET = "secretzebra"
NOBODY = "nobodyzebra"  # as long as SECRET, and no dataset of that name exists


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("scope")
    for served in serve(base / "fed"):
        fed = served.local
        for name, seed in (("qcd", 1), (SECRET, 2)):
            ds = fed.create_dataset(name, synthetic.schema())
            with ds.writer(database_events=100, cluster_events=50) as w:
                w.append(synthetic.events(100, seed=seed))
        fed.create_dataset("scratch", synthetic.schema())
        db = fed.catalog.databases("qcd")[0]
        root = Path(fed.site("local").root).resolve()
        (root / "qcd" / "orphan.parquet").write_bytes(b"not in the catalog")
        secret_db = fed.catalog.databases(SECRET)[0]
        yield World(served, base, root, db.id, db.containers[0].id, secret_db.containers[0].id,
                    db.containers[0].path)


def _send(w: World, key: tuple[str, str], r: Route, token: str) -> Answer:
    return call(w.served.url, key[0], r.target, token, body=r.body, headers=dict(r.headers))


def _mentions(a: Answer, name: str) -> bool:
    return name.encode() in a.body or any(name in v for v in a.headers.values())


def test_the_walk_covers_every_route_of_the_spec(world: World) -> None:
    spec = json.loads(call(world.served.url, "GET", "/openapi.json").body)
    ops = {(m.upper(), p) for p, item in spec["paths"].items() for m in item
           if m in ("get", "head", "put", "post", "delete", "patch")}
    assert ops == set(routes(world)), "a route was added or removed: extend the walk"


@pytest.mark.parametrize("scope", ["read", "write"])
def test_no_answer_to_a_restricted_token_names_another_dataset(world: World, scope: str) -> None:
    w = world
    token = w.served.token(scope, "qcd")
    leaks = []
    for key, r in routes(w).items():
        a = _send(w, key, r, token)
        if _mentions(a, SECRET) or _mentions(a, "scratch"):
            leaks.append(f"{key[0]} {key[1]} -> {a.status} {a.body[:200]!r}")
    assert not leaks, "\n".join(leaks)
    # the unrestricted token does see them: the walk would have found the names
    a = call(w.served.url, "GET", "/api/v1/federation", w.served.admin)
    assert SECRET.encode() in a.body
    a = call(w.served.url, "GET", "/api/v1/versions", w.served.admin)
    assert f"commit {SECRET}".encode() in a.body


def _as(r: Route, old: str, new: str) -> Route:
    return Route(r.scope, r.dataset, r.target.replace(old, new),
                 None if r.body is None else r.body.replace(old.encode(), new.encode()), r.headers)


def test_another_dataset_is_answered_as_one_that_does_not_exist(world: World) -> None:
    """404 with the message of an unknown name, for every route that names a dataset: existence does not leak."""
    w = world
    secret_file = w.served.local.catalog.databases(SECRET)[0].containers[0].path
    differ = []
    for scope in ("read", "write"):
        token = w.served.token(scope, "qcd")
        for key, r in routes(w).items():
            if r.dataset != "qcd" or r.scope != scope or not ("qcd" in r.target or b'"qcd"' in (r.body or b"")):
                continue  # the routes that name no dataset, but an object by id: the test below
            asked = _as(_as(r, w.file, secret_file), "qcd", SECRET)
            hidden = _send(w, key, asked, token)
            unknown = _send(w, key, _as(asked, SECRET, NOBODY), token)
            same = (hidden.status, hidden.body.replace(SECRET.encode(), NOBODY.encode())) == (
                unknown.status, unknown.body)
            expected = 403 if key == ("POST", "/api/v1/datasets") else 404
            if not same or hidden.status != expected:
                differ.append(f"{key[0]} {key[1]}: {hidden.status} {hidden.body[:150]!r} "
                              f"vs {unknown.status} {unknown.body[:150]!r}")
    assert not differ, "\n".join(differ)


def test_objects_of_another_dataset_by_id_are_unknown_ids(world: World) -> None:
    w = world
    cat = w.served.local.catalog
    secret_db = cat.databases(SECRET)[0]
    absent = 10**9
    reader, writer = w.served.token("read", "qcd"), w.served.token("write", "qcd")
    mark = json.dumps({"state": "lost"}).encode()
    add = json.dumps({"items": [{"database_id": secret_db.id, "containers": [], "tag_stats": {}}],
                      "site": "local"}).encode()
    add_absent = add.replace(str(secret_db.id).encode(), str(absent).encode())
    pairs = [
        (reader, "GET", f"/api/v1/databases/{secret_db.id}", f"/api/v1/databases/{absent}", None),
        (reader, "GET", f"/api/v1/databases/{secret_db.id}?version=1", f"/api/v1/databases/{absent}?version=1",
         None),
        (reader, "GET", f"/api/v1/containers/{w.other_container_id}/replicas",
         f"/api/v1/containers/{absent}/replicas", None),
        (writer, "PUT", f"/api/v1/containers/{w.other_container_id}/replicas/local",
         f"/api/v1/containers/{absent}/replicas/local", mark),
        (writer, "POST", "/api/v1/containers", "/api/v1/containers", add),
    ]
    for token, method, hidden_target, absent_target, body in pairs:
        hidden = call(w.served.url, method, hidden_target, token, body=body)
        unknown = call(w.served.url, method, absent_target, token,
                       body=add_absent if body == add else body)
        ids = (str(secret_db.id), str(w.other_container_id))
        text = hidden.body.decode()
        for i in ids:
            text = text.replace(i, str(absent))
        assert hidden.status == unknown.status == 404, (hidden_target, hidden.status, hidden.body)
        assert text == unknown.body.decode(), (hidden_target, hidden.body, unknown.body)
    assert [s for _, s in cat.replicas(w.other_container_id)] == ["good"]
    # a lease on the other dataset's files is as unknown as an id never given
    lease = cat.take_lease("local", f"{SECRET}/w-", "theirs", 600)
    renew = json.dumps({"ids": [lease.id], "seconds": 60}).encode()
    a = call(w.served.url, "POST", "/api/v1/leases/renew", writer, body=renew)
    assert (a.status, json.loads(a.body)) == (200, {"renewed": []})
    a = call(w.served.url, "DELETE", f"/api/v1/leases/{lease.id}", writer)
    assert a.status == 200 and lease.id in [x.id for x in cat.leases()]


def test_a_close_match_is_not_suggested_from_datasets_the_token_may_not_see(world: World) -> None:
    w = world
    a = call(w.served.url, "GET", "/api/v1/datasets/secretzebr", w.served.token("read", "secretzebr"))
    assert a.status == 404 and SECRET.encode() not in a.body
    # the admin is helped as before
    a = call(w.served.url, "GET", "/api/v1/datasets/secretzebr", w.served.admin)
    assert a.status == 404 and b"did you mean" in a.body and SECRET.encode() in a.body


def _events(url: str, target: str, token: str, count: int) -> list[dict[str, int]]:
    """The first ``count`` version events of a feed stream."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", target, headers={"Authorization": f"Bearer {token}"})
        r = conn.getresponse()
        assert r.status == 200, r.read()
        found: list[dict[str, int]] = []
        while len(found) < count:
            line = r.fp.readline()
            assert line, "the stream ended"
            if line.startswith(b"data: "):
                found.append(json.loads(line[6:]))
        return found
    finally:
        conn.close()


def _until(url: str, target: str, token: str, version: int) -> bool:
    """Whether a feed stream tells ``version`` (read until it does, or the stream ends)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", target, headers={"Authorization": f"Bearer {token}"})
        r = conn.getresponse()
        while line := r.fp.readline():
            if line.startswith(b"data: ") and json.loads(line[6:])["version"] == version:
                return True
        return False
    finally:
        conn.close()


def _stream(url: str, target: str, token: str) -> bytes:
    """A whole feed stream (it ends by its ``seconds``)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", target, headers={"Authorization": f"Bearer {token}"})
        r = conn.getresponse()
        assert r.status == 200
        return r.read()
    finally:
        conn.close()


def test_the_feed_of_a_restricted_token_tells_only_its_own_dataset_s_commits(world: World) -> None:
    w = world
    fed = w.served.local
    start = fed.version
    with fed.dataset("qcd").writer(database_events=10, cluster_events=10) as wr:
        wr.append(synthetic.events(10, seed=4))
    qcd_version = fed.version
    with fed.dataset(SECRET).writer(database_events=10, cluster_events=10) as wr:
        wr.append(synthetic.events(10, seed=3))
    secret_version = fed.version
    assert start < qcd_version < secret_version
    reader = w.served.token("read", "qcd")
    # the admin is told the latest version (as soon as the server has seen it); the restricted token
    # the latest that changed qcd
    assert _until(w.served.url, f"/api/v1/feed?after={start}&seconds=30", w.served.admin, secret_version)
    assert _events(w.served.url, f"/api/v1/feed?after={start}&seconds=30", reader, 1) == [
        {"version": qcd_version}]
    # past qcd's commit, the other dataset's is no event for it at all
    body = _stream(w.served.url, f"/api/v1/feed?after={qcd_version}&seconds=0.5", reader)
    assert b"event: version" not in body and SECRET.encode() not in body
