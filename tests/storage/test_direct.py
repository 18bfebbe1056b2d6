"""Direct writes: files written past the page cache are published whole, exact, and only when asked."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod.errors import StorageError
from giod.storage import direct
from giod.storage.direct import ALIGN, BLOCK, DirectPending
from giod.storage.site import LocalSite, is_temporary


def _direct_site(root: Path) -> LocalSite:
    probe = root / ".probe"
    fd = direct.open_direct(probe)
    if fd is None:
        pytest.skip("this file system does not do direct I/O (O_DIRECT)")
    os.close(fd)
    probe.unlink()
    return LocalSite("disk", str(root))


sizes = st.lists(st.sampled_from([0, 1, ALIGN - 1, ALIGN, ALIGN + 1, 100_000, BLOCK - 1, BLOCK, BLOCK + 7]),
                 max_size=6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes)
def test_published_bytes_are_the_written_bytes(tmp_path: Path, pieces: list[int]):
    site = _direct_site(tmp_path)
    blocks = [os.urandom(n) for n in pieces]
    name = f"ds/{len(list(tmp_path.rglob('*')))}.parquet"
    pending = site.create(name, direct=True)
    assert isinstance(pending, DirectPending)
    for b in blocks:
        assert pending.write(memoryview(b) if len(b) % 2 else b) == len(b)
    pending.publish()
    assert (tmp_path / name).read_bytes() == b"".join(blocks)
    assert not [p for p in tmp_path.rglob("*") if is_temporary(p.name)]


def test_nothing_is_visible_before_publish_and_discard_leaves_nothing(tmp_path: Path):
    site = _direct_site(tmp_path)
    pending = site.create("ds/a.parquet", direct=True)
    pending.write(os.urandom(BLOCK + 10))  # one block already on the disk, under the temporary name
    assert not (tmp_path / "ds" / "a.parquet").exists()
    pending.discard()
    pending.discard()  # twice is fine
    assert list((tmp_path / "ds").iterdir()) == []
    with pytest.raises(StorageError, match="already published or discarded"):
        pending.publish()


def test_file_systems_without_direct_io_get_the_buffered_path(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(direct, "open_direct", lambda path: None)
    site = LocalSite("disk", str(tmp_path))
    pending = site.create("ds/b.parquet", direct=True)
    assert not isinstance(pending, DirectPending)
    pending.write(b"abc" * 5000)
    pending.publish()
    assert (tmp_path / "ds" / "b.parquet").read_bytes() == b"abc" * 5000


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="malloc thresholds are glibc's")
def test_servers_keep_freed_memory_on_glibc():
    code = "from giod.server.allocator import keep_freed_memory as k; print(k(), k(64 << 20, 1 << 20))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"]
