"""Fixtures of the conformance suites (``conformance.py``): the events written and a giod server to read through."""

from __future__ import annotations

import os
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
def giod_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A giod server on loopback: its URL and the directory of its site ``local``; its admin token is in
    the environment for that site."""
    from giod.server.app import ServerThread, create_app
    from giod.storage.http import site_token_env

    root = tmp_path_factory.mktemp("served")
    fed = giod.open(root, create=True)
    token = fed.catalog.create_token("admin", note="conformance")[1]
    fed.close()
    variable = site_token_env("local")
    before = os.environ.get(variable)
    os.environ[variable] = token
    try:
        with ServerThread(create_app(str(root))) as url:
            yield url, root / "data"
    finally:
        if before is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = before
