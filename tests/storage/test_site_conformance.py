"""Every site kind passes the same suite (``conformance.SiteTests``): a local directory, fsspec file systems
(memory, local), a giod server on loopback, and ``root://`` on a real ``xrootd``."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from giod.storage.remote import RemoteSite
from giod.storage.site import FsspecSite, LocalSite, Site, open_site
from giod.storage.xrootd import XRootDSite
from giod_bench.xrootd import XRootDServer
from tests.conftest import xrootd_url
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


class TestXRootD(SiteTests):
    """``root://``: giod's XRootD kind on a real ``xrootd``."""

    networked = True
    checks_uploads = True

    @pytest.fixture
    def site(self, xrootd_pair: list[tuple[XRootDServer, Path]]) -> Site:
        site = open_site("xrd", xrootd_url(xrootd_pair[0]))
        assert isinstance(site, XRootDSite)
        return site


class TestFsspecXRootD(SiteTests):
    """The same server through fsspec-xrootd, as any fsspec file system (no abilities of its own)."""

    @pytest.fixture
    def site(self, xrootd_pair: list[tuple[XRootDServer, Path]]) -> Site:
        return FsspecSite("xrd", xrootd_url(xrootd_pair[0]))
