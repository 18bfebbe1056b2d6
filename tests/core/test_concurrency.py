"""Concurrent writer processes with a reader holding a snapshot."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import awkward as ak
import numpy as np

import giod
from giod.testing import synthetic

WRITERS = 4
COMMITS = 8


def _write(target: str, site_dir: str | None, child: int, queue) -> None:
    try:
        fed = giod.open(target)
        ds = fed.dataset("conc")
        for k in range(COMMITS):
            with ds.writer(parameters={"child": child, "k": k}) as w:
                w.append(synthetic.events(10, seed=child * 100 + k))
        queue.put(("ok", child))
    except BaseException as exc:  # reported to the parent
        queue.put(("error", f"{type(exc).__name__}: {exc}"))


def test_concurrent_writers_and_a_snapshot_reader(tmp_path: Path, catalog_url: str):
    if catalog_url.startswith("sqlite"):
        target = str(tmp_path / "fed")
        fed = giod.open(target, create=True)
        site_dir = None
    else:
        target = catalog_url
        fed = giod.open(target, create=True)
        site_dir = str(tmp_path / "site")
        fed.add_site("local", site_dir, 0)
    ds = fed.create_dataset("conc", synthetic.schema())
    with ds.writer() as w:
        w.append(synthetic.events(30, seed=999))
    snapshot = ds.select("ht >= 0")
    before = snapshot.read(["ht"]).ht.to_list()

    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_write, args=(target, site_dir, i, queue)) for i in range(WRITERS)]
    for p in procs:
        p.start()
    # read while they write: the snapshot never changes
    for _ in range(5):
        assert snapshot.read(["ht"]).ht.to_list() == before
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(r[0] == "ok" for r in results), results

    dbs = ds.databases()
    assert len(dbs) == 1 + WRITERS * COMMITS
    keys = {(d.parameters.get("child"), d.parameters.get("k")) for d in dbs[1:]}
    assert keys == {(c, k) for c in range(WRITERS) for k in range(COMMITS)}
    firsts = np.array([d.first_entry for d in dbs])
    assert firsts[0] == 0
    ns = np.array([d.n_events for d in dbs])
    assert np.array_equal(firsts[1:], np.cumsum(ns)[:-1])
    versions = [d.created_version for d in dbs]
    assert len(set(versions)) == len(versions)
    assert snapshot.read(["ht"]).ht.to_list() == before
    assert len(ds) == 30 + WRITERS * COMMITS * 10
    assert len(ak.flatten(ds.read(["jets.pt"]).jets.pt)) > 0
    fed.close()
