"""Calibration (file, correction, derivation) and validation (numbers and plots)."""

from __future__ import annotations

import json
from pathlib import Path

import awkward as ak
import numpy as np
import pytest

from giod.errors import ConfigError, DataError
from giod.physics.calibration import Calibration, match_jets
from giod.physics.derivation import derive_calibration
from giod.physics.detector import Detector
from giod.physics.validation import TARGETS, validate


def test_packaged_calibration_is_derived_and_corrects_upwards() -> None:
    cal = Calibration.load()
    assert "derive_calibration" in cal.description
    assert 1.0 < cal.hcal_scale < 1.5
    pt = np.geomspace(20, 1000, 30)
    for eta in (0.0, 1.6, 2.2):
        factor = cal.jet_factor(pt, np.full(len(pt), eta))
        assert np.all(factor > 1.0) and np.all(factor < 2.0)
        assert factor[0] > factor[-1]  # low-pT jets lose more to thresholds and non-compensation


def test_correction_interpolates_and_stays_flat_outside(tmp_path: Path) -> None:
    cal = Calibration(hcal_scale=1.2, eta_edges=(0.0, 1.0, 5.0), raw_pt=((10.0, 100.0), (20.0,)),
                      factor=((1.5, 1.1), (1.3,)))
    assert np.allclose(cal.jet_factor([10.0, 100.0, 5.0, 500.0], [0.5] * 4), [1.5, 1.1, 1.5, 1.1])
    middle = cal.jet_factor([np.sqrt(1000.0)], [-0.5])[0]  # halfway in log(pt)
    assert np.isclose(middle, 1.3)
    assert np.allclose(cal.jet_factor([7.0, 700.0], [-3.0, 9.0]), 1.3)  # second bin, and beyond the edges
    assert np.allclose(cal.cluster_scale(np.array([1, 2, 2, 1])), [1.0, 1.2, 1.2, 1.0])
    path = tmp_path / "cal.json"
    cal.save(path)
    assert Calibration.load(path) == cal
    assert Calibration.identity().jet_factor([30.0], [0.0])[0] == 1.0


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not valid JSON"),
    (json.dumps({"hcal_scale": 1.0, "bogus": 1}), "unknown \\['bogus'\\]"),
    (json.dumps({"hcal_scale": -1.0}), "hcal_scale must be positive"),
    (json.dumps({"eta_edges": [0, 1], "raw_pt": [[20, 10]], "factor": [[1, 1]]}), "increasing"),
    (json.dumps({"eta_edges": [0, 1, 2], "raw_pt": [[20]], "factor": [[1]]}), "one raw_pt and one factor"),
])
def test_bad_calibration_files_are_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        Calibration.load(path)


def test_missing_calibration_file() -> None:
    with pytest.raises(ConfigError, match="cannot read calibration file"):
        Calibration.load("/nonexistent/giod/calibration.json")


def test_derivation_on_a_small_sample(detector: Detector) -> None:
    """A quick derivation lands near the packaged one (same method, fewer events)."""
    notes: list[str] = []
    cal = derive_calibration(seed=5, n_gun=300, n_jets_events=120, pthat_bins=(60.0, 200.0),
                             detector=detector, progress=notes.append)
    packaged = Calibration.load()
    assert len(notes) >= 3
    assert abs(cal.hcal_scale - packaged.hcal_scale) < 0.1
    central = np.array(cal.raw_pt[0])
    assert len(central) >= 3
    pt = np.array([60.0, 120.0])
    assert np.allclose(cal.jet_factor(pt, np.zeros(2)), packaged.jet_factor(pt, np.zeros(2)), rtol=0.08)


def test_jet_matching_takes_the_nearest_within_range() -> None:
    # event 0: two truth jets, three reco jets; event 1: one truth jet, no reco jet
    match = match_jets(np.array([2, 1]), np.array([0.0, 1.0, 0.5]), np.array([0.0, 3.1, 0.0]),
                       np.array([3, 0]), np.array([0.05, 1.0, 0.0]), np.array([0.0, -3.1, 1.0]))
    assert match.tolist() == [0, 1, -1]


@pytest.mark.slow  # a validation pass
def test_validation_meets_loose_targets_on_a_small_sample(simulated: ak.Array, tmp_path: Path) -> None:
    summary = validate(simulated, tmp_path / "plots")
    tracking, jets = summary["tracking"], summary["jets"]
    assert summary["events"] == len(simulated)
    assert tracking["particles"] > 1000 and tracking["tracks"] > 1000
    assert tracking["efficiency"] > 0.95
    assert tracking["fake_rate"] < 0.03
    assert 0.003 < tracking["pt_resolution"]["1-1.5"] < 0.015  # multiple scattering: CMS has 0.7-1.5 %
    assert jets["matched"] > 100
    assert abs(jets["response_above_50"] - 1) < 0.1
    assert 0.85 < summary["dijet"]["mass_ratio_median"] < 1.15
    assert set(summary["targets"]) == {"tracking_efficiency", "fake_rate", "jet_response",
                                       "resolutions_within_1.5x_of_CMS"}
    assert summary["targets"]["tracking_efficiency"] == (tracking["efficiency"] >= TARGETS["tracking_efficiency"])
    for path in summary["plots"]:
        data = Path(path).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_validation_needs_events(simulated: ak.Array) -> None:
    with pytest.raises(DataError, match="no events"):
        validate(simulated[:0])
