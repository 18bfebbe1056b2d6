"""A selection's plan through the dataset's merged tag index, numbered in one pass for all its databases, is
the plan each database's own index gives; a selection's text is parsed once for the next selections."""

from __future__ import annotations

from typing import Any

import awkward as ak
import numpy as np
import pytest
from tests.counting import counted

import giod
from giod.read import selection
from giod.testing import synthetic

FIELDS = ["hits", "run", "event", "njets", "ntracks", "ht", "lead_pt"]
EVENTS = synthetic.events(2_000, seed=11, hits=4, cells=0, tracks=0, jets=4)[FIELDS]


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Any:
    f = giod.open(tmp_path_factory.mktemp("plan") / "fed", create=True)
    d = f.create_dataset("plan", synthetic.schema())
    with d.writer(database_events=200, cluster_events=100) as w:
        w.append(EVENTS)
    yield d
    f.close()


@pytest.mark.parametrize("share", [0.002, 0.02, 0.08])
def test_the_merged_plan_is_each_databases_own(ds: Any, share: float) -> None:
    ht = ak.to_numpy(EVENTS["ht"])
    cut = float(np.sort(ht)[-int(share * len(ht)) - 1])
    expr = f"ht > {cut!r}"
    own = ds.select(expr).plan()  # the first selection on ht here may ask each database
    merged = ds.select(expr).plan()  # the next builds (or uses) the merged index
    assert [(db.id, None if s is None else s.tolist()) for db, s in merged] == \
        [(db.id, None if s is None else s.tolist()) for db, s in own]
    assert np.array_equal(np.concatenate([s + db.first_entry for db, s in merged]), np.flatnonzero(ht > cut))


def test_a_selections_text_is_parsed_once(ds: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counted(monkeypatch, selection, "parse")
    selection._parsed.cache_clear()
    text = "ht > 123.5 and njets >= 2"
    first = ds.select(text)
    assert len(ds.select(text)) == len(first)
    assert calls[0] == 1
    ds.select("ht > 124.5")
    assert calls[0] == 2
    with pytest.raises(giod.GiodError):
        ds.select("ht >")  # an error is not kept: raised each time
    with pytest.raises(giod.GiodError):
        ds.select("ht >")
    assert calls[0] == 4
