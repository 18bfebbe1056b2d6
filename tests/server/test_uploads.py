"""Uploads to a real server on loopback: the bytes one token may hold uncommitted, and a disk slow to
take an upload, which must stall no other request.
"""

from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import giod
from giod.server.app import ServerThread, create_app
from giod.storage.checksum import checksum_bytes
from giod.storage.site import LocalPending
from giod.testing import synthetic
from tests.server.test_query_bounds import Local, _hostport, call, local  # noqa: F401 - local is a fixture


def put(url: str, token: str, path: str, data: bytes, *, chunked: bool = False) -> tuple[int, bytes]:
    headers = {"X-Giod-Checksum": checksum_bytes(data), "Content-Type": "application/octet-stream"}
    if chunked:  # no declared length: the server learns the size as the bytes arrive
        headers["Transfer-Encoding"] = "chunked"
        body: Any = iter([data[i : i + 8192] for i in range(0, len(data), 8192)])
        conn = http.client.HTTPConnection(*_hostport(url), timeout=30)
        try:
            conn.request("PUT", f"/files/local/{path}", body=body, headers=headers | {
                "Authorization": f"Bearer {token}"}, encode_chunked=True)
            r = conn.getresponse()
            return r.status, r.read()
        except (BrokenPipeError, ConnectionResetError):
            return 0, b""
        finally:
            conn.close()
    status, _, answer = call(url, "PUT", f"/files/local/{path}", token, data, headers)
    return status, answer


# --------------------------------------------------------------------------- the upload quota


def test_one_token_holds_at_most_its_quota_in_uncommitted_uploads(local: Local) -> None:
    quota, big, small = 1_000_000, 700_000, 400_000
    root = Path(local.fed.site("local").root)
    writer = local.fed.catalog.create_token("write", "qcd")[1]
    other = local.fed.catalog.create_token("write", "qcd")[1]
    with ServerThread(create_app(str(local.path), upload_quota=quota)) as url:
        assert put(url, writer, "qcd/up/a.bin", b"a" * big)[0] == 201
        # over the quota: refused, with its declared length before the body, or as the bytes arrive
        status, answer = put(url, writer, "qcd/up/b.bin", b"b" * small)
        assert status == 429 and json.loads(answer)["error"] == "QuotaExceeded"
        status, answer = put(url, writer, "qcd/up/c.bin", b"c" * small, chunked=True)
        assert status in (0, 429)  # 0: the server answered and closed while the client still sent
        assert sorted(p.name for p in (root / "qcd" / "up").iterdir()) == ["a.bin"]  # nothing else left
        # typed in the client
        remote = giod.open(url, token=writer)
        with pytest.raises(giod.errors.QuotaExceeded):
            remote.catalog.endpoint.request("PUT", "/files/local/qcd/up/d.bin", body=b"d" * small, ok=(201,),
                                            headers={"x-giod-checksum": checksum_bytes(b"d" * small)})
        # a quota per token: another one still may
        assert put(url, other, "qcd/up/e.bin", b"e" * small)[0] == 201
        # a file removed no longer counts
        assert call(url, "DELETE", "/files/local/qcd/up/a.bin", writer)[0] == 200
        assert put(url, writer, "qcd/up/b.bin", b"b" * small)[0] == 201
        # nor do files once committed: write a database through the server, then fill all but half of it
        before = {f.path for f in local.fed.site("local").walk()}
        with remote.dataset("qcd").writer(database_events=1_000) as w:
            w.append(synthetic.events(60, seed=12, first_event=300))
        committed = sum(f.size for f in local.fed.site("local").walk() if f.path not in before)
        assert 0 < committed < quota - small
        assert put(url, writer, "qcd/up/f.bin", b"f" * (quota - small - committed // 2))[0] == 201
        remote.close()


# --------------------------------------------------------------------------- a slow disk


class HeldDisk:
    """Holds the server inside one disk operation until released: a disk as slow as wanted.

    ``only(obj)`` picks the calls held (all of them by default).
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: type, operation: str, only: Any = None):
        self.entered, self.released = threading.Event(), threading.Event()
        original = getattr(owner, operation)

        def held(obj: Any, *args: Any, **kw: Any) -> Any:
            if only is None or only(obj):
                self.entered.set()
                if not self.released.wait(60):
                    raise OSError("the test never released the disk")
            return original(obj, *args, **kw)

        monkeypatch.setattr(owner, operation, held)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("operation", ["write", "_sync_and_close"])
def test_an_upload_held_by_the_disk_stalls_no_other_request(local: Local, monkeypatch: pytest.MonkeyPatch,
                                                             operation: str) -> None:
    """While an upload's write or fsync has not returned, a small GET is answered."""
    data = np.random.default_rng(3).bytes(3 << 20)
    with ServerThread(create_app(str(local.path))) as url:
        disk = HeldDisk(monkeypatch, LocalPending, operation)
        result: list[int] = []
        upload = threading.Thread(target=lambda: result.append(put(url, local.admin, "qcd/slow/x.bin", data)[0]))
        upload.start()
        try:
            assert disk.entered.wait(60), "the upload never reached the disk"
            status, _, body = call(url, "GET", "/api/v1/federation", local.admin, timeout=20)
            assert status == 200 and "qcd" in json.loads(body)["datasets"]
            assert not disk.released.is_set() and upload.is_alive()  # answered while the upload was held
        finally:
            disk.released.set()
            upload.join(60)
    assert result == [201]
    assert (Path(local.fed.site("local").root) / "qcd" / "slow" / "x.bin").read_bytes() == data


@pytest.mark.timeout(180)
def test_a_copy_held_by_the_disk_stalls_no_other_request(local: Local, monkeypatch: pytest.MonkeyPatch) -> None:
    """A third-party copy of a file already there looks at the disk first: meanwhile a GET is answered."""
    db = local.fed.catalog.databases("qcd")[0]
    c = db.containers[0]
    full = (Path(local.fed.site("local").root) / c.path).resolve()
    with ServerThread(create_app(str(local.path))) as url:
        disk = HeldDisk(monkeypatch, Path, "exists", only=lambda p: p == full)
        result: list[tuple[int, bytes]] = []
        headers = {"X-Giod-Source": f"{url}/files/local", "X-Giod-Size": str(c.size), "X-Giod-Checksum": c.checksum}
        copy = threading.Thread(target=lambda: result.append(
            call(url, "POST", f"/files/local/{c.path}", local.admin, headers=headers, timeout=60)[::2]))
        copy.start()
        try:
            assert disk.entered.wait(60), "the copy never looked at the disk"
            status, _, _ = call(url, "GET", "/api/v1/federation", local.admin, timeout=20)
            assert status == 200
            assert not disk.released.is_set() and copy.is_alive()
        finally:
            disk.released.set()
            copy.join(60)
    assert result[0][0] == 200 and json.loads(result[0][1].splitlines()[-1])["how"] == "adopted"
