"""Paths stay inside the site root and every route checks its token, against a real server on loopback.

Requests are sent with ``http.client`` (which sends the path exactly as given)
or a raw socket, so that nothing on the client side normalises ``..`` or
percent-escapes away before the server sees them.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from giod.catalog import wire
from giod.catalog.records import ContainerSpec, DatabaseCommit
from giod.catalog.tables import tokens
from giod.server.app import ServerThread, create_app
from giod.storage.checksum import checksum_bytes
from giod.testing import synthetic
from tests.server.conftest import Served, serve

CANARY = b"CANARY-7f3e9c1d-never-served"
SQLITE_MAGIC = b"SQLite format 3"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def call(url: str, method: str, target: str, token: str | None = None, body: bytes | None = None,
         headers: dict[str, str] | None = None) -> Answer:
    """One request with the target sent verbatim."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        if body is not None:
            h.setdefault("Content-Type", "application/json")
        conn.request(method, target, body=body, headers=h)
        r = conn.getresponse()
        return Answer(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


def raw_call(url: str, request_line_target: bytes, token: str) -> bytes:
    """A request whose target holds bytes http.client refuses to send (NUL)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"GET " + request_line_target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                  b"Authorization: Bearer " + token.encode() + b"\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


# --------------------------------------------------------------------------- fixtures


@dataclass
class World:
    served: Served
    base: Path  # holds the federation directory and, outside it, the canaries
    root: Path  # the site root
    db_id: int
    container_id: int
    other_container_id: int
    file: str  # a container file of dataset qcd
    secrets: dict[str, str] = field(default_factory=dict)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("security")
    for served in serve(base / "fed"):
        fed = served.local
        for name, seed in (("qcd", 1), ("other", 2)):
            ds = fed.create_dataset(name, synthetic.schema())
            with ds.writer(database_events=100, cluster_events=50) as w:
                w.append(synthetic.events(100, seed=seed))
        fed.create_dataset("scratch", synthetic.schema())
        db = fed.catalog.databases("qcd")[0]
        root = Path(fed.site("local").root).resolve()
        # canaries outside the site root, and links inside it pointing at them
        (base / "canary.txt").write_bytes(CANARY)
        (base / "outside").mkdir()
        (base / "outside" / "c.parquet").write_bytes(CANARY)
        os.symlink(base / "canary.txt", root / "qcd" / "evil.parquet")
        os.symlink(base / "outside", root / "qcd" / "linkdir")
        os.symlink(base, root / "linkroot")
        (root / "qcd" / "orphan.parquet").write_bytes(b"not in the catalog")
        yield World(served, base, root, db.id, db.containers[0].id,
                    fed.catalog.databases("other")[0].containers[0].id, db.containers[0].path)


# --------------------------------------------------------------------------- paths


def traversals(w: World) -> list[str]:
    """Request targets that try to leave the site root (or the /files tree)."""
    absolute = str(w.base / "canary.txt")
    return [
        "/files/local/../catalog.sqlite",
        "/files/local/qcd/../../catalog.sqlite",
        "/files/local/qcd/../../../canary.txt",
        "/files/local/%2e%2e/catalog.sqlite",
        "/files/local/%2E%2E/%2E%2E/canary.txt",
        "/files/local/%2e%2e%2fcatalog.sqlite",
        "/files/local/qcd%2f%2e%2e%2f%2e%2e%2fcanary.txt",
        "/files/local/..%5ccatalog.sqlite",
        "/files/local/..\\catalog.sqlite",
        "/files/local/qcd\\..\\..\\canary.txt",
        "/files/local/" + absolute,  # -> path "/…/canary.txt"
        "/files/local/%2f" + absolute.lstrip("/"),
        "/files/local//etc/passwd",
        "/files/local/qcd//../../canary.txt",
        "/files/local/./qcd/../../canary.txt",
        "/files/local/qcd%00/../../canary.txt",
        "/files/local/qcd/evil.parquet%00.parquet",
        "/files/%2e%2e/catalog.sqlite",  # the site name itself
        "/files/..%2f..%2fcanary.txt/x",
        "/files/local/qcd/evil.parquet",  # a link inside the root to a file outside
        "/files/local/qcd/linkdir/c.parquet",  # a linked directory
        "/files/local/linkroot/canary.txt",  # a link to a directory above the root
        "/files/local/linkroot/fed/catalog.sqlite",
    ]


# Targets decoded once are plain names inside the root: reads find nothing, an upload lands there, under
# that literal name (the path each maps to), and never outside.
LITERALS = {
    "/files/local/%252e%252e/catalog.sqlite": "%2e%2e/catalog.sqlite",
    "/files/local/%252e%252e%252f%252e%252e%252fcanary.txt": "%2e%2e%2f%2e%2e%2fcanary.txt",
    "/files/local/%c0%ae%c0%ae/catalog.sqlite": "\ufffd\ufffd\ufffd\ufffd/catalog.sqlite",  # overlong UTF-8 '.'
}


def _upload_headers(body: bytes) -> dict[str, str]:
    # the right checksum, so that nothing but path confinement stands between the upload and the disk
    return {"X-Giod-Checksum": checksum_bytes(body), "Content-Type": "application/octet-stream"}


@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "DELETE"])
def test_traversal_is_refused(world: World, method: str) -> None:
    w = world
    evil = b"CANARY-OVERWRITTEN"
    outside_before = sorted(p.name for p in (w.base / "outside").iterdir())
    catalog_before = (w.base / "fed" / "catalog.sqlite").stat().st_size
    wrong = []
    for target in traversals(w):
        body = evil if method == "PUT" else None
        headers = _upload_headers(evil) if method == "PUT" else None
        a = call(w.served.url, method, target, w.served.admin, body=body, headers=headers)
        if not 400 <= a.status < 500 or CANARY in a.body or SQLITE_MAGIC in a.body:
            wrong.append(f"{method} {target} -> {a.status} {a.body[:120]!r}")
    for target, literal in LITERALS.items():
        body = evil if method == "PUT" else None
        headers = _upload_headers(evil) if method == "PUT" else None
        a = call(w.served.url, method, target, w.served.admin, body=body, headers=headers)
        expected = {"GET": 404, "HEAD": 404, "PUT": 201, "DELETE": 200}[method]
        if a.status != expected or CANARY in a.body or SQLITE_MAGIC in a.body:
            wrong.append(f"{method} {target} -> {a.status} {a.body[:120]!r}")
        if method == "PUT" and not (w.root / literal).read_bytes() == evil:
            wrong.append(f"{method} {target} did not land at {literal} inside the root")
        if method == "DELETE" and (w.root / literal).exists():
            wrong.append(f"{method} {target} did not remove {literal}")
    assert not wrong, "\n".join(wrong)
    # nothing outside the root was read, written or removed, and the links are still there
    assert (w.base / "canary.txt").read_bytes() == CANARY
    assert (w.base / "outside" / "c.parquet").read_bytes() == CANARY
    assert sorted(p.name for p in (w.base / "outside").iterdir()) == outside_before
    assert (w.root / "qcd" / "evil.parquet").is_symlink() and (w.root / "linkroot").is_symlink()
    assert (w.base / "fed" / "catalog.sqlite").stat().st_size >= catalog_before
    assert not list(w.base.glob("*.tmp*")) and not (w.root.parent / "x").exists()
    # and the server still serves what it should
    a = call(w.served.url, "GET", f"/files/local/{w.file}", w.served.admin, headers={"Range": "bytes=0-5"})
    assert (a.status, a.body) == (206, b"ARROW1")  # the magic of an Arrow IPC container


def test_raw_nul_and_control_bytes_in_the_target_are_refused(world: World) -> None:
    w = world
    for target in (b"/files/local/qcd/\x00../../canary.txt", b"/files/local/..\x00/catalog.sqlite",
                   b"/files/local/qcd/\x01x", b"/files/local/\xff\xfe/../../canary.txt"):
        answer = raw_call(w.served.url, target, w.served.admin)
        status = int(answer.split(b" ", 2)[1])
        assert 400 <= status < 500, (target, answer[:200])
        assert CANARY not in answer and SQLITE_MAGIC not in answer
    assert call(w.served.url, "GET", "/api/v1/federation", w.served.admin).status == 200


def test_dataset_token_cannot_step_into_another_dataset(world: World) -> None:
    w = world
    qcd_reader = w.served.token("read", "qcd")
    other_file = w.served.local.catalog.databases("other")[0].containers[0].path
    for target in (f"/files/local/{other_file}", f"/files/local/qcd/../{other_file}",
                   f"/files/local/qcd/%2e%2e/{other_file}", f"/files/local/qcd%2f..%2f{other_file}"):
        a = call(w.served.url, "GET", target, qcd_reader)
        assert a.status in (400, 404), (target, a.status, a.body[:200])
        assert not a.body.startswith((b"PAR1", b"ARROW1"))


def test_inside_links_and_plain_files_still_work(world: World) -> None:
    """Confinement refuses only what leaves the root: a link that stays inside is followed."""
    w = world
    link = w.root / "qcd" / "inside-link.parquet"
    if not link.exists():
        os.symlink(w.root / w.file, link)
    whole = (w.root / w.file).read_bytes()
    a = call(w.served.url, "GET", "/files/local/qcd/inside-link.parquet", w.served.admin)
    assert (a.status, a.body) == (200, whole)


# --------------------------------------------------------------------------- the token sweep


@dataclass(frozen=True)
class Route:
    scope: str  # the scope the route needs
    dataset: str | None  # the dataset it acts on (None: federation-wide)
    target: str
    body: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()


def routes(w: World) -> dict[tuple[str, str], Route]:
    """Every operation of the OpenAPI spec, with real parameters, keyed by (method, template)."""
    cat = w.served.local.catalog
    schema = cat.schema(1)
    upload = b"sweep upload"
    # refused after the token check (its file lies outside the dataset's directory): nothing is registered
    commit = DatabaseCommit("qcd", 1, "local", (ContainerSpec("extra", "elsewhere/never-written.parquet",
                                                              "crc32c:00000000", 10, (1,), 1),))

    def js(doc: Any) -> bytes:
        return json.dumps(doc).encode()

    # a writer's lease on qcd's files: renewed, then released, by the sweep
    lease = cat.take_lease("local", "qcd/sweep-", "sweep", 3600)

    return {
        ("GET", "/metrics"): Route("read", None, "/metrics"),
        ("GET", "/api/v1/federation"): Route("read", None, "/api/v1/federation"),
        ("GET", "/api/v1/versions"): Route("read", None, "/api/v1/versions?limit=5"),
        ("POST", "/api/v1/schemas"): Route("write", None, "/api/v1/schemas", js(
            {"name": schema.name, "text": schema.text, "fingerprint": schema.fingerprint})),
        # every dataset here has schema 1: test_names_security.py tries a schema of another dataset
        ("GET", "/api/v1/schemas/{schema_id}"): Route("read", None, "/api/v1/schemas/1"),
        ("GET", "/api/v1/datasets"): Route("read", None, "/api/v1/datasets"),
        ("POST", "/api/v1/datasets"): Route("write", "qcd", "/api/v1/datasets", js({"name": "qcd", "schema_id": 1})),
        ("GET", "/api/v1/datasets/{name}"): Route("read", "qcd", "/api/v1/datasets/qcd"),
        ("DELETE", "/api/v1/datasets/{name}"): Route("admin", None, "/api/v1/datasets/scratch"),
        ("PUT", "/api/v1/datasets/{name}/schema"): Route("write", "qcd", "/api/v1/datasets/qcd/schema",
                                                         js({"schema_id": 1})),
        ("GET", "/api/v1/datasets/{name}/summary"): Route("read", "qcd", "/api/v1/datasets/qcd/summary"),
        ("GET", "/api/v1/datasets/{name}/databases"): Route("read", "qcd", "/api/v1/datasets/qcd/databases"),
        ("GET", "/api/v1/datasets/{name}/snapshot"): Route("read", "qcd", "/api/v1/datasets/qcd/snapshot"),
        ("GET", "/api/v1/databases/{database_id}"): Route("read", "qcd", f"/api/v1/databases/{w.db_id}"),
        ("GET", "/api/v1/sites"): Route("read", None, "/api/v1/sites"),
        ("POST", "/api/v1/sites"): Route("admin", None, "/api/v1/sites", js(
            {"name": "sweep", "url": str(w.base / "sweep-site"), "distance": 7})),
        ("GET", "/api/v1/sites/{name}"): Route("read", None, "/api/v1/sites/local"),
        ("GET", "/api/v1/sites/{name}/files"): Route("admin", None, "/api/v1/sites/local/files"),
        ("GET", "/api/v1/containers/{container_id}/replicas"): Route(
            "read", "qcd", f"/api/v1/containers/{w.container_id}/replicas"),
        ("PUT", "/api/v1/containers/{container_id}/replicas/{site}"): Route(
            "write", "qcd", f"/api/v1/containers/{w.container_id}/replicas/local", js({"state": "good"})),
        ("POST", "/api/v1/commit"): Route("write", "qcd", "/api/v1/commit", js(wire.dump(commit))),
        ("POST", "/api/v1/containers"): Route("write", "qcd", "/api/v1/containers", js(
            {"items": [{"database_id": w.db_id, "containers": [], "tag_stats": {}}], "site": "local"})),
        ("POST", "/api/v1/leases"): Route("write", "qcd", "/api/v1/leases", js(
            {"site": "local", "prefix": "qcd/sweep-", "holder": "sweep", "seconds": 60})),
        ("POST", "/api/v1/leases/renew"): Route("write", "qcd", "/api/v1/leases/renew", js(
            {"ids": [lease.id], "seconds": 60})),
        ("DELETE", "/api/v1/leases/{lease_id}"): Route("write", "qcd", f"/api/v1/leases/{lease.id}"),
        ("POST", "/api/v1/query"): Route("read", "qcd", "/api/v1/query", js(
            {"dataset": "qcd", "columns": ["ht"], "limit": 3})),
        ("POST", "/api/v1/select"): Route("read", "qcd", "/api/v1/select", js(
            {"dataset": "qcd", "where": "ht > 0", "version": 1, "columns": ["ht"], "read": True})),
        ("GET", "/api/v1/models/{dataset}"): Route("read", "qcd", "/api/v1/models/qcd"),
        ("GET", "/api/v1/events/{dataset}/next"): Route("read", "qcd", "/api/v1/events/qcd/next?where=ht%3E0"),
        ("GET", "/api/v1/events/{dataset}/lookup"): Route("read", "qcd", "/api/v1/events/qcd/lookup?run=1&event=5"),
        ("GET", "/api/v1/events/{dataset}/{entry}"): Route("read", "qcd", "/api/v1/events/qcd/3"),
        ("GET", "/api/v1/feed"): Route("read", None, "/api/v1/feed?after=-1&seconds=0.05"),
        ("GET", "/api/v1/exchange-cursors/{key}"): Route("write", "qcd",
                                                         "/api/v1/exchange-cursors/x0123456789abcdef?dataset=qcd"),
        ("DELETE", "/api/v1/exchange-cursors/{key}"): Route(
            "write", "qcd", "/api/v1/exchange-cursors/x0123456789abcdef?dataset=qcd"),
        ("PUT", "/api/v1/exchange-cursors/{key}"): Route("write", "qcd", "/api/v1/exchange-cursors/x0123456789abcdef",
                                                         js({"source": "daq", "dataset": "qcd", "version": 1})),
        # the Tape REST API: this federation has no nearline site, so every request ends in a 4xx after its checks
        ("GET", "/.well-known/wlcg-tape-rest-api"): Route("read", None, "/.well-known/wlcg-tape-rest-api"),
        ("POST", "/api/v1/tape/stage"): Route("read", "qcd", "/api/v1/tape/stage",
                                              js({"files": [{"path": f"/local/{w.file}"}]})),
        ("GET", "/api/v1/tape/stage/{rid}"): Route("read", "qcd", "/api/v1/tape/stage/r1"),
        ("DELETE", "/api/v1/tape/stage/{rid}"): Route("read", "qcd", "/api/v1/tape/stage/r1"),
        ("POST", "/api/v1/tape/stage/{rid}/cancel"): Route("read", "qcd", "/api/v1/tape/stage/r1/cancel",
                                                           js({"paths": [f"/local/{w.file}"]})),
        ("POST", "/api/v1/tape/release/{rid}"): Route("read", "qcd", "/api/v1/tape/release/r1",
                                                      js({"paths": [f"/local/{w.file}"]})),
        ("POST", "/api/v1/tape/archiveinfo"): Route("read", "qcd", "/api/v1/tape/archiveinfo",
                                                    js({"paths": [f"/local/{w.file}"]})),
        ("POST", "/files/{site}"): Route("read", "qcd", "/files/local", js({"paths": [w.file]}),
                                         (("content-type", "application/json"),)),
        ("HEAD", "/files/{site}/{path}"): Route("read", "qcd", f"/files/local/{w.file}"),
        ("GET", "/files/{site}/{path}"): Route("read", "qcd", f"/files/local/{w.file}",
                                               headers=(("Range", "bytes=0-99"),)),
        ("PUT", "/files/{site}/{path}"): Route("write", "qcd", "/files/local/qcd/sweep/upload.parquet", upload,
                                               tuple(_upload_headers(upload).items())),
        ("DELETE", "/files/{site}/{path}"): Route("write", "qcd", "/files/local/qcd/orphan.parquet"),
        # a third-party copy of a file already there: read and kept, nothing fetched
        ("POST", "/files/{site}/{path}"): Route("write", "qcd", f"/files/local/{w.file}", headers=(
            ("X-Giod-Source", f"{w.served.url}/files/local"), ("X-Giod-Size", str((w.root / w.file).stat().st_size)),
            ("X-Giod-Checksum", cat.checksum_of(w.file)))),
    }


def _send(w: World, key: tuple[str, str], r: Route, token: str | None, url: str | None = None) -> Answer:
    return call(url or w.served.url, key[0], r.target, token, body=r.body, headers=dict(r.headers))


def _sweep(w: World, token_for: Any, want: Any, url: str | None = None) -> list[str]:
    """Send every route with ``token_for(route)``; the routes whose answer ``want(route, status)`` refuses."""
    wrong = []
    for key, r in routes(w).items():
        token = token_for(r)
        if token is ...:
            continue  # this check does not apply to the route
        a = _send(w, key, r, token, url)
        if not want(r, a):
            wrong.append(f"{key[0]} {key[1]} -> {a.status} {a.body[:160]!r}")
    return wrong


def test_the_sweep_covers_every_route_of_the_spec(world: World) -> None:
    a = call(world.served.url, "GET", "/openapi.json")
    assert a.status == 200
    spec = json.loads(a.body)
    ops = {(m.upper(), p) for p, item in spec["paths"].items() for m in item
           if m in ("get", "head", "put", "post", "delete", "patch")}
    assert ops == set(routes(world)), "a route was added or removed: extend the sweep"


def test_no_token_is_401(world: World) -> None:
    def want(r: Route, a: Answer) -> bool:
        return a.status == 401 and a.headers.get("www-authenticate") == "Bearer"

    assert not _sweep(world, lambda r: None, want)


def test_bad_tokens_are_401(world: World) -> None:
    w = world
    cat = w.served.local.catalog
    expired_rec, expired = cat.create_token("admin", expires=time.time() + 3600, note="to expire")
    cat._run(lambda conn: conn.execute(update(tokens).where(tokens.c.id == expired_rec.id)
                                       .values(expires=time.time() - 60)), write=True)
    revoked_rec, revoked = cat.create_token("admin", note="to revoke")
    cat.revoke_token(revoked_rec.id)
    admin_id = w.served.admin.split("_")[1]
    bad = {
        "garbage": "garbage",
        "empty secret": "",
        "right shape, unknown id": "giod_999999_" + "A" * 43,
        "right id, wrong secret": f"giod_{admin_id}_" + "A" * 43,
        "admin secret, one char changed": w.served.admin[:-1] + ("A" if w.served.admin[-1] != "A" else "B"),
        "admin secret with a suffix": w.served.admin + "x",
        "expired": expired,
        "revoked": revoked,
    }
    for what, secret in bad.items():
        wrong = _sweep(w, lambda r, s=secret: s, lambda r, a: a.status == 401)
        assert not wrong, f"{what}:\n" + "\n".join(wrong)
    # other schemes than Bearer are refused too
    for header in ("Basic YWRtaW46YWRtaW4=", f"Token {w.served.admin}", "Bearer", "Bearer  "):
        a = call(w.served.url, "GET", "/api/v1/federation", headers={"Authorization": header})
        assert a.status == 401, header


def test_weaker_scope_is_403(world: World) -> None:
    w = world
    reader, writer = w.served.token("read"), w.served.token("write")

    def token_for(r: Route) -> str | Any:
        return {"read": ..., "write": reader, "admin": writer}[r.scope]

    assert not _sweep(w, token_for, lambda r, a: a.status == 403)
    # and a read token restricted to the dataset, on the write routes of that dataset
    qcd_reader = w.served.token("read", "qcd")
    assert not _sweep(w, lambda r: qcd_reader if r.scope == "write" else ..., lambda r, a: a.status == 403)


def test_token_of_another_dataset_is_404(world: World) -> None:
    """A dataset the token may not see is answered as one that does not exist (docs/security.md)."""
    w = world
    held = {s: w.served.token(s, "other") for s in ("read", "write")}

    def token_for(r: Route) -> str | Any:
        # federation-wide reads answer a restricted token with its own dataset only (tests/server/test_scope.py),
        # and registering a schema is open to it (a writer registers the one of the dataset it creates)
        if r.scope == "admin" or r.dataset is None:
            return ...
        return held[r.scope]

    def want(r: Route, a: Answer) -> bool:
        # creating a dataset of another name is refused alike whether it exists or not
        if r.target == "/api/v1/datasets":
            return a.status == 403
        # a lease of another dataset is left alone, as an unknown lease id is
        if r.target.startswith("/api/v1/leases/"):
            return a.status == 200 and a.body in (b'{"renewed":[]}', b'{"ok":true}')
        return a.status == 404

    assert not _sweep(w, token_for, want)


def test_federation_wide_writes_refuse_dataset_tokens(world: World) -> None:
    w = world
    other_writer = w.served.token("write", "other")
    for key in (("POST", "/api/v1/sites"), ("GET", "/api/v1/sites/{name}/files"),
                ("DELETE", "/api/v1/datasets/{name}")):
        a = _send(w, key, routes(w)[key], other_writer)
        assert a.status == 403, (key, a.status)


def test_right_token_passes(world: World) -> None:
    w = world
    minimal = {(r.scope, r.dataset): w.served.token(r.scope, r.dataset) for r in routes(w).values()}

    def passes(r: Route, a: Answer) -> bool:
        return a.status not in (401, 403) and a.status < 500

    # the least token that covers each route, then the admin token
    assert not _sweep(w, lambda r: minimal[(r.scope, r.dataset)], passes)
    assert not _sweep(w, lambda r: w.served.admin, passes)
    # a dataset's own write token may mark its own replicas, and one of another dataset's
    qcd_writer = w.served.token("write", "qcd")
    mark = json.dumps({"state": "good"}).encode()
    assert call(w.served.url, "PUT", f"/api/v1/containers/{w.container_id}/replicas/local", qcd_writer,
                body=mark).status == 200
    assert call(w.served.url, "PUT", f"/api/v1/containers/{w.other_container_id}/replicas/local", qcd_writer,
                body=mark).status == 404


def test_anonymous_read_server(world: World) -> None:
    """With anonymous_read, reads pass without a token; writes and admin actions still need one."""
    w = world
    with ServerThread(create_app(str(w.base / "fed"), anonymous_read=True)) as url:
        def want(r: Route, a: Answer) -> bool:
            return a.status not in (401, 403) and a.status < 500 if r.scope == "read" else a.status == 401

        # staging mounts tapes and fills the disk buffer: a read, but one an anonymous caller may not ask
        staging = {key for key in routes(w) if key[1].startswith("/api/v1/tape/") and key[0] != "GET"}
        anonymous = {key: r for key, r in routes(w).items() if key not in staging}
        wrong = []
        for key, r in anonymous.items():
            a = _send(w, key, r, None, url)
            if not want(r, a):
                wrong.append(f"{key[0]} {key[1]} -> {a.status} {a.body[:160]!r}")
        for key in staging:
            a = _send(w, key, routes(w)[key], None, url)
            if a.status != 401:
                wrong.append(f"{key[0]} {key[1]} -> {a.status} {a.body[:160]!r} (staging needs a token)")
        assert len(staging) == 5 and not wrong, wrong
        # a bad token is refused, not taken as anonymous
        a = call(url, "GET", "/api/v1/federation", "giod_1_" + "A" * 43)
        assert a.status == 401


def test_container_replicas_of_another_dataset_cannot_be_marked_lost(world: World) -> None:
    """A write token for one dataset cannot make another dataset unreadable by marking its copies lost."""
    w = world
    other_writer = w.served.token("write", "other")
    a = call(w.served.url, "PUT", f"/api/v1/containers/{w.container_id}/replicas/local", other_writer,
             body=json.dumps({"state": "lost"}).encode())
    assert a.status == 404
    assert [state for _, state in w.served.local.catalog.replicas(w.container_id)] == ["good"]


def test_empty_bulk_add_needs_a_token(world: World) -> None:
    a = call(world.served.url, "POST", "/api/v1/containers",
             body=json.dumps({"items": [], "site": "local"}).encode())
    assert a.status == 401


def test_commit_refuses_an_anonymous_body_before_reading_it(world: World) -> None:
    """An anonymous client learns nothing about the commit format: 401, not a validation message."""
    a = call(world.served.url, "POST", "/api/v1/commit", body=b'{"dataset": "qcd"}')
    assert a.status == 401 and b"DatabaseCommit" not in a.body
