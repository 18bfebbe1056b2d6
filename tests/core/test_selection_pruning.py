"""A selection asks the catalog only for the databases its tag ranges allow (pruned in SQL)."""

from __future__ import annotations

import awkward as ak
import numpy as np

from giod.testing import synthetic


def test_selection_builds_records_only_for_databases_that_may_match(fed, model, monkeypatch):
    ds = fed.create_dataset("qcd", model)
    events = synthetic.events(2000, seed=11)
    events = events[np.argsort(ak.to_numpy(events.ht), kind="stable")]  # ht ranges disjoint per database
    with ds.writer(database_events=500, cluster_events=50) as w:
        w.append(events)
    listed = []
    catalog = fed.catalog
    databases = catalog.databases

    def counting(*args, **kwargs):
        found = databases(*args, **kwargs)
        listed.append(len(found))
        return found

    monkeypatch.setattr(catalog, "databases", counting)
    ht = ak.to_numpy(events.ht)
    top = float(np.sort(ht)[-10])
    sel = ds.select(f"ht >= {top} and njets >= 0")
    assert len(sel.databases()) == 1
    assert listed == [1]  # one record built, not one per database of the dataset
    assert len(sel) == int(np.sum((ht >= top) & (ak.to_numpy(events.njets) >= 0)))
    np.testing.assert_array_equal(ak.to_numpy(sel.read(["ht"]).ht), ht[ht >= top])
    assert len(ds.select("ht < 0").databases()) == 0
