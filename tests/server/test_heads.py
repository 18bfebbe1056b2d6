"""``POST /files/{site}``: the footers and batch metadata of many Arrow files in one answer.

The answer holds what ``GET …?buffers=no`` answers for each file, the caller's rights hold for every file
(a file of a dataset it may not see is "not found", as its GET would be), bad requests are 4xx, and the
client takes an answer apart checking every length and range before it believes it (fuzzed: a crafted
answer is an IntegrityError).
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod.errors import IntegrityError
from giod.storage.multipart import parse_multipart
from giod.storage.remote import HEADS_CONTENT_TYPE, _heads_answer
from giod.testing import synthetic
from tests.server.conftest import Served, serve


def _post(url: str, site: str, paths: Any, token: str | None) -> tuple[int, dict[str, str], bytes]:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    headers = {"content-type": "application/json"} | ({"authorization": f"Bearer {token}"} if token else {})
    try:
        conn.request("POST", f"/files/{site}", body=json.dumps({"paths": paths}).encode(), headers=headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def _heads_get(url: str, path: str, size: int, token: str) -> dict[int, bytes]:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request("GET", f"/files/local/{path}?buffers=no", headers={
            "authorization": f"Bearer {token}", "range": f"bytes={max(0, size - (64 << 10))}-{size - 1}"})
        r = conn.getresponse()
        kind, body = r.getheader("content-type", ""), r.read()
        if kind.startswith("multipart/byteranges"):
            return {a: bytes(d) for a, d in parse_multipart(body, kind.split("boundary=", 1)[-1]).items()}
        return {int(r.getheader("content-range", "").split()[1].split("-")[0]): body}
    finally:
        conn.close()


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Any:
    for served in serve(tmp_path_factory.mktemp("heads") / "fed"):
        for name, fmt in (("a", "arrow"), ("b", "parquet")):
            ds = served.local.create_dataset(name, synthetic.schema(), container_format=fmt)
            with ds.writer(database_events=300, cluster_events=100) as w:
                w.append(synthetic.events(600, seed=7))
        yield served


def _files(served: Served, dataset: str) -> list[tuple[str, int]]:
    out = []
    for db in served.local.dataset(dataset).databases():
        rec = db.container("raw.tracker")
        assert rec is not None
        out.append((rec.path, rec.size))
    return out


def test_heads_of_many_files_are_what_each_files_planned_answer_holds(two: Served) -> None:
    arrow, parquet = _files(two, "a"), _files(two, "b")
    items = [*arrow, ("a/missing.arrow", 10), parquet[0]]
    status, headers, body = _post(two.url, "local", [p for p, _ in items], two.admin)
    assert status == 200 and headers["content-type"] == HEADS_CONTENT_TYPE

    class Answer:
        data = body
        headers = {"content-type": HEADS_CONTENT_TYPE}

    got = _heads_answer(Answer(), items, "local")
    n = int.from_bytes(body[:4], "big")
    index = json.loads(body[4:4 + n])["files"]
    assert [e.get("error") for e in index] == [None] * len(arrow) + ["NotFound", "Unplanned"]
    assert got[-2:] == [None, None]
    for (path, size), held in zip(arrow, got, strict=False):
        assert held is not None
        assert {a: bytes(d) for a, d in held} == _heads_get(two.url, path, size, two.admin)
    # a size other than the one the client knows: that file is not used
    assert _heads_answer(Answer(), [(arrow[0][0], arrow[0][1] + 1), *items[1:]], "local")[0] is None


def test_heads_keep_every_files_rights_and_refuse_bad_requests(two: Served) -> None:
    arrow = [p for p, _ in _files(two, "a")]
    only_b = two.token("read", "b")
    status, _, body = _post(two.url, "local", arrow, only_b)
    # a file of a dataset it may not see: not found, as a GET of the file would be, and none of its bytes
    assert status == 404 and b"ARROW1" not in body
    assert _post(two.url, "local", [p.replace("a/", "b/", 1) for p in arrow], only_b)[0] == 200
    assert _post(two.url, "local", arrow, None)[0] == 401
    for bad in (["../a/x.arrow"], ["a/\x00.arrow"], []):
        assert _post(two.url, "local", bad, two.admin)[0] in (400, 422)
    assert _post(two.url, "local", arrow * 200, two.admin)[0] in (400, 422)  # beyond the files a request names
    assert _post(two.url, "nope", arrow, two.admin)[0] == 404


@st.composite
def _answers(draw: st.DrawFn) -> tuple[bytes, list[tuple[str, int]]]:
    items = [(f"d/{i}.arrow", draw(st.integers(0, 200))) for i in range(draw(st.integers(1, 3)))]
    entries, data = [], b""
    for path, size in items:
        if draw(st.booleans()):
            entries.append({"path": path, "error": "NotFound"})
            continue
        parts = draw(st.lists(st.tuples(st.integers(0, size), st.integers(0, 50)), max_size=3))
        entries.append({"path": path, "size": size, "parts": [[a, n] for a, n in parts]})
        data += draw(st.binary(min_size=sum(n for _, n in parts), max_size=sum(n for _, n in parts)))
    text = json.dumps({"files": entries}).encode()
    body = bytearray(len(text).to_bytes(4, "big") + text + data)
    for _ in range(draw(st.integers(0, 3))):  # crafted: bytes changed, cut or added anywhere
        how = draw(st.sampled_from(["flip", "cut", "add"]))
        at = draw(st.integers(0, max(0, len(body) - 1)))
        if how == "flip" and body:
            body[at] = draw(st.integers(0, 255))
        elif how == "cut":
            del body[at:]
        else:
            body[at:at] = draw(st.binary(min_size=1, max_size=8))
    return bytes(body), items


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_answers())
def test_a_crafted_heads_answer_is_an_integrity_error_or_parts_within_each_file(case) -> None:
    body, items = case

    class Answer:
        data = body
        headers = {"content-type": HEADS_CONTENT_TYPE}

    try:
        got = _heads_answer(Answer(), items, "far")
    except IntegrityError:
        return
    assert len(got) == len(items)
    for (_, size), held in zip(items, got, strict=True):
        for a, d in held or []:
            assert 0 <= a and a + len(d) <= size


def test_a_heads_answer_of_another_type_is_refused(tmp_path: Path) -> None:
    class Answer:
        data = b"\0\0\0\x02{}"
        headers = {"content-type": "text/html"}

    with pytest.raises(IntegrityError):
        _heads_answer(Answer(), [("d/x.arrow", 10)], "far")
