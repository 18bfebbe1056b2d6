"""A home federation whose dataset ``qcd`` can move to a nearline site ``archive`` (a tape library on disk)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import awkward as ak
import pytest

import giod
from giod.read import tagindex
from giod.testing import synthetic

EVENTS = 400
PER_DATABASE = 25  # 16 databases


@pytest.fixture(autouse=True)
def _small_databases_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The databases here hold 25 events, less than a block of the tag index, which would leave them
    without one (``tagindex.worth_writing``): blocks of 8 positions give each its index, a file these tests
    follow to tape and back."""
    monkeypatch.setattr(tagindex, "BLOCK", 8)


def expected_events() -> ak.Array:
    return synthetic.events(EVENTS, seed=5)


def tape_url(root: Path, **settings: object) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"time_scale": 0, "drives": 2, "write_pool": 4, **settings}.items())
    return f"tape://{root}?{query}"


@pytest.fixture
def fed(tmp_path: Path) -> Iterator[giod.Federation]:
    f = giod.open(tmp_path / "home", create=True)
    ds = f.create_dataset("qcd", synthetic.schema())
    with ds.writer(database_events=PER_DATABASE, cluster_events=25) as w:
        w.append(expected_events())
    f.add_site("archive", tape_url(tmp_path / "archive"), distance=10)
    yield f
    f.close()
