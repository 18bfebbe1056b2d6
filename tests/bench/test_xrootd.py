"""The XRootD peer: a real ``xrootd`` on loopback serving a ROOT file written with uproot.

Skips without the xrootd server or its Python client, except under
``CI=true``, where they are required.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path

import awkward as ak
import numpy as np
import pytest

from giod.errors import ConfigError
from giod.testing.netlab import LatencyProxy
from giod_bench.xrootd import XRootDServer, missing, read_branch


@pytest.fixture(scope="module")
def export():
    """A directory the server's unprivileged user can read, holding events.root."""
    reason = missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: XRootD is required)")
        pytest.skip(reason)
    # not under pytest's tmp_path: its parent directory is private to the user running the tests
    directory = Path(tempfile.mkdtemp(prefix="giod-xrootd-test-"))
    directory.chmod(0o755)
    try:
        import uproot

        rng = np.random.default_rng(7)
        counts = rng.integers(0, 6, size=2000)
        with uproot.recreate(directory / "events.root") as f:
            f["events"] = {
                "njets": counts.astype(np.int32),
                "ht": rng.exponential(200.0, size=2000),
                "jet_pt": ak.unflatten(rng.exponential(50.0, size=int(counts.sum())), counts),
            }
        (directory / "events.root").chmod(0o644)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def server(export):
    with XRootDServer(export) as xrd:
        yield xrd


@pytest.mark.parametrize("branch", ["ht", "jet_pt"])
def test_read_branch_through_xrootd_equals_local_read(server: XRootDServer, export: Path, branch):
    url = server.url(export / "events.root")
    assert url == server.url("events.root") == f"root://127.0.0.1:{server.port}//events.root"
    remote = read_branch(url, "events", branch)
    local = read_branch(str(export / "events.root"), "events", branch)
    assert len(remote) == 2000
    assert ak.all(ak.flatten(remote == local, axis=None))
    assert ak.to_list(remote) == ak.to_list(local)


def test_read_through_the_latency_proxy(server: XRootDServer, export: Path):
    """What the wan benchmark does: root:// to the proxy's port, which forwards to xrootd."""
    with LatencyProxy(("127.0.0.1", server.port), rtt=0.02) as proxy:
        url = f"root://127.0.0.1:{proxy.port}//events.root"
        remote = read_branch(url, "events", "ht", library="np")
        assert proxy.stats.bytes_down > remote.nbytes  # it did go through the proxy
    np.testing.assert_array_equal(remote, read_branch(str(export / "events.root"), "events", "ht", library="np"))


def test_server_stops_and_frees_its_port(export: Path):
    with XRootDServer(export) as xrd:
        port = xrd.port
        log = xrd.log
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        assert log.exists()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    assert not log.exists(), "the server's working directory is removed"


def test_url_outside_the_export_is_refused(server: XRootDServer, export: Path):
    with pytest.raises(ConfigError, match="not under"):
        server.url(export.parent / "elsewhere.root")
    with pytest.raises(ConfigError, match="not under"):
        server.url("../elsewhere.root")


def test_the_server_is_read_only_and_confined(server: XRootDServer, export: Path, tmp_path: Path):
    from XRootD import client

    fs = client.FileSystem(f"root://127.0.0.1:{server.port}")
    status, listing = fs.dirlist("/")
    assert status.ok, status.message
    assert [e.name for e in listing] == ["events.root"]
    status, _ = fs.mkdir("/new")
    assert not status.ok
    with client.File() as f:
        status, _ = f.open(f"root://127.0.0.1:{server.port}//../etc/passwd")
        assert not status.ok


@pytest.mark.skipif(os.geteuid() != 0, reason="only root starts xrootd as another user")
def test_directory_the_server_cannot_read_is_a_config_error(export: Path):
    private = Path(tempfile.mkdtemp(prefix="giod-xrootd-private-"))  # mode 0700
    try:
        with pytest.raises(ConfigError, match="chmod o\\+rx"):
            with XRootDServer(private):
                pass
    finally:
        private.rmdir()
