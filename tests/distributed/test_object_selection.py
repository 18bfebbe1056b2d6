"""Selections over objects in giod.distributed.map_selection and giod.distributed.arrays, on every scheduler."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest

import giod.distributed
from giod.distributed.arrays import from_selection

from .conftest import DATASET

pytestmark = pytest.mark.filterwarnings("ignore:Running on a single-machine scheduler")

WHERE = "count(jets.pt > 40) >= 2 and ht > 100 or jets.pt[0] > 90 and ntracks > 10"


def _expected(fed: giod.Federation) -> np.ndarray:
    every = fed.dataset(DATASET).select().read(["jets.pt", "ht", "ntracks", "event"])
    lead = ak.fill_none(ak.firsts(every.jets.pt) > 90, False)
    passed = ((ak.sum(every.jets.pt > 40, axis=1) >= 2) & (every.ht > 100)) | (lead & (every.ntracks > 10))
    return ak.to_numpy(every.event)[ak.to_numpy(passed)]


def _events(chunk: ak.Array) -> np.ndarray:
    return chunk.event.to_numpy()


@pytest.fixture(params=["sync", "processes", "cluster"])
def scheduler(request: pytest.FixtureRequest):
    if request.param == "cluster":
        return request.getfixturevalue("client")
    return "processes:2" if request.param == "processes" else request.param


def test_map_selects_on_objects(fed: giod.Federation, scheduler) -> None:
    expected = _expected(fed)
    assert 0 < len(expected) < len(fed.dataset(DATASET))
    sel = fed.dataset(DATASET).select(WHERE)
    got = giod.distributed.map_selection(sel, _events, columns=["event"], scheduler=scheduler, partition_events=120,
                               reduce=lambda a, b: np.concatenate([a, b]))
    np.testing.assert_array_equal(got, expected)


def test_dask_array_of_an_object_selection(fed: giod.Federation) -> None:
    sel = fed.dataset(DATASET).select(WHERE)
    arr = from_selection(sel, ["event", "jets"])
    np.testing.assert_array_equal(ak.to_numpy(arr.event.compute(scheduler="sync")), _expected(fed))
