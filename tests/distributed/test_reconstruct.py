"""The reconstruction pass gives bit-identical output serially, on a local pool and on a Dask cluster."""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import pytest

import giod
from giod.physics.chain import reconstruct_dataset, simulate_into

COLUMNS = ["tracks", "clusters", "jets", "njets", "ht", "met", "mjj", "event", "run", "ntracks"]


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> ak.Array:
    with giod.open(tmp_path_factory.mktemp("serial") / "fed", create=True) as fed:
        simulate_into(fed, "qcd", 60, seed=21, batch=60, pthat_min=60.0, database_events=20)
        reconstruct_dataset(fed.dataset("qcd"))
        return fed.dataset("qcd").read(COLUMNS)


@pytest.mark.parametrize("where", ["processes", "cluster"])
def test_reconstruction_on_a_scheduler_equals_the_serial_pass(serial: ak.Array, where: str, tmp_path: Path,
                                                              request: pytest.FixtureRequest) -> None:
    scheduler = request.getfixturevalue("client") if where == "cluster" else "processes:2"
    done: list[int] = []
    with giod.open(tmp_path / "fed", create=True) as fed:
        simulate_into(fed, "qcd", 60, seed=21, batch=60, pthat_min=60.0, database_events=20)
        version = reconstruct_dataset(fed.dataset("qcd"), scheduler=scheduler, progress=done.append)
        assert version == fed.version and sorted(done) == [20, 20, 20]
        got = fed.dataset("qcd").read(COLUMNS)
    assert len(got) == 60
    assert ak.array_equal(got, serial, dtype_exact=True)
