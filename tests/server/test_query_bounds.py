"""Query answers of a real server on loopback: streamed in bounded server memory, read batch by batch
by the client, and bounded in rows.
"""

from __future__ import annotations

import http.client
import json
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import awkward as ak
import pyarrow as pa
import pytest

import giod
from giod.server.app import ServerThread, create_app
from giod.testing import synthetic


def _hostport(url: str) -> tuple[str, int]:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


def call(url: str, method: str, target: str, token: str | None = None, body: bytes | None = None,
         headers: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(*_hostport(url), timeout=timeout)
    try:
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        conn.request(method, target, body=body, headers=h)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


@dataclass
class Local:
    path: Path
    fed: giod.Federation
    admin: str


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Local]:
    fed = giod.open(tmp_path / "fed", create=True)
    ds = fed.create_dataset("qcd", synthetic.schema())
    with ds.writer(database_events=100, cluster_events=50) as w:
        w.append(synthetic.events(300, seed=11))
    yield Local(tmp_path / "fed", fed, fed.catalog.create_token("admin", note="bounds")[1])
    fed.close()


# --------------------------------------------------------------------------- query answers


class Server:
    """``giod serve`` in a process of its own, so that its memory can be measured alone."""

    def __init__(self, fed: Path):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from giod.cli import main; main()", "serve", "-f", str(fed), "--port", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in self.proc.stderr], daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=60)
            except queue.Empty:
                self.stop()
                raise RuntimeError("giod serve did not report its address") from None
            m = re.search(r"at (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.url = m.group(1)
                return

    def status(self, field: str) -> int:
        """A memory figure of the server process from /proc, in bytes."""
        text = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(re.search(rf"^{field}:\s+(\d+) kB", text, re.M).group(1)) * 1024  # type: ignore[union-attr]

    def reset_peak(self) -> None:
        Path(f"/proc/{self.proc.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS (Linux 4.0+)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.mark.timeout(600)
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc to measure memory")
def test_a_huge_limit_is_answered_in_bounded_server_memory(tmp_path: Path) -> None:
    """An answer of ~200 MB, asked with the largest limit, leaves the server's peak memory far below it."""
    path = tmp_path / "fed"
    n, per_db = 60_000, 1_000
    with giod.open(path, create=True) as fed:
        ds = fed.create_dataset("big", synthetic.schema())
        with ds.writer(database_events=per_db, cluster_events=per_db) as w:
            for first in range(0, n, 10_000):
                w.append(synthetic.events(10_000, seed=first, first_event=first, hits=200, cells=1, tracks=1,
                                          jets=1))
        token = fed.catalog.create_token("read", "big")[1]
        hits = int(ak.sum(ak.num(ds.read(["hits.layer"]).hits)))
    server = Server(path)
    try:
        # a first small query: what every query needs (imports, catalog, pools) is in place before measuring
        status, _, _ = call(server.url, "POST", "/api/v1/query", token, json.dumps(
            {"dataset": "big", "columns": ["hits"], "limit": 10}).encode(), {"Content-Type": "application/json"})
        assert status == 200
        before = server.status("VmRSS")
        server.reset_peak()
        conn = http.client.HTTPConnection(*_hostport(server.url), timeout=120)
        conn.request("POST", "/api/v1/query", body=json.dumps({"dataset": "big", "columns": ["hits"],
                                                                "limit": 10_000_000}).encode(),
                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200
        rows = batches = answer_bytes = 0
        reader = pa.ipc.open_stream(r)
        for batch in reader:  # read as it arrives, and let go
            rows += batch.num_rows
            batches += 1
            answer_bytes += batch.nbytes
        conn.close()
        growth = server.status("VmHWM") - before
    finally:
        server.stop()
    assert rows == n and batches >= n // per_db
    assert answer_bytes >= 17 * hits  # x, y, z, e (float32) and layer (uint8) of every hit
    assert growth < answer_bytes / 3, f"server peak grew {growth / 1e6:.0f} MB for a {answer_bytes / 1e6:.0f} MB answer"


def test_the_client_reads_an_answer_batch_by_batch(local: Local) -> None:
    with ServerThread(create_app(str(local.path))) as url:
        remote = giod.open(url, token=local.admin)
        parts = remote.catalog.query_batches("qcd", "ht > 0", ["ht", "jets.pt"])
        schema = next(parts)
        assert isinstance(schema, pa.Schema)
        got = list(parts)
        assert len(got) == 3  # one per database: nothing waited for the whole answer
        want = local.fed.dataset("qcd").select("ht > 0").read(["ht", "jets.pt"])
        assert ak.to_list(ak.from_arrow(pa.Table.from_batches(got, schema))) == ak.to_list(want)
        assert ak.to_list(remote.dataset("qcd").query("ht > 0", ["ht"], limit=150).ht) == ak.to_list(want.ht[:150])
        empty = remote.dataset("qcd").query("ht < 0", ["ht"])
        assert len(empty) == 0
        zero = remote.catalog.query("qcd", None, ["ht"], limit=0)
        assert zero.num_rows == 0 and zero.schema.names == ["ht"]
        remote.close()


def test_rows_per_answer_are_bounded(local: Local, monkeypatch: pytest.MonkeyPatch) -> None:
    from giod.server.routes import query

    with ServerThread(create_app(str(local.path))) as url:
        hdr = {"Content-Type": "application/json"}
        status, _, body = call(url, "POST", "/api/v1/query", local.admin, json.dumps(
            {"dataset": "qcd", "limit": 1_000_000_000}).encode(), hdr)
        assert status == 400 and json.loads(body)["error"] == "DataError"
        monkeypatch.setattr(query, "MAX_ROWS", 250)
        status, _, body = call(url, "POST", "/api/v1/query", local.admin, json.dumps(
            {"dataset": "qcd", "columns": ["ht"]}).encode(), hdr)
        assert status == 413 and json.loads(body)["error"] == "TooLarge"
        status, _, body = call(url, "POST", "/api/v1/query", local.admin, json.dumps(
            {"dataset": "qcd", "columns": ["ht"], "where": "ht > 0", "limit": 250}).encode(), hdr)
        assert status == 200 and pa.ipc.open_stream(body).read_all().num_rows == 250
        remote = giod.open(url, token=local.admin)
        with pytest.raises(giod.errors.TooLarge):
            remote.dataset("qcd").query(None, ["ht"])
        remote.close()
