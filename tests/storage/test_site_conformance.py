"""Every site kind passes the same suite (``conformance.SiteTests``): a local directory, fsspec file systems
(memory, local), a giod server on loopback, and ``root://`` on a real ``xrootd``."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from giod.storage.remote import RemoteSite
from giod.storage.site import FsspecSite, LocalSite, Site, open_site
from giod_bench.xrootd import XRootDServer, missing
from tests.storage.conformance import SiteTests


class TestLocalDirectory(SiteTests):
    local = True

    @pytest.fixture
    def site(self, tmp_path: Path) -> Site:
        site = open_site("disk", str(tmp_path / "disk"))
        assert isinstance(site, LocalSite)
        (tmp_path / "disk").mkdir()
        return site


class TestFsspecMemory(SiteTests):
    @pytest.fixture
    def site(self) -> Site:
        site = open_site("mem", f"memory://conformance-{uuid.uuid4().hex}")
        assert isinstance(site, FsspecSite)
        return site


class TestFsspecLocal(SiteTests):
    """fsspec's local file system (``local://``), which, unlike memory, has folders to make."""

    @pytest.fixture
    def site(self, tmp_path: Path) -> Site:
        (tmp_path / "fs").mkdir()
        site = open_site("fslocal", f"local://{tmp_path / 'fs'}")
        assert isinstance(site, FsspecSite)
        return site


class TestGiodServer(SiteTests):
    networked = True
    checks_uploads = True
    replaces_on_publish = False

    @pytest.fixture
    def site(self, giod_server: tuple[str, Path]) -> Site:
        url, directory = giod_server
        site = open_site("local", f"{url}/files/local")
        assert isinstance(site, RemoteSite)
        yield site
        for f in list(site.walk()):  # the server is shared by the session: leave its site empty
            site.remove(f.path)


@pytest.fixture(scope="module")
def xrootd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[XRootDServer, Path]]:
    """A writable ``xrootd`` on loopback and the directory it serves (skipped without it, but under CI)."""
    reason = missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: XRootD is required)")
        pytest.skip(reason)
    # not under pytest's tmp_path: its parent is private to the user running the tests, not the server's
    directory = Path(tempfile.mkdtemp(prefix="giod-xrootd-site-"))
    directory.chmod(0o777)
    try:
        with XRootDServer(directory, writable=True) as server:
            yield server, directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class TestXRootD(SiteTests):
    """``root://``: an fsspec site through fsspec-xrootd, on a real ``xrootd``."""

    networked = False  # an fsspec kind declares nothing of its own

    @pytest.fixture
    def site(self, xrootd: tuple[XRootDServer, Path]) -> Site:
        server, directory = xrootd
        name = uuid.uuid4().hex
        (directory / name).mkdir(mode=0o777)
        (directory / name).chmod(0o777)
        site = open_site("xrd", f"root://{server.host}:{server.port}//{name}")
        assert isinstance(site, FsspecSite)
        return site
