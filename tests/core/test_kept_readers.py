"""The readers a store keeps open (``Store._read_kept``): a local file's first read of a few events opens it once,
the router's reader kept for the next reads with its memory map mapped afresh, and reads through it give what the
file holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pytest
from tests.counting import counted

import giod
from giod.storage import container
from giod.storage.formats.arrow import reader as arrow_reader
from giod.testing import synthetic

EVENTS = synthetic.events(600, seed=5, hits=4, cells=0, tracks=0, jets=3)
HT = ak.to_numpy(EVENTS["ht"])
CUT = float(np.sort(HT)[-13])  # a few events of each database


def _read(ds: Any) -> list[Any]:
    return ak.to_list(ds.select(f"ht > {CUT!r}").read(["hits"]).hits)


@pytest.fixture
def fed(tmp_path: Path) -> Any:
    f = giod.open(tmp_path / "fed", create=True)
    ds = f.create_dataset("kept", synthetic.schema())
    with ds.writer(database_events=200, cluster_events=100) as w:
        w.append(EVENTS)
    yield f
    f.close()


def test_a_local_files_first_read_opens_it_once_and_the_next_reads_not_at_all(fed: Any,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    store = fed.store
    store._readers.clear()
    opened = counted(monkeypatch, container.ContainerReader, "of")
    ds = fed.dataset("kept")
    databases = len(ds.databases())
    want = ak.to_list(EVENTS["hits"][HT > CUT])
    assert _read(ds) == want
    hits = [r for key, r in store._readers.items() if key[0].endswith("raw.tracker.arrow")]
    assert len(hits) == databases  # each database's file of hits kept
    assert opened[0] == len(store._readers)  # each file read opened once (it was twice: the router's, one kept)
    before = opened[0]
    assert _read(ds) == want
    assert opened[0] == before  # read again through the kept readers


def test_a_kept_reader_holds_a_fresh_map_not_the_pages_its_read_touched(fed: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store = fed.store
    store._readers.clear()
    used: list[Any] = []
    real = arrow_reader.ArrowContainerReader.read

    def read(self: Any, *args: Any) -> Any:
        used.append((self, self._map))
        return real(self, *args)

    monkeypatch.setattr(arrow_reader.ArrowContainerReader, "read", read)
    ds = fed.dataset("kept")
    assert _read(ds) == ak.to_list(EVENTS["hits"][HT > CUT])
    kept = {id(r._reader._reader): r for r in store._readers.values()}  # the format's own readers
    assert used and all(id(r) in kept for r, _ in used)  # the readers that read are the ones kept
    assert all(r._map is not mapped and r._map.size == mapped.size for r, mapped in used)
