"""Shared fixtures: a fresh, empty catalog on each backend (SQLite and PostgreSQL).

``catalog_url`` is parametrised over both backends; ``catalog`` opens it. The
PostgreSQL parameter uses one throwaway database per test session and a fresh
schema per test. Without a server the PostgreSQL tests skip, except under
``CI=true``, where a missing server is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

PG_HOST = "127.0.0.1:5432"
PG_ADMIN_URL = f"postgresql://postgres@{PG_HOST}/postgres"


@contextmanager
def scripted_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A real HTTP server on loopback answering with ``handler`` (a scripted peer); its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _service_missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the service is required)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """URL of a PostgreSQL database created for this test session and dropped after it."""
    import psycopg

    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.Error:
        _service_missing(f"PostgreSQL not reachable at {PG_HOST}")
    name = f"giod_test_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"postgresql://postgres@{PG_HOST}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def xrootd_pair() -> Iterator[list[tuple[Any, Path]]]:
    """Two writable ``xrootd`` servers on loopback (third-party copies go between them), with CRC-32C
    checksums, and the directory each serves; skipped without ``xrootd``, except under ``CI=true``."""
    from giod_bench.xrootd import XRootDServer, missing

    reason = missing()
    if reason is not None:
        _service_missing(reason)
    # not under pytest's tmp_path: its parent is private to the user running the tests, not the server's
    dirs = [Path(tempfile.mkdtemp(prefix="giod-xrootd-site-")) for _ in range(2)]
    servers = []
    try:
        for d in dirs:
            d.chmod(0o777)
            servers.append(XRootDServer(d, writable=True))
            servers[-1].start()
        yield list(zip(servers, dirs, strict=True))
    finally:
        for server in servers:
            server.stop()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def xrootd_url(server: tuple[Any, Path]) -> str:
    """The ``root://`` URL of a fresh, empty directory on ``server`` (a pair from ``xrootd_pair``)."""
    xrd, directory = server
    name = uuid.uuid4().hex
    (directory / name).mkdir()
    (directory / name).chmod(0o777)
    return f"root://{xrd.host}:{xrd.port}//{name}"


def giod_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``giod ARGS`` run in this process (click's runner): its exit code, stdout and stderr.

    For tests about what a command does, not about its process: a fresh interpreter costs seconds
    of imports. An exception the command does not turn into its one line fails the test.
    """
    from click.testing import CliRunner

    from giod.cli import main

    done = CliRunner().invoke(main, list(args), prog_name="giod", catch_exceptions=False)
    return subprocess.CompletedProcess(["giod", *args], done.exit_code, done.stdout, done.stderr)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """URL of a fresh, empty catalog: a SQLite file, or a new PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'catalog.db'}"
    return fresh_postgres_schema(request)


def fresh_postgres_schema(request: pytest.FixtureRequest) -> str:
    """URL of a new, empty schema in the session's PostgreSQL database."""
    import psycopg

    base = request.getfixturevalue("postgres_database")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return f"{base}?options=-csearch_path%3D{schema}"


@pytest.fixture
def catalog(catalog_url: str) -> Iterator[Any]:
    """An open, empty ``giod.catalog.Catalog`` on each backend."""
    from giod.catalog import Catalog

    opened = Catalog.open(catalog_url)
    yield opened
    opened.close()


#: Session fixtures that take seconds to make (a simulation, an import of a CMS file, an npm install,
#: a browser, a Dask cluster, two xrootd servers), by the group of tests that share one. ``make test``
#: runs the tests in several processes (pytest-xdist, ``--dist loadgroup``): the tests of a group run
#: in one of them, which makes the fixture once instead of once in each.
SHARED_FIXTURES = {
    "client": "dask-cluster",
    "sim_root": "display",
    "nano_root": "display",
    "hzz_root": "display",
    "phoenix_build": "display",
    "browser": "display",
    "xrootd_pair": "xrootd",
}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        group = _shared_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def _shared_group(item: pytest.Item) -> str | None:
    """The group of a test that shares a costly fixture: a session one named above, or any fixture
    of module scope (the WAN benchmark's run, an RNTuple's import), whose module is then one group."""
    used = getattr(item, "fixturenames", ())
    group = next((g for f, g in SHARED_FIXTURES.items() if f in used), None)
    if group is None:
        info = getattr(item, "_fixtureinfo", None)  # pytest's own record of the fixtures a test uses
        defs = info.name2fixturedefs.values() if info is not None else ()
        if any(d and d[-1].scope == "module" for d in defs):
            group = item.nodeid.split("::", 1)[0]
    return group


def pytest_configure(config: pytest.Config) -> None:
    # `giod bench` is the benchmarks distribution's entry point; where it is not installed
    # (benchmarks/src is on pytest's pythonpath), the tests still reach it through `giod`,
    # and the benchmarks' child processes import it from the same place.
    import giod_bench
    from giod.cli import main, plugin_commands

    if "bench" not in plugin_commands():
        from giod_bench.cli import bench

        main.add_command(bench)
    here = str(Path(giod_bench.__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])
