"""A collection's ``counter``: another name for ``n<collection>`` in selections and columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import awkward as ak
import pytest

import giod
from giod.errors import SchemaError
from giod.schema import Schema


def _model(counter: str | None, **extra: Any) -> Schema:
    jet: Any = {"type": "Jet", "counter": counter} if counter else "Jet"
    return Schema.from_dict({"schema_version": 1, "name": "m", "types": {"Jet": {"fields": {"pt": "float32"}}},
                             "collections": {"Jet": jet}, **extra})


def test_counter_selects_and_reads_as_n_collection(tmp_path: Path) -> None:
    with giod.open(tmp_path / "fed", create=True) as fed:
        ds = fed.create_dataset("jets", _model("NJet", tags={"run": "int32"}))
        pts = [[1.0, 2.0, 3.0], [], [4.0], [5.0, 6.0]]
        with ds.writer() as w:
            w.append({"Jet": [[{"pt": p} for p in ev] for ev in pts], "run": [1, 1, 1, 1]})
        assert len(ds.select("NJet >= 2")) == len(ds.select("nJet >= 2")) == 2
        assert ds.read(["NJet"]).NJet.tolist() == [3, 0, 1, 2]
        assert ak.sum(ds.select("NJet == 0 or run > 1").read(["Jet.pt"]).Jet.pt) == 0


def test_a_counter_clashing_with_a_name_is_refused() -> None:
    with pytest.raises(SchemaError, match="tag 'NJet' has the same name as the counter of collection 'Jet'"):
        _model("NJet", tags={"NJet": "int32"})
    with pytest.raises(SchemaError, match="already the name of a collection"):
        _model("Jet")


def test_changing_the_counter_is_harmless() -> None:
    assert _model("NJet").check_evolution(_model(None)) == ["changed the counter of collection Jet"]
