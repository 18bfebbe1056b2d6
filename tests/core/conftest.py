"""Fixtures for the federation core: a federation on each catalog backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import fresh_postgres_schema

import giod
from giod.testing import synthetic

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres), "remote"]


def _federation(request, where: Path):
    """A fresh federation on ``request.param``'s backend, in the empty directory ``where``."""
    if request.param == "sqlite":
        f = giod.open(where / "fed", create=True)
    elif request.param == "postgresql":
        f = giod.open(fresh_postgres_schema(request), create=True)
        f.add_site("local", str(where / "site"), 0)
    else:
        from tests.server.conftest import serve

        for served in serve(where / "served"):
            f = served.remote()
            yield f
            f.close()
        return
    yield f
    f.close()


@pytest.fixture(params=BACKENDS)
def fed(request, tmp_path: Path):
    """A fresh federation: embedded (SQLite directory), PostgreSQL catalog + local site, or the
    embedded one through a real giod server on loopback (the remote client)."""
    yield from _federation(request, tmp_path)


@pytest.fixture(scope="module", params=BACKENDS)
def module_fed(request, tmp_path_factory: pytest.TempPathFactory):
    """As ``fed``, made once per module: for tests that only read what a module's fixture wrote."""
    yield from _federation(request, tmp_path_factory.mktemp("module-fed"))


@pytest.fixture
def local_fed(tmp_path: Path):
    """An embedded federation only (for tests that are about files, not catalogs)."""
    f = giod.open(tmp_path / "fed", create=True)
    yield f
    f.close()


@pytest.fixture(scope="session")
def model():
    return synthetic.schema()

