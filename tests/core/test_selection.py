"""Tag selection: results equal a full scan; pruning and cluster skipping happen."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest

import giod
from giod.bench import synthetic
from giod.storage import container


@pytest.fixture
def filled(fed, model):
    ds = fed.create_dataset("qcd", model)
    events = synthetic.events(2000, seed=11)
    # sort by ht inside each database batch so that statistics can prune databases
    order = np.argsort(ak.to_numpy(events.ht), kind="stable")
    events = events[order]
    with ds.writer(database_events=500, cluster_events=50) as w:
        w.append(events)
    return ds, events


@pytest.mark.parametrize("expr", ["ht > 300", "njets >= 2 and ht > 150", "not (ntracks < 10) or lead_pt > 80",
                                  "njets in (1, 3)", "ht / max(njets, 1) > 60"])
def test_selection_equals_full_scan(filled, expr):
    ds, events = filled
    sel = ds.select(expr)
    ht = ak.to_numpy(events.ht)
    cols = {k: ak.to_numpy(events[k]) for k in ("ht", "njets", "ntracks", "lead_pt")}
    mask = sel.expression.evaluate(cols)
    assert len(sel) == int(mask.sum())
    np.testing.assert_array_equal(sel.entries(), np.flatnonzero(mask))
    got = sel.read(["jets.pt", "ht"])
    np.testing.assert_array_equal(ak.to_numpy(got.ht), ht[mask])
    assert got.jets.pt.to_list() == events.jets.pt[mask].to_list()


def test_statistics_prune_databases(filled):
    ds, events = filled
    top = float(np.sort(ak.to_numpy(events.ht))[-10])
    sel = ds.select(f"ht >= {top}")
    assert len(sel.databases()) == 1 and len(ds.databases()) == 4
    assert len(sel) == 10


def test_only_clusters_with_selected_events_are_read(filled, monkeypatch):
    ds, _ = filled
    seen = []
    real = container.ContainerReader.read

    def spy(self, columns=None, row_groups=None):
        seen.append((self.path, None if row_groups is None else list(row_groups)))
        return real(self, columns, row_groups)

    monkeypatch.setattr(container.ContainerReader, "read", spy)
    sel = ds.select("ht > 0")
    first = sel.entries()[:3]
    sel2 = ds.select(f"event == {int(ds.event(int(first[0]), ['event']).event)}")
    seen.clear()
    arr = sel2.read(["hits"])
    assert len(arr) == 1
    hit_reads = [rg for path, rg in seen if "raw.tracker" in path]
    assert hit_reads == [[int(first[0]) % 500 // 50]]


def test_iterate_chunks(filled):
    ds, events = filled
    sel = ds.select("njets >= 1")
    chunks = list(sel.iterate(["njets"], step_size=120))
    assert all(len(c) <= 120 for c in chunks)
    assert sum(len(c) for c in chunks) == len(sel)
    assert np.concatenate([ak.to_numpy(c.njets) for c in chunks]).min() >= 1


def test_bad_expression_is_a_typed_error(filled):
    ds, _ = filled
    with pytest.raises(giod.ExpressionError):
        ds.select("htt > 3")
    with pytest.raises(giod.ExpressionError):
        ds.select("__import__('os')")
    with pytest.raises(giod.NotFound):
        ds.select().read(["nosuch"])
