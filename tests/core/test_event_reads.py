"""``ds.event(i)`` warm: an event of a cluster read before is gathered from the kept cluster, nothing decoded."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pyarrow as pa
import pytest

from giod.read import clusters
from giod.storage.formats.arrow.reader import ArrowContainerReader
from giod.testing import synthetic


@pytest.fixture
def counted(monkeypatch):
    """Calls of the Arrow reader's batch decoding and block-level row reads, counted (they still run)."""
    counts = {"decode": 0, "read_rows": 0}

    def counting(name, real):
        def wrapper(self, *args, **kwargs):
            counts[name] += 1
            return real(self, *args, **kwargs)
        return wrapper

    monkeypatch.setattr(ArrowContainerReader, "_decode", counting("decode", ArrowContainerReader._decode))
    monkeypatch.setattr(ArrowContainerReader, "read_rows", counting("read_rows", ArrowContainerReader.read_rows))
    clusters.forget()
    yield counts
    clusters.forget()


def test_warm_event_decodes_nothing(local_fed, model, counted):
    ds = local_fed.create_dataset("qcd", model)
    events = synthetic.events(400, seed=5)
    with ds.writer(database_events=200, cluster_events=50) as w:
        w.append(events)
    ds.event(210)  # the cold read: each container's cluster decoded once and kept
    cold = counted["decode"]
    assert cold >= len(model.containers)
    assert counted["read_rows"] == 0
    decodes = []
    for entry in (210, 211, 249, 259):  # the same clusters as the cold read (entries 200..249), then the next
        before = counted["decode"]
        ev = ds.event(entry)
        decodes.append(counted["decode"] - before)
        # fixed-size lists (tracks' covariance) are gathered from the kept cluster too
        np.testing.assert_array_equal(np.asarray(ev.tracks.cov.to_list(), dtype=np.float32).reshape(-1, 3),
                                      np.asarray(events.tracks.cov[entry].to_list(), dtype=np.float32).reshape(-1, 3))
        assert ev.jets.pt.to_list() == pytest.approx(events.jets.pt[entry].to_list())
        assert ev.hits.x.to_list() == pytest.approx(events.hits.x[entry].to_list())
    # 210, 211 and 249 decode nothing; 259 is in the next cluster of a container or more
    assert decodes[:3] == [0, 0, 0]
    assert 0 < decodes[3] <= cold
    assert counted["read_rows"] == 0  # nor read any block by block


def test_fixed_size_lists_gathered_across_clusters():
    """Rows of a fixed-size list column taken from two clusters, a sliced one among them, as Arrow's take."""
    items = pa.array(np.arange(30, dtype=np.float32))
    whole = pa.FixedSizeListArray.from_arrays(items, 3)
    a, b = pa.table({"c": whole.slice(2, 5)}), pa.table({"c": whole.slice(0, 4)})
    ka, kb = clusters._Cluster.of(a), clusters._Cluster.of(b)
    assert ka is not None and kb is not None
    got = clusters.gather([(ka, np.array([0, 4])), (kb, np.array([1]))])
    want = pa.concat_arrays([whole.slice(2, 5).take([0, 4]), whole.take([1])])
    assert got.column("c").combine_chunks().equals(want)


def test_event_is_four_momenta_only_with_all_four_fields(local_fed, model):
    """vector's behaviour comes with the collections read with pt, eta, phi and mass, not with pt alone."""
    ds = local_fed.create_dataset("qcd", model)
    events = synthetic.events(100, seed=6)
    with ds.writer(cluster_events=50) as w:
        w.append(events)
    entry = int(np.flatnonzero(ak.num(events.jets) > 0)[0])
    ev = ds.event(entry)
    jet = events.jets[entry][0]
    assert float(ev.jets[0].px) == pytest.approx(float(jet.pt * np.cos(jet.phi)), rel=1e-5)
    assert "Jet" in (ev.behavior or {})
    assert "Jet" not in (ds.event(entry, ["jets.pt"]).behavior or {})
