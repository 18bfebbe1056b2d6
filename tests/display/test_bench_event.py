"""The display benchmark's busy event: exactly the cells asked for, each a real cell of the detector."""

from __future__ import annotations

import numpy as np
import pytest

from giod.errors import ConfigError
from giod.physics.detector import Detector
from giod_bench.display import busy_events


def test_busy_event_has_exactly_the_cells_asked_for():
    events = busy_events([(None, 0.0), (20_000, 0.0)], seed=3)
    small, busy = events.calo_cells[0], events.calo_cells[1]
    assert len(busy) == 20_000 and len(small) < 2_000
    det = Detector.load()
    ecal = det.calorimeter.ecal
    sub, ieta, iphi = (np.asarray(busy[k]) for k in ("subdetector", "ieta", "iphi"))
    keys = (sub <= 2) * 10**7 + ieta.astype(np.int64) * 1000 + iphi
    assert len(np.unique(keys)) == len(keys)  # no cell twice
    is_ecal = sub <= 2
    assert np.all(np.abs(ieta[is_ecal]) <= ecal.n_rings) and np.all(iphi[is_ecal] < ecal.n_phi)
    # the added cells sit where their ring and sector say
    ring = np.abs(ieta[is_ecal]) - 1
    eta = np.sign(ieta[is_ecal]) * ecal.ring_eta(ring + 0.5)
    np.testing.assert_allclose(np.asarray(busy.eta)[is_ecal], eta, atol=1e-5)
    phi = (iphi[is_ecal] + 0.5) * 2 * np.pi / ecal.n_phi
    np.testing.assert_allclose(np.cos(np.asarray(busy.phi)[is_ecal]), np.cos(phi), atol=1e-5)
    # the simulation's order: calorimeter, ring, sector
    order = np.lexsort((iphi, ieta, (sub > 2).astype(int)))
    assert np.array_equal(order, np.arange(len(order)))
    assert np.all(np.asarray(busy.energy) > 0)


def test_fewer_cells_than_the_event_has_is_refused():
    with pytest.raises(ConfigError, match="already has"):
        busy_events([(10, 0.0)])


def test_an_unknown_renderer_is_refused_before_any_work(tmp_path):
    from giod_bench.display import run

    with pytest.raises(ConfigError, match="renderer must be one of webgl, plotly"):
        run(cells=10, repeat=1, workdir=tmp_path, renderer="three")
    assert list(tmp_path.iterdir()) == []
