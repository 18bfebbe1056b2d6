"""A model that breaks a bound is refused by a real server at once, in little memory."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import giod
from tests.schema.test_bounds import BOMB, _nested, model
from tests.server.test_abuse import Subprocess


def _post(url: str, token: str, text: str) -> tuple[int, dict]:
    body = json.dumps({"name": "m", "text": text, "fingerprint": "x"}).encode()
    request = urllib.request.Request(f"{url}/api/v1/schemas", data=body, method="POST",
                                     headers={"authorization": f"Bearer {token}",
                                              "content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) << 10
    raise AssertionError("no VmHWM")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far: the work it did, however loaded the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.timeout(120)
def test_alias_bomb_deep_nesting_and_huge_arrays_get_400_within_a_second(tmp_path: Path) -> None:
    path = tmp_path / "fed"
    with giod.open(path, create=True) as fed:
        token = fed.catalog.create_token("write", "anything", note="schema bounds")[1]
    server = Subprocess(path)
    try:
        status, _ = _post(server.url, token, model())  # a good model first: what serving one costs
        assert status == 200
        before = _peak_rss(server.proc.pid)
        for text, says in [(BOMB, "anchors and aliases"), (_nested("flow", 10_000), "nested deeper"),
                           (model("x: float32[1000000000][1000000000]"), "elements; at most")]:
            t0 = _cpu_seconds(server.proc.pid)
            status, answer = _post(server.url, token, text)
            elapsed = _cpu_seconds(server.proc.pid) - t0
            assert status == 400, answer
            assert answer["error"] == "SchemaError" and says in answer["message"]
            assert elapsed < 5.0, (says, elapsed)  # CPU: 0.25 s alone, ~1.5 s under load
        assert _peak_rss(server.proc.pid) - before < 32 << 20
        with giod.open(path) as fed:
            assert [fed.catalog.schema(1).name] == ["m"]  # only the good model was registered
            with pytest.raises(giod.errors.NotFound):
                fed.catalog.schema(2)
    finally:
        server.kill()
