"""``POST /api/v1/query`` on a real server: constant selections, bad expressions and bad limits."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import giod
from giod.server.routes.query import MAX_ROWS
from giod.testing import synthetic
from tests.server.conftest import serve

EVENTS = 400


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    path: Path = tmp_path_factory.mktemp("query") / "fed"
    with giod.open(path, create=True) as fed:
        ds = fed.create_dataset("qcd", synthetic.schema())
        with ds.writer(database_events=100, cluster_events=50) as w:
            w.append(synthetic.events(EVENTS, seed=8))
        fed.create_dataset("fresh", synthetic.schema())
    yield from serve(path)


@pytest.mark.parametrize("where", ["false", "1 > 2", "not true", "njets > 1 and false"])
def test_a_false_selection_answers_no_events(served, where):
    status, data = served.query(where=where, columns=["ht", "njets"])
    assert status == 200
    table = pa.ipc.open_stream(data).read_all()
    assert table.num_rows == 0 and table.column_names == ["ht", "njets"]
    remote = served.remote().dataset("qcd")
    assert len(remote.query(where, ["ht"])) == 0
    assert len(remote.select(where)) == 0  # the client's own selection over the remote catalog


@pytest.mark.parametrize("where", ["true", "not false", "2 > 1"])
def test_a_true_selection_answers_every_event(served, where):
    status, data = served.query(where=where, columns=["ht"])
    assert status == 200 and pa.ipc.open_stream(data).read_all().num_rows == EVENTS


def test_a_constant_zero_divisor_is_a_400(served):
    status, data = served.query(where="1 % 0 == 0", columns=["ht"])
    assert status == 400
    answer = json.loads(data)
    assert answer["error"] == "ExpressionError" and "by zero" in answer["message"]
    with pytest.raises(giod.ExpressionError, match="by zero"):
        served.remote().dataset("qcd").query("1 % 0 == 0", ["ht"])


@pytest.mark.parametrize("limit", [-1, 10**12, 2.5, "many"])
def test_a_bad_limit_is_refused(served, limit):
    status, data = served.query(where="ht > 0", columns=["ht"], limit=limit)
    assert 400 <= status < 500 and json.loads(data)["error"] == "DataError"
    if isinstance(limit, int):
        with pytest.raises(giod.DataError, match="limit"):
            served.remote().dataset("qcd").query("ht > 0", ["ht"], limit=limit)


def test_an_empty_dataset_answers_its_fields(served):
    status, data = served.query(dataset="fresh", columns=["ht", "jets.pt"])
    table = pa.ipc.open_stream(data).read_all()
    assert status == 200 and table.num_rows == 0 and table.column_names == ["ht", "jets"]
    got = served.remote().dataset("fresh").read(["ht", "jets.pt"])
    assert len(got) == 0 and got.fields == ["ht", "jets"]


def test_a_limit_bounds_the_answer(served):
    for limit, rows in ((0, 0), (3, 3), (MAX_ROWS, EVENTS)):
        status, data = served.query(where="ht > -1", columns=["ht"], limit=limit)
        assert status == 200 and pa.ipc.open_stream(data).read_all().num_rows == rows
