"""The remote client against a real server: same answers as local, few requests, typed errors."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import awkward as ak
import numpy as np
import pyarrow as pa
import pytest

import giod
from giod.testing import synthetic


@pytest.fixture
def filled(served):
    ds = served.local.create_dataset("qcd", synthetic.schema())
    events = synthetic.events(1200, seed=5)
    with ds.writer(database_events=300, cluster_events=50) as w:
        w.append(events)
    return served, events


def _request(url: str, method: str, path: str, token: str | None = None, body: bytes | None = None,
             headers: dict | None = None) -> tuple[int, dict, bytes]:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    h = dict(headers or {})
    if token:
        h["authorization"] = f"Bearer {token}"
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def test_remote_read_equals_local_with_few_requests(filled):
    served, events = filled
    fed = served.remote()
    ds = fed.dataset("qcd")
    got = ds.read(["hits", "jets", "ht"])
    want = served.local.dataset("qcd").read(["hits", "jets", "ht"])
    assert ak.to_list(got) == ak.to_list(want)
    assert len(got) == len(events)
    n_containers = sum(1 for db in ds.databases() for c in db.containers if c.name in ("raw.tracker", "reco", "tag"))
    site = fed.site("local")
    # per container at most a footer, its batches' metadata and its columns' buffers, never a round trip
    # per page or per buffer
    assert site.endpoint.requests <= 3 * n_containers + 12
    assert site.scheduler.stats["bytes"] > 0


def test_selection_and_event_through_the_server(filled):
    served, events = filled
    ds = served.remote().dataset("qcd")
    local = served.local.dataset("qcd")
    for expr in ("ht > 300", "njets >= 2 and lead_pt > 50"):
        np.testing.assert_array_equal(ds.select(expr).entries(), local.select(expr).entries())
        assert ak.to_list(ds.select(expr).read(["jets.pt"])) == ak.to_list(local.select(expr).read(["jets.pt"]))
    assert ak.to_list(ds.event(777)) == ak.to_list(local.event(777))


def test_server_side_query_and_shared_cache(filled):
    served, _ = filled
    ds = served.remote().dataset("qcd")
    want = served.local.dataset("qcd").select("ht > 250").read(["ht", "jets.pt"])[:100]
    got = ds.query("ht > 250", ["ht", "jets.pt"], limit=100)
    assert ak.to_list(got.ht) == ak.to_list(want.ht)
    assert ak.to_list(got.jets.pt) == ak.to_list(want.jets.pt)
    body = json.dumps({"dataset": "qcd", "where": "ht > 250", "columns": ["ht"], "limit": 10}).encode()
    hdr = {"content-type": "application/json"}
    s1, h1, d1 = _request(served.url, "POST", "/api/v1/query", served.admin, body, hdr)
    s2, h2, d2 = _request(served.url, "POST", "/api/v1/query", served.token("read"), body, hdr)
    assert (s1, s2) == (200, 200)
    assert h1["x-giod-cache"] == "miss" and h2["x-giod-cache"] == "hit"  # another user, same answer
    assert d1 == d2
    assert pa.ipc.open_stream(d1).read_all().num_rows == 10
    _, _, metrics = _request(served.url, "GET", "/metrics", served.admin)
    assert b"giod_query_cache_hits_total 1" in metrics


def test_head_gives_checksum_etag_and_bounds(filled):
    served, _ = filled
    db = served.local.dataset("qcd").databases()[0]
    c = db.container("tag")
    status, headers, _ = _request(served.url, "HEAD", f"/files/local/{c.path}", served.admin)
    assert status == 200
    assert headers["etag"] == f'"{c.checksum}"'
    assert int(headers["content-length"]) == c.size
    assert int(headers["x-giod-max-ranges"]) > 0
    assert headers["content-type"] == "application/vnd.apache.arrow.file"  # the default container format
    status, headers, data = _request(served.url, "GET", f"/files/local/{c.path}", served.admin,
                                     headers={"range": "bytes=0-5,-6"})
    assert status == 206 and headers["content-type"].startswith("multipart/byteranges")
    assert data.count(b"ARROW1") == 2 and b"application/vnd.apache.arrow.file" in data


def test_upload_is_published_only_with_its_checksum(filled):
    served, _ = filled
    token = served.token("write", "qcd")
    path = "/files/local/qcd/upload-test/x.parquet"
    bad = {"x-giod-checksum": "crc32c:00000000", "content-type": "application/octet-stream"}
    status, _, _ = _request(served.url, "PUT", path, token, b"hello world", bad)
    assert status == 422
    assert not (served.local.root / "data" / "qcd" / "upload-test" / "x.parquet").exists()
    from giod.storage.checksum import checksum_bytes

    good = bad | {"x-giod-checksum": checksum_bytes(b"hello world")}
    assert _request(served.url, "PUT", path, token, b"hello world", good)[0] == 201
    assert _request(served.url, "PUT", path, token, b"hello world", good)[0] == 201  # a retry lands once
    other = bad | {"x-giod-checksum": checksum_bytes(b"other bytes")}
    assert _request(served.url, "PUT", path, token, b"other bytes", other)[0] == 409  # never overwritten
    assert (served.local.root / "data" / "qcd" / "upload-test" / "x.parquet").read_bytes() == b"hello world"


def test_tokens_are_enforced_through_the_client(filled):
    served, _ = filled
    with pytest.raises(giod.AuthError):
        giod.open(served.url, token="giod_1_not-a-real-secret-at-all-000000000")
    other = served.token("read", "elsewhere")
    fed = giod.open(served.url, token=other)
    with pytest.raises(giod.errors.NotFound):  # a dataset the token may not see is one that does not exist
        fed.dataset("qcd").read(["ht"])
    reader = served.remote(served.token("read", "qcd"))
    with pytest.raises(giod.errors.Forbidden):
        reader.create_dataset("new", synthetic.schema())
    assert len(reader.dataset("qcd")) == 1200


def test_missing_dataset_is_not_found(filled):
    served, _ = filled
    remote = served.remote()
    with pytest.raises(giod.NotFound):
        remote.dataset("nope")
    for name in ("a/b", "../qcd", "qcd/..", "%2e%2e"):  # off the name grammar: no route, the same words
        with pytest.raises(giod.NotFound, match="no dataset named"):
            remote.dataset(name)


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_sparse_selection_uses_multi_range_requests(filled, monkeypatch, fmt):
    served, events = filled
    from giod.read import selection
    from giod.storage import remote

    monkeypatch.setattr(selection, "AT_SOURCE_SHARE", 0.0)  # read from the files, not at the source
    name = f"qcd_{fmt}"
    with served.local.create_dataset(name, synthetic.schema()).writer(
            database_events=300, cluster_events=50, container_format=fmt) as w:
        w.append(events)
    batches: list[int] = []
    real = remote.RemoteSite._fetch_multi

    def spy(self, path, ranges):
        batches.append(len(ranges))
        return real(self, path, ranges)

    monkeypatch.setattr(remote.RemoteSite, "_fetch_multi", spy)
    ht = ak.to_numpy(events.ht)
    cut = float(np.quantile(ht, 0.97))
    local = served.local.dataset(name).select(f"ht > {cut}")
    fed = served.remote()
    sel = fed.dataset(name).select(f"ht > {cut}")
    assert 10 < len(sel) < 100
    before = fed.site("local").endpoint.requests
    got = sel.read(["hits", "jets"])
    assert ak.to_list(got) == ak.to_list(local.read(["hits", "jets"]))
    site = fed.site("local")
    sparse = sum(1 for db, s in sel._plan if s is not None and len(s) < db.n_events)
    assert sparse > 0
    if fmt == "parquet":
        assert batches and max(batches) > 1  # pages travelled several to a request
        # a few requests per container read, not one per page
        assert site.endpoint.requests - before <= 6 * sparse * 2 + 10
    else:
        # per container read: its footer, then its selected record batches, neighbours in one range
        assert site.endpoint.requests - before <= 2 * sparse * (1 + 300 // 50) + 10


def test_multipart_parsing_takes_lengths_from_content_range():
    from giod.storage.multipart import parse_multipart

    payload = b"--b\r\n--b\r\n"  # a part that contains the boundary itself
    body = (b"--b\r\nContent-Type: x\r\nContent-Range: bytes 5-14/100\r\n\r\n" + payload +
            b"\r\n--b\r\nContent-Range: bytes 50-52/100\r\n\r\nxyz\r\n--b--\r\n")
    assert parse_multipart(body, "b") == {5: payload, 50: b"xyz"}


def test_client_stays_within_smaller_server_bounds(tmp_path):
    from giod.storage.remote import Limits
    from tests.server.conftest import serve

    for served in serve(tmp_path / "small", limits=Limits(max_ranges=3, max_request_bytes=256 << 10)):
        ds = served.local.create_dataset("qcd", synthetic.schema())
        events = synthetic.events(600, seed=3)
        with ds.writer(database_events=300, cluster_events=50) as w:
            w.append(events)
        fed = served.remote()
        site = fed.site("local")
        assert site.endpoint.limits.max_request_bytes == 256 << 10
        assert site.scheduler.piece <= 256 << 10
        assert ak.to_list(fed.dataset("qcd").read(["hits"])) == ak.to_list(ds.read(["hits"]))
        cut = float(np.quantile(ak.to_numpy(events.ht), 0.95))
        assert ak.to_list(fed.dataset("qcd").select(f"ht > {cut}").read(["hits"])) == ak.to_list(
            ds.select(f"ht > {cut}").read(["hits"]))
