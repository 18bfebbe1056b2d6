"""The physics chain on a real embedded federation: simulate -> store -> reconstruct as a pass."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import awkward as ak
import numpy as np
import pytest

import giod
from giod.errors import ConfigError, ConflictError, DataError, MissingDependency
from giod.physics.chain import RAW_COLLECTIONS, reconstruct_dataset, simulate_into
from giod.physics.generator import generate
from giod.physics.layout import model_text
from giod.physics.simulate import simulate
from giod.physics.validation import validate
from giod.schema import Schema

RECO_COLUMNS = ["tracks", "clusters", "jets", "njets", "ht", "met", "mjj", "event", "run", "ntracks"]


@pytest.fixture(scope="module")
def fed(tmp_path_factory: pytest.TempPathFactory) -> giod.Federation:
    federation = giod.open(tmp_path_factory.mktemp("chain") / "fed", create=True)
    simulate_into(federation, "qcd", 200, seed=21, batch=100, pthat_min=60.0, database_events=100, run=7)
    yield federation
    federation.close()


@pytest.fixture(scope="module")
def first_pass(fed: giod.Federation) -> int:
    return reconstruct_dataset(fed.dataset("qcd"))


def test_raw_pass_stores_the_raw_containers_and_provenance(fed: giod.Federation) -> None:
    ds = fed.dataset("qcd")
    dbs = ds.databases()
    assert len(ds) == 200 and len(dbs) == 2
    for db in dbs:
        assert {c.name for c in db.containers} >= {"truth", "raw.tracker", "raw.calo"}
        assert db.program == "giod.physics.simulate" and db.program_version == giod.__version__
        assert db.parameters == {"seed": 21, "pthat_min": 60.0, "pileup": 0.0, "generator": "builtin", "run": 7}


def test_simulation_is_reproducible(tmp_path: Path) -> None:
    with giod.open(tmp_path / "a", create=True) as a, giod.open(tmp_path / "b", create=True) as b:
        one = simulate_into(a, "x", 40, seed=3, batch=25).read(list(RAW_COLLECTIONS))
        two = simulate_into(b, "x", 40, seed=3, batch=25).read(list(RAW_COLLECTIONS))
        other = simulate_into(b, "y", 40, seed=4, batch=25).read(list(RAW_COLLECTIONS))
    assert ak.array_equal(one, two, dtype_exact=True)
    assert not ak.array_equal(one.tracker_hits.x, other.tracker_hits.x)


def test_reconstruction_pass_links_jets_to_tracks_to_hits(fed: giod.Federation, first_pass: int) -> None:
    ds = fed.dataset("qcd")
    assert first_pass == fed.version
    for db in ds.databases():
        assert {c.name for c in db.containers} >= {"truth", "raw.tracker", "raw.calo", "reco", "tag"}
    sel = ds.select("njets >= 2")
    arr = sel.read(["jets", "tracks", "tracker_hits", "njets", "event"])
    assert 0 < len(arr) < len(ds)
    assert ak.all(ak.num(arr.jets) >= 2)
    navigated = arr.jets.tracks.hits.x  # event -> jet -> track -> hit
    assert ak.sum(ak.num(ak.flatten(navigated, axis=2), axis=2)) > 1000
    # the navigated hits are the stored hits the index lists name
    track_hits = arr.tracks.hits_index
    direct = arr.tracker_hits.x[ak.flatten(track_hits, axis=2)]
    assert ak.array_equal(ak.flatten(arr.tracks.hits.x, axis=2), direct)
    # events keep their numbers: the entry, as the simulation numbered them
    assert np.array_equal(ak.to_numpy(arr.event), sel.entries())


def test_stored_tags_agree_with_stored_objects(fed: giod.Federation, first_pass: int) -> None:
    arr = fed.dataset("qcd").read(RECO_COLUMNS)
    good = arr.jets[(arr.jets.pt > 30) & (abs(arr.jets.eta) < 2.5)]
    assert np.array_equal(ak.to_numpy(arr.njets), ak.to_numpy(ak.num(good)))
    assert np.array_equal(ak.to_numpy(arr.ntracks), ak.to_numpy(ak.num(arr.tracks)))
    assert np.all(ak.to_numpy(arr.run) == 7)
    assert np.array_equal(ak.to_numpy(arr.event), np.arange(200))


@pytest.mark.slow  # a validation pass over a simulated sample
def test_reconstructed_dataset_validates(fed: giod.Federation, first_pass: int, tmp_path: Path) -> None:
    summary = validate(fed.dataset("qcd"), tmp_path / "plots")
    assert summary["events"] == 200
    assert summary["tracking"]["efficiency"] > 0.95
    assert summary["tracking"]["fake_rate"] < 0.03
    assert abs(summary["jets"]["response_above_50"] - 1) < 0.12
    assert len(list((tmp_path / "plots").glob("*.png"))) == 7


def test_second_pass_is_refused_without_force(fed: giod.Federation, first_pass: int) -> None:
    before = fed.version
    with pytest.raises(ConflictError, match="already reconstructed.*force"):
        reconstruct_dataset(fed.dataset("qcd"))
    assert fed.version == before


@pytest.mark.slow  # a second reconstruction, in worker processes
def test_force_replaces_in_a_new_version_and_workers_give_identical_results(
    fed: giod.Federation, first_pass: int
) -> None:
    ds = fed.dataset("qcd")
    old = ds.at(first_pass).read(RECO_COLUMNS)
    old_paths = {db.id: db.container("reco").path for db in ds.at(first_pass).databases()}
    done: list[int] = []
    version = reconstruct_dataset(ds, workers=2, force=True, progress=done.append)
    assert version > first_pass and sum(done) == 200
    new = fed.dataset("qcd").read(RECO_COLUMNS)
    assert ak.array_equal(new, old, dtype_exact=True)  # bit-identical across 1 and 2 workers
    dbs = fed.dataset("qcd").databases()
    assert all(db.container("reco").path != old_paths[db.id] for db in dbs)
    assert len({c.name for db in dbs for c in db.containers if c.name == "reco"}) == 1
    # the old snapshot still reads its own files
    assert ak.array_equal(ds.at(first_pass).read(RECO_COLUMNS), old, dtype_exact=True)


def test_new_raw_databases_are_reconstructed_alone(fed: giod.Federation, first_pass: int) -> None:
    ds = fed.dataset("qcd")
    before = {db.id: db.container("reco").path for db in ds.databases()}
    events = simulate(generate(30, seed=99, pthat_min=60.0, first_event=len(ds)), seed=98)
    with ds.writer() as writer:
        writer.append(events[list(RAW_COLLECTIONS)])
    reconstruct_dataset(fed.dataset("qcd"))
    after = {db.id: db.container("reco").path for db in fed.dataset("qcd").databases()}
    assert len(after) == len(before) + 1
    assert all(after[i] == path for i, path in before.items())
    assert len(fed.dataset("qcd").select("ntracks >= 0")) == 230


def test_dataset_without_raw_hits_is_refused(fed: giod.Federation) -> None:
    ds = fed.create_dataset("truth_only", Schema.from_yaml(model_text()))
    with ds.writer() as writer:
        writer.append(generate(5, seed=1)[["mcparticles"]])
    before = fed.version
    with pytest.raises(DataError, match="no raw.calo, raw.tracker container"):
        reconstruct_dataset(fed.dataset("truth_only"))
    assert fed.version == before


def test_dataset_of_another_model_is_refused(fed: giod.Federation) -> None:
    model = "schema_version: 1\nname: tiny\ntypes:\n  P: {fields: {x: float32}}\ncollections: {parts: P}\n"
    fed.create_dataset("tiny", Schema.from_yaml(model))
    with pytest.raises(DataError, match="cannot be reconstructed.*tracker_hits"):
        reconstruct_dataset(fed.dataset("tiny"))
    with pytest.raises(DataError, match="no events"):
        reconstruct_dataset(fed.dataset("qcd").federation.create_dataset("empty", Schema.from_yaml(model_text())))


def test_bad_simulation_requests(fed: giod.Federation) -> None:
    names = set(fed.datasets())
    with pytest.raises(ConflictError, match="already exists"):
        simulate_into(fed, "qcd", 10, seed=1)
    with pytest.raises(ConfigError, match="n_events"):
        simulate_into(fed, "nothing", 0, seed=1)
    with pytest.raises(ConfigError, match="unknown generator"):
        simulate_into(fed, "nothing", 10, seed=1, generator="herwig")
    if importlib.util.find_spec("pythia8mc") is None:
        with pytest.raises(MissingDependency, match="pip install"):
            simulate_into(fed, "nothing", 10, seed=1, generator="pythia")
    assert set(fed.datasets()) == names
    with pytest.raises(ConfigError, match="workers"):
        reconstruct_dataset(fed.dataset("qcd"), workers=0)
