"""HTTP semantics of a real server on loopback: who asks before what is asked, and 400 for bad input.

The route sweeps enumerate the app's own routes, so a route added later is covered without
touching this file.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.routing import APIRoute, iter_route_contexts

import giod
from giod.server.app import ServerThread, create_app
from giod.testing import synthetic

# pages and liveness: answered to anyone, on purpose
PUBLIC = {"/healthz", "/", "/display", "/vendor/plotly.min.js"}


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def call(url: str, method: str, target: str, token: str | None = None, body: bytes | None = None,
         headers: dict[str, str] | None = None) -> Answer:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
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


@dataclass
class Site:
    url: str
    app: Any
    fed: giod.Federation
    admin: str
    file: str  # a container file of dataset qcd
    checksum: str


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    path = tmp_path_factory.mktemp("semantics") / "fed"
    fed = giod.open(path, create=True)
    ds = fed.create_dataset("qcd", synthetic.schema())
    with ds.writer(database_events=100, cluster_events=50) as w:
        w.append(synthetic.events(200, seed=5))
    c = fed.catalog.databases("qcd")[0].containers[0]
    admin = fed.catalog.create_token("admin", note="semantics")[1]
    app = create_app(str(path))
    with ServerThread(app) as url:
        yield Site(url, app, fed, admin, c.path, c.checksum)
    fed.close()


# --------------------------------------------------------------------------- every route: 401 before 400


@dataclass(frozen=True)
class Malformed:
    """The request to one route with everything that can be wrong, wrong."""

    method: str
    target: str
    body: bytes | None
    validated: bool  # the route checks something here before its handler runs


def malformed(app: Any) -> list[Malformed]:
    out = []
    for ctx in iter_route_contexts(app.routes):
        route = ctx.original_route
        if not isinstance(route, APIRoute) or ctx.path in PUBLIC:
            continue
        dep = route.dependant
        target = ctx.path_format or ctx.path
        validated = route.body_field is not None
        for p in dep.path_params:
            numeric = p.field_info.annotation is int
            validated |= numeric
            value = "not-a-number" if numeric else ("qcd/none.bin" if p.name == "path" else "qcd")
            target = target.replace("{" + p.name + "}", value)
        query = []
        for p in dep.query_params:
            validated |= p.field_info.annotation not in (str, str | None)
            query.append(f"{p.alias}=%40%40")
        if query:
            target += "?" + "&".join(query)
        body = b'{"not json' if route.body_field is not None else None
        for method in sorted(route.methods):
            out.append(Malformed(method, target, body, validated))
    return out


def test_the_sweep_sees_every_route(site: Site) -> None:
    found = {(m.method, m.target.split("?")[0]) for m in malformed(site.app)}
    assert ("POST", "/api/v1/query") in found and ("PUT", "/api/v1/datasets/qcd/schema") in found
    assert sum(m.validated for m in malformed(site.app)) >= 15


@pytest.mark.parametrize("token", [None, "garbage", "giod_1_" + "A" * 43])
def test_unauthenticated_requests_get_401_before_any_validation(site: Site, token: str | None) -> None:
    wrong = []
    for m in malformed(site.app):
        a = call(site.url, m.method, m.target, token, m.body)
        if a.status != 401 or a.headers.get("www-authenticate") != "Bearer" or (
                m.method != "HEAD" and json.loads(a.body)["error"] != "AuthError"):
            wrong.append(f"{m.method} {m.target} -> {a.status} {a.body[:120]!r}")
    assert not wrong, "\n".join(wrong)


def test_anonymous_readers_get_401_on_what_they_may_not_do(site: Site) -> None:
    with ServerThread(create_app(site.fed, anonymous_read=True)) as url:
        for m in malformed(site.app):
            a = call(url, m.method, m.target, None, m.body)
            reads = m.method in ("GET", "HEAD") or m.target == "/api/v1/query"
            if not reads:
                assert a.status == 401, (m, a.status, a.body[:200])
            elif m.validated:
                assert a.status == 400, (m, a.status, a.body[:200])


def test_validation_failures_are_400_with_the_error_shape(site: Site) -> None:
    wrong = []
    for m in malformed(site.app):
        if not m.validated:
            continue
        a = call(site.url, m.method, m.target, site.admin, m.body)
        doc = json.loads(a.body) if a.body else {}
        if a.status != 400 or set(doc) != {"error", "message"} or doc["error"] != "DataError":
            wrong.append(f"{m.method} {m.target} -> {a.status} {a.body[:160]!r}")
    assert not wrong, "\n".join(wrong)


def test_validation_failure_raises_data_error_in_the_client(site: Site) -> None:
    remote = giod.open(site.url, token=site.admin)
    with pytest.raises(giod.DataError):
        remote.catalog.endpoint.json("POST", "/api/v1/datasets", {"name": "", "schema_id": 0})
    remote.close()


def test_the_spec_promises_400_and_401_never_422(site: Site) -> None:
    spec = json.loads(call(site.url, "GET", "/openapi.json").body)
    for path, item in spec["paths"].items():
        for method, op in item.items():
            assert "422" not in op["responses"], (method, path)
            assert {"400", "401"} <= set(op["responses"]), (method, path)
    assert "HTTPValidationError" not in spec["components"]["schemas"]
