"""Bad input gives typed errors and damages nothing already committed."""

from __future__ import annotations

import awkward as ak
import numpy as np
import pytest

import giod
from giod.store.consistency import fsck
from giod.testing import synthetic


@pytest.fixture
def ds(local_fed, model):
    d = local_fed.create_dataset("qcd", model)
    with d.writer() as w:
        w.append(synthetic.events(100, seed=21))
    return d


def _bad_variants():
    ev = synthetic.events(5, seed=22)
    yield "unknown collection", ak.with_field(ev, ev.hits, "hitz")
    yield "relation out of range", ak.with_field(ev, ev.jets.tracks + 1000, ["jets", "tracks"])
    yield "float into int", ak.with_field(ev, ev.tracks.pt, ["tracks", "charge"])
    big = ak.values_astype(ev.hits.layer, "int32") * 0 + 300
    yield "too large for uint8", ak.with_field(ev, big, ["hits", "layer"])
    yield "missing collection", ev[["hits", "cells", "tracks", "run"]]
    yield "wrong fixed shape", ak.with_field(ev, ev.tracks.pt[:, :, None], ["tracks", "cov"])
    yield "not records", ak.Array([1, 2, 3])


@pytest.mark.parametrize("what,events", list(_bad_variants()), ids=[n for n, _ in _bad_variants()])
def test_bad_events_are_refused(ds, what, events):
    before = ds.federation.version
    with pytest.raises(giod.DataError):
        with ds.writer() as w:
            w.append(events)
    assert ds.federation.version == before
    assert len(ds) == 100
    assert not fsck(ds.federation.store).damaged


def test_list_of_dicts_is_accepted(local_fed):
    schema = giod.Schema.from_yaml(
        "schema_version: 1\nname: tiny\ntypes:\n  P: {fields: {pt: float32}}\n"
        "collections: {parts: P}\ntags: {n: int32}\n")
    ds = local_fed.create_dataset("tiny", schema)
    with ds.writer() as w:
        w.append([{"parts": [{"pt": 1.5}], "n": 1}, {"parts": [], "n": 0}])
    assert ds.read().to_list() == [{"parts": [{"pt": 1.5}], "n": 1}, {"parts": [], "n": 0}]


def _container_file(ds, name="raw.tracker"):
    db = ds.databases()[0]
    c = db.container(name)
    return ds.federation.site().local_path(c.path)


def test_bit_flip_is_detected(ds):
    path = _container_file(ds)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 3] ^= 0x10
    open(path, "wb").write(bytes(data))
    report = fsck(ds.federation.store)
    assert [p.kind for p in report.problems] == ["checksum"]
    with pytest.raises(giod.IntegrityError):
        ds.read(["hits"])
    # other containers still read
    assert len(ds.read(["cells"])) == 100


def test_truncated_file_is_detected(ds):
    path = _container_file(ds, "raw.calo")
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    with pytest.raises(giod.IntegrityError):
        ds.read(["cells"])
    assert [p.kind for p in fsck(ds.federation.store).problems] == ["size"]


def test_missing_file_is_reported(ds):
    import os

    os.remove(_container_file(ds, "reco"))
    with pytest.raises(giod.NotFound):
        ds.read(["jets"])
    assert [p.kind for p in fsck(ds.federation.store).problems] == ["missing"]
    assert np.all(ak.to_numpy(ds.read(["ht"]).ht) >= 0)


def test_parameters_a_commit_cannot_record_are_refused(ds):
    deep: dict = {}
    inner = deep
    for _ in range(5000):  # deeper than Python's stack: json.dumps used to end in a RecursionError
        inner["x"] = {}
        inner = inner["x"]
    before = ds.federation.version
    with pytest.raises(giod.DataError, match="parameters cannot be recorded"):
        ds.writer(parameters=deep)
    with pytest.raises(giod.DataError, match="parameters cannot be recorded"):
        with ds.add_containers(program="reco", parameters=deep) as p:
            p.write(ds.databases()[0], synthetic.events(100, seed=21)[["tracks", "jets"]])
    assert ds.federation.version == before and len(ds.databases()) == 1
