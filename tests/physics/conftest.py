"""Shared physics samples: a few generated and simulated events, made once per session."""

from __future__ import annotations

import awkward as ak
import pytest

from giod.physics.detector import Detector
from giod.physics.generator import generate
from giod.physics.simulate import simulate


@pytest.fixture(scope="session")
def detector() -> Detector:
    return Detector.load()


@pytest.fixture(scope="session")
def generated() -> ak.Array:
    """Built-in generator, pT-hat > 50 GeV, no pile-up."""
    return generate(150, seed=11, pthat_min=50.0)


@pytest.fixture(scope="session")
def simulated(generated: ak.Array, detector: Detector) -> ak.Array:
    return simulate(generated, detector, seed=12)
