"""``POST /api/v1/query`` with selections over objects, on a real server on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import awkward as ak
import numpy as np
import pyarrow as pa
import pytest

import giod
from giod.testing import synthetic
from tests.server.conftest import serve

EVENTS = 300


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    path: Path = tmp_path_factory.mktemp("objects") / "fed"
    with giod.open(path, create=True) as fed:
        ds = fed.create_dataset("qcd", synthetic.schema())
        with ds.writer(database_events=100, cluster_events=50) as w:
            w.append(synthetic.events(EVENTS, seed=17))
    yield from serve(path)


@pytest.fixture(scope="module")
def events():
    return synthetic.events(EVENTS, seed=17)


CUTS = [
    ("count(jets.pt > 40) >= 2 and ht > 100",
     lambda e: (ak.sum(e.jets.pt > 40, axis=1) >= 2) & (e.ht > 100)),
    ("any(abs(tracks.eta) < 1 and tracks.pt > 2)",
     lambda e: ak.any((abs(e.tracks.eta) < 1) & (e.tracks.pt > 2), axis=1)),
    ("jets.pt[0] > 60 or nhits < 50", lambda e: ak.fill_none(ak.firsts(e.jets.pt) > 60, False)
     | (ak.num(e.hits, axis=1) < 50)),
]


@pytest.mark.parametrize(("where", "reference"), CUTS, ids=[c[0] for c in CUTS])
def test_the_server_selects_on_objects(served, events, where, reference):
    expected = ak.to_numpy(events.event)[ak.to_numpy(reference(events))]
    assert 0 < len(expected) < EVENTS
    status, data = served.query(where=where, columns=["event", "jets.pt"])
    assert status == 200
    table = pa.ipc.open_stream(data).read_all()
    np.testing.assert_array_equal(table.column("event").to_numpy(), expected)
    remote = served.remote().dataset("qcd")
    np.testing.assert_array_equal(ak.to_numpy(remote.query(where, ["event"]).event), expected)


@pytest.mark.parametrize(("where", "says"), [
    ("count(jet.pt > 40) >= 2", "did you mean 'jets'?"),
    ("any(jets.eta2 > 1)", "did you mean 'eta'?"),
    ("nhit > 50", "did you mean 'nhits'"),
])
def test_a_misspelt_collection_or_field_is_a_400_with_suggestions(served, where, says):
    status, data = served.query(where=where, columns=["event"])
    assert status == 400
    answer = json.loads(data)
    assert answer["error"] == "ExpressionError" and says in answer["message"]
    with pytest.raises(giod.ExpressionError, match=says.replace("?", r"\?")):
        served.remote().dataset("qcd").query(where, ["event"])
