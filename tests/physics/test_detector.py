"""The detector description: the packaged file, its checks, its geometry helpers."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from giod.errors import ConfigError
from giod.physics.detector import CaloSubdetector, Detector


def _packaged() -> dict[str, Any]:
    from importlib import resources

    return yaml.safe_load(resources.files("giod.physics").joinpath("detector.yaml").read_text())


def test_packaged_detector_is_cms_like(detector: Detector) -> None:
    assert detector.solenoid.field == pytest.approx(3.8)
    pixels = [layer.radius for layer in detector.tracker.barrel if layer.subdetector == "pixel"]
    strips = [layer.radius for layer in detector.tracker.barrel if layer.subdetector == "strip"]
    assert pixels == pytest.approx([2.9, 6.8, 10.9, 16.0])
    assert len(strips) == 10 and max(strips) == pytest.approx(108.0, abs=2)
    ecal, hcal = detector.calorimeter.ecal, detector.calorimeter.hcal
    # Cell sizes: ECAL 0.0174 x 0.0174, HCAL towers 0.087 x 0.087.
    assert ecal.barrel.d_eta == pytest.approx(0.0174, abs=2e-4)
    assert 2 * math.pi / ecal.n_phi == pytest.approx(0.0174, abs=2e-4)
    assert hcal.barrel.d_eta == pytest.approx(0.087, abs=2e-3)
    assert 2 * math.pi / hcal.n_phi == pytest.approx(0.087, abs=2e-3)
    assert detector.tracker.eta_max == 2.5 and detector.calorimeter.eta_max == 3.0
    assert ecal.endcap.eta_max >= 3.0 and hcal.endcap.eta_max >= 3.0
    assert detector.tracker.n_layers == len(detector.tracker.layer_names())


def test_to_dict_is_json_and_reloads(detector: Detector, tmp_path: Path) -> None:
    d = detector.to_dict()
    text = json.dumps(d)
    again = json.loads(text)
    assert again["tracker"]["layer_names"][0] == detector.tracker.barrel[0].name
    assert again["calorimeter"]["ecal"]["codes"] == [CaloSubdetector.ECAL_BARREL, CaloSubdetector.ECAL_ENDCAP]
    # The file form (without the derived keys) loads back to an equal detector.
    for key in ("layer_names", "layer_codes"):
        again["tracker"].pop(key)
    for calo in ("ecal", "hcal"):
        again["calorimeter"][calo].pop("codes")
    path = tmp_path / "detector.yaml"
    path.write_text(yaml.safe_dump(again))
    assert Detector.load(path) == detector


def test_ring_coordinate_round_trips(detector: Detector) -> None:
    for cal in (detector.calorimeter.ecal, detector.calorimeter.hcal):
        eta = np.linspace(0, 2.999, 500)
        u = cal.ring_coordinate(eta)
        assert np.all(np.diff(u) > 0)
        assert np.allclose(cal.ring_eta(u), eta)
        assert cal.ring_coordinate(np.array([cal.barrel.eta_max]))[0] == pytest.approx(cal.barrel.n_eta)


def test_cell_position_lies_on_the_calorimeter_surfaces(detector: Detector) -> None:
    ecal = detector.calorimeter.ecal
    x, y, z = detector.cell_position(
        np.array([CaloSubdetector.ECAL_BARREL, CaloSubdetector.ECAL_ENDCAP]),
        np.array([0.5, -2.0]),
        np.array([0.3, 1.0]),
    )
    assert math.hypot(x[0], y[0]) == pytest.approx(ecal.barrel.radius)
    assert z[1] == pytest.approx(-ecal.endcap.z)
    assert math.atan2(y[0], x[0]) == pytest.approx(0.3)
    assert np.arcsinh(z[1] / math.hypot(x[1], y[1])) == pytest.approx(-2.0)


def _set(d: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.replace("[", ".").replace("]", "").split(".")
    for key in parents:
        d = d[int(key)] if isinstance(d, list) else d[key]
    if value is _DELETE:
        del d[last]
    else:
        d[int(last) if isinstance(d, list) else last] = value


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("magnet", 1, "magnet: unknown key"),
        ("tracker.barrel[2].radiuss", 10.0, "tracker.barrel[2].radiuss: unknown key"),
        ("solenoid.field", _DELETE, "solenoid.field: missing key"),
        ("solenoid.field", "strong", "solenoid.field: expected a number"),
        ("solenoid.field", True, "solenoid.field: expected a number"),
        ("solenoid.field", -3.8, "solenoid.field: must be > 0"),
        ("tracker.barrel[0].efficiency", 1.5, "tracker.barrel[0].efficiency: must be in (0, 1]"),
        ("tracker.barrel[1].subdetector", "gas", "tracker.barrel[1].subdetector: must be one of pixel, strip"),
        ("tracker.endcap[0].r_min", 20.0, "tracker.endcap[0].r_min: must be smaller than r_max"),
        ("tracker.barrel[1].radius", 1.0, "tracker.barrel: layers must be listed by increasing radius"),
        ("tracker.barrel[13].radius", 200.0, "tracker.barrel[13]: lies outside the tracker volume"),
        ("tracker.barrel", {"a": 1}, "tracker.barrel: expected a list"),
        ("calorimeter.ecal.barrel.n_eta", 85.5, "calorimeter.ecal.barrel.n_eta: expected an integer"),
        ("calorimeter.ecal.endcap.n_phi", 180, "calorimeter.ecal.endcap.n_phi: must equal barrel.n_phi"),
        ("calorimeter.hcal.endcap.eta_min", 1.5, "calorimeter.hcal.endcap.eta_min: must equal barrel.eta_max"),
        ("calorimeter.hcal.barrel.radius", 100.0, "calorimeter.hcal.barrel.radius: must be larger"),
        ("calorimeter.ecal.endcap.eta_max", 2.5, "calorimeter.ecal.endcap.eta_max: must reach"),
        ("showers.em.tail_fraction", 2.0, "showers.em.tail_fraction: must be in [0, 1]"),
        ("showers.mip", 0.3, "showers.mip: expected a mapping"),
        ("tracker.barrel[3].x0", -0.01, "tracker.barrel[3].x0: must be >= 0"),
        ("tracker.endcap[2].x0", _DELETE, "tracker.endcap[2].x0: missing key"),
        ("tracker.material[0].radius", 150.0, "tracker.material[0]: lies outside the tracker volume"),
        ("tracker.material[1].radius", 25.5, "tracker.material[1].radius: coincides with a barrel layer"),
        ("tracker.material[2].name", "TIB1", "tracker: layer names must be unique"),
    ],
)
def test_bad_descriptions_name_the_key(path: str, value: Any, expected: str, tmp_path: Path) -> None:
    data = _packaged()
    _set(data, path, value)
    file = tmp_path / "bad.yaml"
    file.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        Detector.load(file)
    assert expected in str(info.value)
    assert str(file) in str(info.value)


def test_a_description_that_is_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match="expected a mapping"):
        Detector.from_dict([1, 2, 3])


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read detector file"):
        Detector.load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("tracker: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        Detector.load(bad)


def test_material_of_the_packaged_tracker(detector: Detector) -> None:
    """About 0.4 radiation lengths at eta = 0, as in CMS; with_material scales every thickness."""
    assert 0.3 < detector.material_at_normal_incidence() < 0.5
    assert detector.tracker.material[0].name == "beam_pipe"
    assert detector.tracker.material[0].radius < detector.tracker.barrel[0].radius
    double = detector.with_material(2.0)
    assert double.material_at_normal_incidence() == pytest.approx(2 * detector.material_at_normal_incidence())
    assert all(d2.x0 == 2 * d.x0 for d, d2 in zip(detector.tracker.endcap, double.tracker.endcap, strict=True))
    bare = detector.with_material(0.0)
    assert bare.material_at_normal_incidence() == 0.0
    assert bare.tracker.barrel[0].radius == detector.tracker.barrel[0].radius
