"""``POST /api/v1/query`` on a real server: bad limits."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pytest
from tests.server.conftest import serve

import giod
from giod.bench import synthetic

EVENTS = 400


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    path: Path = tmp_path_factory.mktemp("query") / "fed"
    with giod.open(path, create=True) as fed:
        ds = fed.create_dataset("qcd", synthetic.schema())
        with ds.writer(database_events=100, cluster_events=50) as w:
            w.append(synthetic.events(EVENTS, seed=8))
    yield from serve(path)


def _query(served, **body) -> tuple[int, bytes]:
    u = urlsplit(served.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("POST", "/api/v1/query", body=json.dumps({"dataset": "qcd", **body}).encode(),
                 headers={"content-type": "application/json", "authorization": f"Bearer {served.admin}"})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


@pytest.mark.parametrize("limit", [-1, 10**12, 2.5, "many"])
def test_a_bad_limit_is_refused(served, limit):
    status, data = _query(served, where="ht > 0", columns=["ht"], limit=limit)
    assert 400 <= status < 500 and json.loads(data)["error"] == "DataError"
    if isinstance(limit, int):
        with pytest.raises(giod.DataError, match="limit"):
            served.remote().dataset("qcd").query("ht > 0", ["ht"], limit=limit)


def test_a_limit_bounds_the_answer(served):
    for limit, rows in ((0, 0), (3, 3), (10**9, EVENTS)):
        status, data = _query(served, where="ht > -1", columns=["ht"], limit=limit)
        assert status == 200 and pa.ipc.open_stream(data).read_all().num_rows == rows
