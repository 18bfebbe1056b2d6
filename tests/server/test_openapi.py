"""Schemathesis against the server's own OpenAPI spec, with an admin token: no request gets a 5xx.

Every operation gets valid requests (positive) and, where the spec leaves
room, invalid ones (negative): malformed bodies, wrong types, out-of-range
numbers, odd strings in paths. Examples are derandomised so that a run is
repeatable, and few, to keep the run to seconds.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable

from giod.testing import synthetic
from tests.server.conftest import Served, serve

schemathesis = pytest.importorskip("schemathesis")

EXAMPLES = {"positive": 12, "negative": 6}
# paths are where the server meets the file system: those routes get more examples
FILE_EXAMPLES = {"positive": 25, "negative": 10}


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("openapi")
    for s in serve(base / "fed"):
        ds = s.local.create_dataset("qcd", synthetic.schema())
        with ds.writer(database_events=50, cluster_events=25) as w:
            w.append(synthetic.events(100, seed=6))
        yield s


def test_spec_loads_and_lists_every_router(populated: Served) -> None:
    schema = schemathesis.openapi.from_url(populated.url + "/openapi.json")
    labels = {r.ok().label for r in schema.get_all_operations()}
    assert {"GET /files/{site}/{path}", "POST /api/v1/commit", "POST /api/v1/query", "GET /metrics"} <= labels


@pytest.mark.slow  # schemathesis over every route
@pytest.mark.timeout(240)
def test_no_server_errors(populated: Served) -> None:
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_url(populated.url + "/openapi.json")
    auth = {"authorization": f"Bearer {populated.admin}"}
    errors: dict[tuple[str, int], str] = {}
    sent = 0
    for result in schema.get_all_operations():
        op = result.ok()
        if op.path == "/api/v1/feed":
            continue  # an endless event stream; tests/exchange/test_follow.py checks it
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            budget = FILE_EXAMPLES if op.path.startswith("/files/") else EXAMPLES

            @settings(max_examples=budget[mode.value], deadline=None, database=None, derandomize=True,
                      phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
            @given(case=op.as_strategy(generation_mode=mode))
            def run(case: object) -> None:
                nonlocal sent
                sent += 1
                r = case.call(base_url=populated.url, headers=auth, timeout=30)  # type: ignore[attr-defined]
                if r.status_code >= 500:
                    errors.setdefault((op.label, r.status_code), f"{r.text[:300]}\n  {case.as_curl_command()}")  # type: ignore[attr-defined]

            try:
                run()
            except Unsatisfiable:
                continue  # nothing invalid can be said to this operation (no parameters, no body)
    assert sent > 200
    assert not errors, "\n".join(f"{label} -> {status}: {what}" for (label, status), what in errors.items())
    # and the server is still whole afterwards
    assert len(populated.local.dataset("qcd").read(["ht"])) == 100
