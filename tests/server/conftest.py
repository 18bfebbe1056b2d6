"""A real giod server on loopback over a fresh federation, and tokens for it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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


def serve(path: Path, **options) -> Iterator[Served]:
    local = giod.open(path, create=True)
    with ServerThread(create_app(str(path), **options)) as url:
        yield Served(url, local, local.catalog.create_token("admin", note="tests")[1])
    local.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    yield from serve(tmp_path / "fed")
