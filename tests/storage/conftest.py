"""Fixtures of the conformance suites (``conformance.py``): the events written and a giod server to read through."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import giod
from giod.columns import to_tables
from giod.testing import synthetic
from tests.storage.conformance import N_EVENTS


@pytest.fixture(scope="session")
def reco() -> pa.Table:
    """The ``reco`` container of synthetic events: jets and tracks, with relations between them."""
    return to_tables(synthetic.events(N_EVENTS, seed=5), synthetic.schema(), ["reco"])["reco"]


@pytest.fixture(scope="session")
def _served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, str]]:
    """A giod server on loopback for the session: its URL, the directory of its site ``local``, an admin token."""
    from giod.server.app import ServerThread, create_app

    root = tmp_path_factory.mktemp("served")
    fed = giod.open(root, create=True)
    token = fed.catalog.create_token("admin", note="conformance")[1]
    fed.close()
    with ServerThread(create_app(str(root))) as url:
        yield url, root / "data", token


@pytest.fixture
def giod_server(_served: tuple[str, Path, str], monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """The session's giod server: its URL and the directory of its site ``local``; its admin token is in the
    environment for that site during the test only (a later test's site ``local`` is another server's)."""
    from giod.storage.http import site_token_env

    url, directory, token = _served
    monkeypatch.setenv(site_token_env("local"), token)
    return url, directory
