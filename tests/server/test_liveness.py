"""Liveness: ``HEAD /healthz`` answers without a catalog statement, so that a probe costs the server nothing."""

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
    app = create_app(str(tmp_path / "fed"))
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
            assert _ask(url, "GET", "/healthz", 1) == [200]  # the version it tells is the catalog's
            assert statements  # so the count above could have seen one
    finally:
        event.remove(engine, "before_cursor_execute", count)
        event.remove(engine, "checkout", checkout)
