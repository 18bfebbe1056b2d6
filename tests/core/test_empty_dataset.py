"""A dataset nothing was written to yet reads as no events, with the fields asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

import giod
import giod.distributed
from giod.testing import synthetic


def test_an_empty_dataset_reads_as_no_events_with_the_fields_asked_for(tmp_path: Path):
    with giod.open(tmp_path / "fed", create=True) as fed:
        ds = fed.create_dataset("fresh", synthetic.schema())
        for columns in (["ht", "njets"], ["jets.pt", "ht"], ["jets", "tracks"]):
            got = ds.read(columns)
            assert len(got) == 0
            assert got.fields == list(dict.fromkeys(c.split(".")[0] for c in columns))
        assert ds.select("ht > 1").read(["jets.pt"]).jets.fields == ["pt"]
        assert len(ds.read()) == 0 and set(ds.read().fields) >= {"hits", "jets", "ht"}
        assert len(ds.query("ht > 1", ["ht"])) == 0
        assert giod.distributed.map_selection(ds.select(), len, columns=["ht"], scheduler="sync") == 0
        with pytest.raises(giod.NotFound, match="nosuch"):
            ds.read(["nosuch"])
        # the empty answer has the types a written dataset gives
        empty = ds.read(["jets", "ht"])
        with ds.writer() as w:
            w.append(synthetic.events(20, seed=1))
        full = fed.dataset("fresh").read(["jets", "ht"])
        assert len(full) == 20 and str(empty.type.content) == str(full.type.content)


