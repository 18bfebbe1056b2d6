"""Fixtures for the federation core: a federation on each catalog backend."""

from __future__ import annotations

from pathlib import Path

import pytest

import giod
from giod.bench import synthetic


@pytest.fixture
def fed(tmp_path: Path, catalog_url: str):
    """A fresh federation: embedded (SQLite directory) or PostgreSQL catalog + local site."""
    if catalog_url.startswith("sqlite"):
        f = giod.open(tmp_path / "fed")
    else:
        f = giod.open(catalog_url)
        f.add_site("local", str(tmp_path / "site"), 0)
    yield f
    f.close()


@pytest.fixture
def local_fed(tmp_path: Path):
    """An embedded federation only (for tests that are about files, not catalogs)."""
    f = giod.open(tmp_path / "fed")
    yield f
    f.close()


@pytest.fixture(scope="session")
def model():
    return synthetic.schema()
