"""A worker process killed mid-job: its tasks run again elsewhere and the answer does not change."""

from __future__ import annotations

import os
from pathlib import Path

import awkward as ak
import numpy as np

import giod.distributed
from giod.analysis import dijet
from giod.distributed import connect, map_selection

from .conftest import DATASET

COLUMNS = ["jets.pt", "jets.eta", "jets.phi", "jets.mass", "event"]


def dies_once(marker: str, chunk: ak.Array) -> dict:
    """The first task to run kills its worker process (as the kernel's OOM killer would)."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # exactly one task wins
    except FileExistsError:
        pass
    else:
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os._exit(1)
    h = dijet.mass_histogram()
    h.fill(mjj=dijet.dijet_masses(chunk.jets))
    return {"hist": h, "events": chunk.event.to_numpy()}


def _clean(chunk: ak.Array) -> dict:
    h = dijet.mass_histogram()
    h.fill(mjj=dijet.dijet_masses(chunk.jets))
    return {"hist": h, "events": chunk.event.to_numpy()}


def _same(a: dict, b: dict) -> bool:
    return np.array_equal(a["hist"].view(flow=True), b["hist"].view(flow=True)) and \
        np.array_equal(a["events"], b["events"])


def test_a_killed_dask_worker_does_not_change_the_result(fed: giod.Federation, client, tmp_path: Path) -> None:
    import functools

    sel = fed.dataset(DATASET).select("njets >= 2")
    reference = map_selection(sel, _clean, columns=COLUMNS, scheduler="sync", partition_events=100)
    marker = tmp_path / "killed"
    before = set(client.scheduler_info()["workers"])
    got, report = map_selection(sel, functools.partial(dies_once, str(marker)), columns=COLUMNS,
                                       scheduler=client, partition_events=100, report=True)
    assert marker.exists()  # a worker did die, by its own hand, in a task
    assert _same(got, reference)
    assert report.partitions == len(report.tasks)
    client.wait_for_workers(2, timeout=60)  # the nanny restarts it, for the tests after this one
    assert set(client.scheduler_info()["workers"]) != before


def test_a_killed_pool_worker_does_not_change_the_result(fed: giod.Federation, tmp_path: Path) -> None:
    import functools

    sel = fed.dataset(DATASET).select("njets >= 2")
    reference = map_selection(sel, _clean, columns=COLUMNS, scheduler="sync", partition_events=100)
    marker = tmp_path / "killed"
    executor = connect("processes:2")
    got = map_selection(sel, functools.partial(dies_once, str(marker)), columns=COLUMNS, scheduler=executor,
                               partition_events=100)
    assert marker.exists() and executor.restarts == 1
    assert _same(got, reference)
