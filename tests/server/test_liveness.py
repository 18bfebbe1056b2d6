"""What the server does per request: a liveness probe runs no catalog statement, a file request walks no
catalog route."""

from __future__ import annotations

import http.client
from pathlib import Path
from urllib.parse import urlsplit

from sqlalchemy import event

import giod
from giod.server.app import ServerThread, create_app


def _ask(url: str, method: str, path: str, times: int) -> list[int]:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    statuses = []
    try:
        for _ in range(times):
            conn.request(method, path)
            r = conn.getresponse()
            r.read()
            statuses.append(r.status)
    finally:
        conn.close()
    return statuses


def test_a_liveness_probe_runs_no_catalog_statement(tmp_path: Path) -> None:
    giod.open(tmp_path / "fed", create=True).close()
    app = create_app(str(tmp_path / "fed"), anonymous_read=True)
    engine = app.state.giod.federation.catalog._engine
    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:
        statements.append(statement)

    def checkout(dbapi_connection, record, proxy) -> None:
        statements.append("checkout")

    event.listen(engine, "before_cursor_execute", count)
    event.listen(engine, "checkout", checkout)
    try:
        with ServerThread(app) as url:
            assert _ask(url, "HEAD", "/healthz", 16) == [200] * 16
            assert statements == []
            assert _ask(url, "GET", "/healthz", 1) == [200]  # the version (kept while the file is unchanged)
            assert _ask(url, "GET", "/api/v1/datasets", 1) == [200]
            assert statements  # a catalog read is counted: the count above could have seen one
    finally:
        event.remove(engine, "before_cursor_execute", count)
        event.remove(engine, "checkout", checkout)


def test_a_file_request_is_matched_before_the_catalog_routes(tmp_path: Path) -> None:
    """Range requests are most of a server's requests: matching one does not walk the catalog's routes."""
    from starlette.routing import Match

    giod.open(tmp_path / "fed", create=True).close()
    app = create_app(str(tmp_path / "fed"))
    scope = {"type": "http", "path": "/files/local/d/db/raw.arrow", "method": "GET", "root_path": "",
             "headers": [], "query_string": b""}
    tried = []
    for route in app.router.routes:
        tried.append(route)
        if route.matches(scope)[0] is Match.FULL:
            break
    assert tried[-1].matches(scope)[0] is Match.FULL
    assert not any(c.startswith("/api/") for r in tried for c in _paths(r))


def _paths(route: object) -> list[str]:
    inner = getattr(route, "original_router", None)  # a router included whole (else its routes are flattened)
    if inner is not None:
        return [getattr(r, "path", "") for r in inner.routes]
    return [getattr(route, "path", "")]


def test_a_connection_that_sends_no_request_is_closed_like_an_idle_one(tmp_path: Path) -> None:
    """Clients open connections ahead; one never used is closed after the keep-alive time, not held for good."""
    import socket
    import threading

    import uvicorn

    from giod.server.streams import connection_protocol

    giod.open(tmp_path / "fed", create=True).close()
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(16)
    server = uvicorn.Server(uvicorn.Config(create_app(str(tmp_path / "fed")), log_level="warning",
                                           timeout_keep_alive=1, http=connection_protocol()))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    try:
        with socket.create_connection(listening.getsockname()) as idle:
            idle.settimeout(60)  # far beyond the keep-alive time: only a server that never closes reaches it
            assert idle.recv(1) == b""  # closed by the server, before any request
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listening.close()
