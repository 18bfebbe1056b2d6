"""Tag selection: results equal a full scan; pruning and cluster skipping happen."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest

import giod
from giod.testing import synthetic


def _fill(fed, model, container_format=None):
    ds = fed.create_dataset("qcd", model)
    events = synthetic.events(2000, seed=11)
    # sort by ht inside each database batch so that statistics can prune databases
    order = np.argsort(ak.to_numpy(events.ht), kind="stable")
    events = events[order]
    with ds.writer(database_events=500, cluster_events=50, container_format=container_format) as w:
        w.append(events)
    return ds, events


@pytest.fixture
def filled(fed, model):
    return _fill(fed, model)


@pytest.fixture(scope="module")
def filled_once(module_fed, model):
    """As ``filled``, written once per module and backend: for the tests that only select and read."""
    return _fill(module_fed, model)


@pytest.mark.parametrize("expr", ["ht > 300", "njets >= 2 and ht > 150", "not (ntracks < 10) or lead_pt > 80",
                                  "njets in (1, 3)", "ht / max(njets, 1) > 60"])
def test_selection_equals_full_scan(filled_once, expr):
    ds, events = filled_once
    sel = ds.select(expr)
    ht = ak.to_numpy(events.ht)
    cols = {k: ak.to_numpy(events[k]) for k in ("ht", "njets", "ntracks", "lead_pt")}
    mask = sel.expression.evaluate(cols)
    assert len(sel) == int(mask.sum())
    np.testing.assert_array_equal(sel.entries(), np.flatnonzero(mask))
    got = sel.read(["jets.pt", "ht"])
    np.testing.assert_array_equal(ak.to_numpy(got.ht), ht[mask])
    assert got.jets.pt.to_list() == events.jets.pt[mask].to_list()


def test_statistics_prune_databases(filled_once):
    ds, events = filled_once
    top = float(np.sort(ak.to_numpy(events.ht))[-10])
    sel = ds.select(f"ht >= {top}")
    assert len(sel.databases()) == 1 and len(ds.databases()) == 4
    assert len(sel) == 10


def test_sparse_selection_reads_only_a_few_pages(fed, model, monkeypatch):
    ds, events = _fill(fed, model, "parquet")
    from giod.storage.formats.parquet import format as pages  # the page reader, as the format calls it

    calls = []
    real = pages.read_rows

    def spy(source, columns, rows, **kw):
        out = real(source, columns, rows, **kw)
        calls.append((str(source), len(rows), out.num_rows))
        return out

    monkeypatch.setattr(pages, "read_rows", spy)
    entry = 777
    sel = ds.select(f"event == {int(events.event[entry])}")
    arr = sel.read(["hits"])
    assert len(arr) == 1 and arr.hits.x.to_list() == events.hits.x[entry:entry + 1].to_list()
    assert [(n, m) for path, n, m in calls if "raw.tracker" in path] == [(1, 1)]


def test_sparse_selection_reads_only_its_record_batches(filled, monkeypatch):
    ds, events = filled
    from giod.storage.formats.arrow import ArrowContainerReader

    batches = []
    real = ArrowContainerReader._message

    def spy(self, index, meta):  # every batch read, whole or block by block, has its metadata checked
        batches.append((self.path, index))
        return real(self, index, meta)

    monkeypatch.setattr(ArrowContainerReader, "_message", spy)
    entry = 777  # the 278th event of the second database: its 6th cluster of 50
    arr = ds.select(f"event == {int(events.event[entry])}").read(["hits"])
    assert arr.hits.x.to_list() == events.hits.x[entry:entry + 1].to_list()
    assert [which for path, which in batches if "raw.tracker" in path] == [5]


def test_iterate_chunks(filled_once):
    ds, events = filled_once
    sel = ds.select("njets >= 1")
    chunks = list(sel.iterate(["njets"], step_size=120))
    assert all(len(c) <= 120 for c in chunks)
    assert sum(len(c) for c in chunks) == len(sel)
    assert np.concatenate([ak.to_numpy(c.njets) for c in chunks]).min() >= 1


def test_bad_expression_is_a_typed_error(filled_once):
    ds, _ = filled_once
    with pytest.raises(giod.ExpressionError):
        ds.select("htt > 3")
    with pytest.raises(giod.ExpressionError):
        ds.select("__import__('os')")
    with pytest.raises(giod.NotFound):
        ds.select().read(["nosuch"])
