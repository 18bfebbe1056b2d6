"""``Selection.map`` on a plain install: no dask, no cloudpickle.

The optional modules are hidden for the test (``None`` in ``sys.modules`` makes
their import fail as if they were not installed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import giod
import giod.distributed
from giod.distributed import map_selection
from giod.testing import synthetic

OPTIONAL = ("cloudpickle", "dask", "distributed", "dask_awkward")


@pytest.fixture
def plain(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OPTIONAL:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError):
        import cloudpickle  # noqa: F401


@pytest.fixture
def selection(tmp_path: Path):
    with giod.open(tmp_path / "fed", create=True) as fed:
        ds = fed.create_dataset("qcd", synthetic.schema())
        with ds.writer(database_events=100) as w:
            w.append(synthetic.events(300, seed=6))
        sel = ds.select("njets >= 1")
        yield sel, len(sel)


def test_the_serial_path_needs_neither_dask_nor_cloudpickle(plain, selection):
    sel, n = selection
    assert map_selection(sel, len, columns=["njets"], scheduler="sync") == n
    assert map_selection(sel, lambda chunk: len(chunk), columns=["njets"], scheduler="sync") == n
    assert map_selection(giod.Selection(sel.dataset, "false"), len, columns=["njets"], scheduler="sync") == 0


def test_worker_processes_take_what_plain_pickle_can_send(plain, selection):
    sel, n = selection
    assert map_selection(sel, len, columns=["njets"], scheduler="processes:1") == n

@pytest.mark.slow

def test_a_lambda_for_worker_processes_names_the_extra(plain, selection):
    sel, _ = selection
    with pytest.raises(giod.MissingDependency, match=r"pip install 'giod\[dask\]'"):
        map_selection(sel, lambda chunk: len(chunk), columns=["njets"], scheduler="processes:1")
    with pytest.raises(giod.MissingDependency, match=r"pip install 'giod\[dask\]'"):
        map_selection(sel, len, columns=["njets"], scheduler="localcluster:1")
