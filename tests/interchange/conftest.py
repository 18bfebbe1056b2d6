"""Fixtures: the CMS open-data files beside the repository, and small trees made here.

The open-data files live in ``shared/data`` next to the repository and are
never copied into it. Without them the tests that need them skip, except
under ``CI=true``, where a missing file is a failure.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pytest
import uproot

from giod.interchange import TreeLayout, inspect_tree, iterate_events

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
TTBAR = "nanoAOD_2015_CMS_Open_Data_ttbar.root"
HZZ = "uproot-HZZ.root"
ZMUMU = "uproot-Zmumu.root"


def open_data(name: str) -> Path:
    """Path of one open-data file, or skip (fail under CI=true) when it is absent."""
    path = DATA / name
    if not path.is_file():
        reason = f"CMS open-data file {name} not found in {DATA.resolve()}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the file is required)")
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def ttbar() -> Path:
    return open_data(TTBAR)


@pytest.fixture(scope="session")
def hzz() -> Path:
    return open_data(HZZ)


@pytest.fixture(scope="session")
def zmumu() -> Path:
    return open_data(ZMUMU)


# Opening the NanoAOD tree (about 950 branches) is the slow part: do it once.


@pytest.fixture(scope="session")
def ttbar_layout(ttbar: Path) -> TreeLayout:
    return inspect_tree(ttbar)


@pytest.fixture(scope="session")
def ttbar_events(ttbar: Path, ttbar_layout: TreeLayout) -> ak.Array:
    """The whole file as giod events, read in two chunks."""
    return ak.concatenate(list(iterate_events(ttbar, ttbar_layout, step_size=100)))


@dataclass(frozen=True)
class RawTree:
    """What uproot alone reads from a tree: branch -> counter branch, and some arrays."""

    counters: dict[str, str | None]
    arrays: ak.Array
    num_entries: int


RAW_TTBAR = [
    "Jet_pt", "Muon_eta", "Electron_charge", "Jet_muonIdx1", "Muon_jetIdx",
    "GenPart_genPartIdxMother", "nMuon", "nJet", "nGenPart", "run", "event", "MET_pt",
]  # fmt: skip


@pytest.fixture(scope="session")
def ttbar_raw(ttbar: Path) -> RawTree:
    with uproot.open(ttbar) as f:
        tree = f["Events"]
        counters = {b.name: (b.count_branch.name if b.count_branch is not None else None) for b in tree.branches}
        return RawTree(counters, tree.arrays(RAW_TTBAR), tree.num_entries)


def _branch_type(values: Any) -> Any:
    if isinstance(values, ak.Array):
        return values.type.content
    arr = np.asarray(values)
    return arr.dtype if arr.ndim == 1 else np.dtype((arr.dtype, arr.shape[1:]))


def write_tree(path: Path, trees: dict[str, dict[str, Any]]) -> Path:
    """Write TTrees with uproot (``file[name] = {...}`` would make RNTuples)."""
    with uproot.recreate(path) as f:
        for name, branches in trees.items():
            f.mktree(name, {k: _branch_type(v) for k, v in branches.items()}).extend(branches)
    return path
