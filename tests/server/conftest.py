"""A real giod server on loopback over a fresh federation, and tokens for it."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import giod
from giod.server.app import ServerThread, create_app


@dataclass
class Served:
    url: str
    local: giod.Federation  # the server's own federation, opened directly
    admin: str  # an unrestricted admin token

    def token(self, scope: str, dataset: str | None = None, **kw) -> str:
        return self.local.catalog.create_token(scope, dataset, **kw)[1]

    def remote(self, token: str | None = None) -> giod.Federation:
        return giod.open(self.url, token=self.admin if token is None else token)

    def query(self, **body) -> tuple[int, bytes]:
        """Status and body of ``POST /api/v1/query`` on dataset qcd (unless named), as the admin."""
        u = urlsplit(self.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        try:
            conn.request("POST", "/api/v1/query", body=json.dumps({"dataset": "qcd", **body}).encode(),
                         headers={"content-type": "application/json", "authorization": f"Bearer {self.admin}"})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()


def serve(path: Path, **options) -> Iterator[Served]:
    local = giod.open(path, create=True)
    with ServerThread(create_app(str(path), **options)) as url:
        yield Served(url, local, local.catalog.create_token("admin", note="tests")[1])
    local.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    yield from serve(tmp_path / "fed")
