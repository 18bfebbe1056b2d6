"""Both writers speak the same verbs (commit, abort) and take the same encoding keywords."""

from __future__ import annotations

import os

import awkward as ak
import pytest

import giod
from giod.testing import synthetic

RAW = ["hits", "cells", "run", "event", "njets", "ntracks", "ht", "lead_pt"]


def _raw(fed: giod.Federation, name: str, n: int = 60) -> tuple[giod.Dataset, ak.Array]:
    ds = fed.create_dataset(name, synthetic.schema())
    events = synthetic.events(n, seed=5)
    with ds.writer(database_events=30) as w:
        w.append(events[RAW])
    return ds, events


def test_writer_commit_and_abort(local_fed, model):
    ds = local_fed.create_dataset("w", model)
    events = synthetic.events(20, seed=1)
    w = ds.writer()
    w.append(events[RAW])
    commits = w.commit()
    assert [c.first_entry for c in commits] == [0]
    assert len(ds) == 20
    assert w.commit() is commits  # a second commit changes nothing
    with pytest.raises(giod.DataError, match="closed"):
        w.append(events[RAW])
    a = ds.writer()
    a.append(events[RAW])
    a.abort()
    assert len(ds) == 20  # the aborted events never became visible
    with pytest.raises(giod.DataError, match="closed"):
        a.append(events[RAW])


def test_writer_close_is_a_deprecated_commit(local_fed, model):
    ds = local_fed.create_dataset("w", model)
    w = ds.writer()
    w.append(synthetic.events(7, seed=2)[RAW])
    with pytest.warns(DeprecationWarning, match=r"Writer\.close\(\) is deprecated; use Writer\.commit\(\)"):
        w.close()
    assert len(ds) == 7


def test_pass_writer_abort_removes_its_files_and_discard_is_deprecated(local_fed):
    ds, events = _raw(local_fed, "p")
    site = local_fed.site()
    for how in ("abort", "discard"):
        p = ds.add_containers(program="reco")
        out = p.write(ds.databases()[0], events[:30][["tracks", "jets"]])
        paths = [s.path for s in out.containers]
        assert all(os.path.exists(site.local_path(path)) for path in paths)
        if how == "abort":
            p.abort()
        else:
            with pytest.warns(DeprecationWarning, match=r"PassWriter\.discard\(\).*PassWriter\.abort\(\)"):
                p.discard()
        assert not any(os.path.exists(site.local_path(path)) for path in paths)
        with pytest.raises(giod.DataError, match="committed or aborted"):
            p.write(ds.databases()[0], events[:30][["tracks", "jets"]])
    assert "reco" not in {c.name for c in ds.databases()[0].containers}


def test_a_pass_takes_the_writers_encoding_keywords(local_fed):
    """``compression=`` means the same to ``ds.add_containers`` as to ``ds.writer``: smaller files than none."""
    sizes = {}
    for compression in ("none", "zstd"):
        ds, events = _raw(local_fed, f"c{compression}")
        with ds.add_containers(compression=compression, cluster_events=10) as p:
            for db in ds.databases():
                p.write(db, events[db.first_entry:db.stop_entry][["tracks", "jets"]])
        assert p.options.compression == compression
        reco = [c for db in ds.databases() for c in db.containers if c.name == "reco"]
        assert [len(c.cluster_entries) for c in reco] == [3, 3]  # cluster_events reached the files
        sizes[compression] = sum(c.size for c in reco)
        assert ds.read(["jets.pt"]).jets.pt.to_list() == events.jets.pt.to_list()
    assert sizes["zstd"] < sizes["none"]


def test_a_pass_refuses_what_a_writer_refuses(local_fed):
    ds, _ = _raw(local_fed, "r")
    with pytest.raises(giod.ConfigError, match="nosuch"):
        ds.add_containers(compression="nosuch")
    with pytest.raises(giod.ConfigError, match="not both"):
        ds.add_containers(compression="lz4", options="x")
    with pytest.raises(giod.ConfigError, match="did you mean 'compression'"):
        ds.add_containers(compresion="lz4")


def test_extend_is_a_deprecated_add_containers(local_fed):
    ds, events = _raw(local_fed, "x")
    with pytest.warns(DeprecationWarning, match=r"Dataset\.extend\(\).*Dataset\.add_containers\(\)"):
        p = ds.extend(program="reco")
    with p:
        for db in ds.databases():
            p.write(db, events[db.first_entry:db.stop_entry][["tracks", "jets"]])
    assert ds.read(["tracks.pt"]).tracks.pt.to_list() == events.tracks.pt.to_list()
