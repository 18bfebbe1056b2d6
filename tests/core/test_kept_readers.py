"""A local file's first read opens the one reader the store keeps for it (not one for the router and another
to keep), and a file that does not read so still goes to the router, which fails over and marks it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pytest

import giod
from giod.storage.container import ContainerReader
from giod.testing import synthetic

FIELDS = ["hits", "run", "event", "njets", "ntracks", "ht", "lead_pt"]
EVENTS = synthetic.events(1_200, seed=8, hits=4, cells=0, tracks=0, jets=4)[FIELDS]


@pytest.fixture
def written(tmp_path: Path) -> Path:
    f = giod.open(tmp_path / "fed", create=True)
    ds = f.create_dataset("d", synthetic.schema())
    with ds.writer(database_events=300, cluster_events=100) as w:
        w.append(EVENTS)
    f.close()
    return tmp_path / "fed"


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Container readers opened, by file."""
    counts: Counter[str] = Counter()
    real = ContainerReader.of.__func__  # type: ignore[attr-defined]

    def counting(cls: Any, site: Any, container: Any) -> Any:
        counts[container.path] += 1
        return real(cls, site, container)

    monkeypatch.setattr(ContainerReader, "of", classmethod(counting))
    return counts


def test_each_local_file_is_opened_once(written: Path, opened: Counter[str]) -> None:
    f = giod.open(written)  # a new store: no reader kept yet
    ds = f.dataset("d")
    ht = ak.to_numpy(EVENTS["ht"])
    cut = float(np.sort(ht)[-20])
    want = ak.to_list(EVENTS["hits"][ht > cut])
    assert ak.to_list(ds.select(f"ht > {cut!r}").read(["hits"]).hits) == want
    assert opened and set(opened.values()) == {1}
    before = sum(opened.values())
    assert ak.to_list(ds.select(f"ht > {cut!r}").read(["hits", "njets"]).hits) == want
    assert ds.event(5).njets == EVENTS["njets"][5]
    assert all(n == 1 for n in opened.values())  # the files read before: from their kept readers
    assert sum(opened.values()) >= before
    f.close()


def test_a_damaged_file_still_goes_to_the_router_and_is_marked(written: Path) -> None:
    f = giod.open(written)
    ds = f.dataset("d")
    db = ds.databases()[1]
    rec = db.container("raw.tracker")
    assert rec is not None
    path = written.parent / "fed"  # the federation's own site holds the files under its root
    files = [p for p in path.rglob("*") if p.is_file() and p.as_posix().endswith(rec.path.split("/", 1)[-1])]
    assert len(files) == 1
    data = bytearray(files[0].read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)  # zeros over some cluster's bytes, the footer left whole
    files[0].write_bytes(bytes(data))
    with pytest.raises(giod.GiodError):
        ds.read(["hits"])
    states = [state for _, state in f.catalog.replicas(rec.id)]
    assert states and all(state != "good" for state in states)
    f.close()
