"""giod.distributed.arrays.from_selection (also giod.dask): a dask-awkward array with column projection."""

from __future__ import annotations

import awkward as ak
import dask
import dask_awkward as dak
import pytest

import giod
import giod.distributed.tasks
from giod.distributed.arrays import from_selection

from .conftest import DATABASES, DATASET

# the session's Dask client is active; these tests choose the synchronous scheduler on purpose
pytestmark = pytest.mark.filterwarnings("ignore:Running on a single-machine scheduler")


def test_one_partition_per_database_and_the_same_events(fed: giod.Federation) -> None:
    sel = fed.dataset(DATASET).select("njets >= 2")
    arr = from_selection(sel, ["jets", "ht", "event"])
    assert arr.npartitions == len(DATABASES)
    assert arr.fields == ["jets", "ht", "event"]
    serial = sel.read(["jets", "ht", "event"])
    assert ak.array_equal(arr.event.compute(scheduler="sync"), serial.event)
    assert ak.array_equal(arr.jets.tracks_index.compute(scheduler="sync"), serial.jets.tracks_index)


def test_only_the_columns_a_computation_touches_are_read(fed: giod.Federation, monkeypatch) -> None:
    sel = fed.dataset(DATASET).select("njets >= 2")
    arr = from_selection(sel, ["jets", "tracks", "ht"])
    doubled = arr.jets.pt * 2
    assert set(dak.report_necessary_columns(doubled).values()) == {frozenset({"jets.pt"})}

    read: list[dict[str, list[str]]] = []
    real = giod.distributed.tasks.read_database

    def recording(dataset, db, proj, local):  # the real reader, noting what it was asked for
        read.append({c: list(p) for c, p in proj.columns.items()})
        return real(dataset, db, proj, local)

    monkeypatch.setattr(giod.distributed.tasks, "read_database", recording)
    got = doubled.compute(scheduler="sync")
    assert ak.array_equal(got, sel.read(["jets.pt"]).jets.pt * 2)
    # per partition: the tags of the expression, then jets.pt alone (no tracks, no other jet field)
    assert read and all(r in ({"tag": ["njets"]}, {"reco": ["jets.list.element.pt"]}) for r in read)
    assert {"reco": ["jets.list.element.pt"]} in read


def test_projection_on_a_dask_cluster(fed: giod.Federation, client) -> None:
    sel = fed.dataset(DATASET).select()
    arr = from_selection(sel, ["jets", "ht"])
    total_ht, njets = dask.compute(ak.sum(arr.ht), ak.num(arr.jets, axis=1), scheduler=client)
    serial = sel.read(["jets", "ht"])
    assert total_ht == pytest.approx(float(ak.sum(serial.ht)))
    assert ak.array_equal(njets, ak.num(serial.jets, axis=1))


def test_coffea_style_processor_example(fed: giod.Federation) -> None:
    from examples.dask_processor import DijetProcessor, run

    from giod.analysis import dijet

    out = run(fed.dataset(DATASET).select("njets >= 2"), DijetProcessor(), scheduler="sync")
    reference = dijet.run(fed.dataset(DATASET), "njets >= 2")
    assert out["mjj"].sum() > 0
    assert (out["mjj"].values() == reference.values()).all()
    assert out["events"] == len(fed.dataset(DATASET).select("njets >= 2"))
