"""The compiled kernels read their settings by name: a new or reordered setting cannot shift the others."""

from __future__ import annotations

import dataclasses

import awkward as ak
import numpy as np

from giod.physics.clustering import ClusteringSettings, Thresholds
from giod.physics.detector import C_LIGHT, Detector
from giod.physics.reconstruct import reconstruct
from giod.physics.tracking import Cuts, TrackingSettings, kernel_cuts

#: Settings the kernel record derives rather than copies.
DERIVED = {"pt_min": "kappa_max", "beam_sigma": "beam_weight"}


def test_every_tracking_setting_reaches_the_kernel_under_its_own_name() -> None:
    fields = [f.name for f in dataclasses.fields(TrackingSettings)]
    # distinct values per field: a value that lands under another name is seen
    values = {name: float(3 + i) for i, name in enumerate(fields)}
    values["min_hits"], values["max_misses"] = 11, 4
    settings = TrackingSettings(**values)
    cuts = kernel_cuts(settings, field=3.8)
    for name in fields:
        if name in DERIVED:
            continue
        assert name in Cuts._fields, f"setting {name} is not passed to the track finder"
        assert getattr(cuts, name) == values[name], name
    assert cuts.kappa_max == C_LIGHT * 3.8 / values["pt_min"]
    assert cuts.beam_weight == 1.0 / values["beam_sigma"] ** 2
    assert cuts.field_constant == C_LIGHT * 3.8
    # every kernel field comes from some setting (or is the field's constant)
    assert set(Cuts._fields) == {DERIVED.get(n, n) for n in fields} | {"field_constant"}


def test_clustering_thresholds_are_passed_by_name() -> None:
    assert set(Thresholds._fields) == {f.name for f in dataclasses.fields(ClusteringSettings)}


def _ntracks(events: ak.Array, detector: Detector, **changes: float) -> int:
    reco = reconstruct(events, detector, tracking=TrackingSettings(**changes))
    return int(np.sum(reco.ntracks))


def test_each_cut_acts_on_what_it_names(simulated: ak.Array, detector: Detector) -> None:
    events = simulated[:20]
    base = _ntracks(events, detector)
    assert base > 100
    # min_hits above the number of layers a track can cross: nothing survives
    assert _ntracks(events, detector, min_hits=40) == 0
    # tracks need at least 7 hits by default; asking for 12 drops many but not all
    assert 0 < _ntracks(events, detector, min_hits=12) < base
    # a higher pt_min keeps fewer tracks, all of them above it
    reco = reconstruct(events, detector, tracking=TrackingSettings(pt_min=2.0))
    pt = ak.to_numpy(ak.flatten(reco.tracks.pt))
    assert 0 < len(pt) < base
    assert np.quantile(pt, 0.02) > 1.5
