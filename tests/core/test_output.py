"""What a read returns: library="ak"|"pa"|"np" and step_size in events or bytes, as uproot has them."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pyarrow as pa
import pytest

import giod
from giod.read.output import memory_size
from giod.testing import synthetic


@pytest.fixture
def written(local_fed, model):
    ds = local_fed.create_dataset("out", model)
    events = synthetic.events(300, seed=3)
    with ds.writer(database_events=120) as w:
        w.append(events)
    return ds, events


def test_each_library_gives_the_same_values(written):
    ds, events = written
    columns = ["ht", "jets.pt", "tracks"]
    arr = ds.read(columns)
    table = ds.read(columns, library="pa")
    flat = ds.read(columns, library="np")
    assert isinstance(arr, ak.Array) and isinstance(table, pa.Table) and isinstance(flat, dict)
    assert table.num_rows == len(arr) == 300
    assert table.column("ht").to_pylist() == events.ht.to_list()
    assert table.column("jets").to_pylist()[5] == [{"pt": j["pt"]} for j in events.jets[5].to_list()]
    # the stored form: a relation is its indices under its own name
    assert table.column("tracks").to_pylist()[7][0]["hits"] == events.tracks.hits[7][0].to_list()
    assert flat["ht"].dtype == np.float32 and flat["ht"].tolist() == events.ht.to_list()
    assert flat["jets.pt"].dtype == object and len(flat["jets.pt"]) == 300
    assert [p.tolist() for p in flat["jets.pt"]] == events.jets.pt.to_list()
    assert flat["tracks.cov"][4].shape == (len(events.tracks[4]), 3)
    assert [[h.tolist() for h in ev] for ev in flat["tracks.hits"][:20]] == events.tracks.hits[:20].to_list()
    sel = ds.select("njets >= 2")
    assert sel.read(["ht"], library="np")["ht"].tolist() == sel.read(["ht"]).ht.to_list()


def test_iterate_in_each_library_and_by_memory_size(written):
    ds, events = written
    chunks = list(ds.iterate(["ht", "jets"], step_size=50, library="pa"))
    assert [c.num_rows for c in chunks] == [50, 50, 20, 50, 50, 20, 50, 10]  # never across databases
    per_event = ak.to_packed(ds.read(["ht", "jets"])).nbytes / 300
    budget = int(per_event * 40)
    sized = list(ds.iterate(["ht", "jets"], step_size=f"{budget} B"))
    assert 20 <= max(len(c) for c in sized) <= 60  # about 40 events' worth, estimated from a sample
    assert ak.concatenate(sized).ht.to_list() == events.ht.to_list()
    assert [len(c) for c in ds.iterate(["ht"], step_size="1 GB")] == [120, 120, 60]


@pytest.mark.parametrize(("text", "size"), [("100 MB", 100_000_000), ("1 GiB", 1 << 30), ("2.5kB", 2500),
                                            ("512", 512), ("3 TB", 3 * 10**12)])
def test_memory_sizes_as_uproot_reads_them(text, size):
    assert memory_size(text) == size


def test_bad_library_and_step_size_are_refused(written):
    ds, _ = written
    with pytest.raises(giod.ConfigError, match="library must be 'ak'"):
        ds.read(["ht"], library="pandas")
    with pytest.raises(giod.ConfigError, match="library"):
        next(ds.iterate(["ht"], library="pd"))
    for bad in ("100 furlongs", "MB", "-1 MB", 0, -5, 2.5, True):
        with pytest.raises(giod.DataError, match="step_size"):
            next(ds.iterate(["ht"], step_size=bad))


def test_four_momenta_add_on_every_read_and_travel_to_workers(written):
    pytest.importorskip("vector")
    import giod.distributed

    ds, events = written
    jets = ds.read(["jets"]).jets
    two = jets[ak.num(jets) >= 2]
    mass = (two[:, 0] + two[:, 1]).mass
    assert len(mass) > 0 and ak.all(mass > 0)
    assert ak.all(abs(ds.read(["tracks", "jets"]).jets.px) <= ds.read(["jets.pt"]).jets.pt)  # relation views too
    assert "pt" in repr(ds.read(["jets.pt"]).jets)  # pt alone is no four-vector: plain records
    with pytest.raises(AttributeError):
        ds.read(["jets.pt"]).jets.px

    def leading_mass(chunk: ak.Array) -> ak.Array:
        pair = chunk.jets[ak.num(chunk.jets) >= 2]
        return (pair[:, 0] + pair[:, 1]).mass

    got = giod.distributed.map_selection(ds.select(), leading_mass, columns=["jets"], scheduler="processes:1")
    np.testing.assert_allclose(ak.to_numpy(got), ak.to_numpy(mass), rtol=1e-6)


def test_records_with_other_coordinates_too_stay_plain(local_fed):
    """A vertex with x, y, z beside pt, eta, phi, mass (NanoAOD's SV) is no single four-vector to vector."""
    pytest.importorskip("vector")
    model = giod.Schema.from_yaml(
        "schema_version: 1\nname: sv\ntypes:\n"
        "  SV: {fields: {pt: float32, eta: float32, phi: float32, mass: float32, x: float32, y: float32}}\n"
        "  Mu: {fields: {pt: float32, eta: float32, phi: float32, mass: float32}}\n"
        "collections: {SV: SV, Muon: Mu}\n")
    ds = local_fed.create_dataset("sv", model)
    one = {"pt": 10.0, "eta": 0.5, "phi": 1.0, "mass": 0.1, "x": 0.2, "y": 0.3}
    with ds.writer() as w:
        w.append([{"SV": [one, one], "Muon": [{k: one[k] for k in ("pt", "eta", "phi", "mass")}] * 2}])
    ev = ds.read()
    assert type(ev.SV) is ak.Array and repr(ev.SV) and ev.SV.x.to_list() == [[pytest.approx(0.2)] * 2]
    assert (ev.Muon[:, 0] + ev.Muon[:, 1]).mass.to_list() == [pytest.approx(0.2, rel=1e-3)]
