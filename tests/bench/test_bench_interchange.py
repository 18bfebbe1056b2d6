"""``giod bench interchange`` at smoke-test size: the wide file is NanoAOD's layout, and every step is measured."""

from __future__ import annotations

import json
from pathlib import Path

import awkward as ak
import numpy as np
import pytest
import uproot
from click.testing import CliRunner

from giod.cli import main
from giod_bench import interchange

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
pytestmark = pytest.mark.rootdata


@pytest.fixture(scope="module")
def source() -> Path:
    if not interchange.SOURCE.is_file():
        pytest.skip(f"the CMS NanoAOD file is not at {interchange.SOURCE}")
    return interchange.SOURCE


@pytest.mark.slow  # uproot writes the metadata of 1,000 branches in time that grows with their square
def test_the_wide_file_has_nanoaods_counters_names_and_the_branches_asked_for(source: Path, tmp_path: Path) -> None:
    chunks = list(interchange.wide_chunks(300, branches=1_000, source=source))
    assert [len(next(iter(c.values()))) for c in chunks] == [300]
    path = tmp_path / "wide.root"
    interchange.write_wide(path, chunks)
    with uproot.open(path) as file, uproot.open(source) as real:
        tree, events = file["Events"], real["Events"]
        assert len(tree.branches) == 1_000 and tree.num_entries == 300
        jets = tree.arrays(["nJet", "Jet_pt"])
        assert ak.all(ak.num(jets.Jet_pt) == jets.nJet)  # the counter counts its collection
        kept = [b for b in events.keys() if b in tree]  # the real file's branches, same names and types
        assert len(kept) == len(events.keys())
        for name in ("Jet_pt", "Muon_tightId", "MET_pt", "run"):
            assert tree[name].interpretation == events[name].interpretation
        real_pt = set(np.round(ak.flatten(events["Jet_pt"].array()).to_numpy(), 1))
        drawn = np.round(ak.flatten(jets.Jet_pt).to_numpy(), 1)
        assert np.mean([v in real_pt for v in drawn]) > 0.5  # real values, smeared by 1e-3 only
    interchange.write_wide(path, list(interchange.wide_chunks(10, branches=50, source=source)))
    with uproot.open(path) as file:
        assert len(file["Events"].branches) == 50  # fewer than the real file: whole collections, then the rest


def test_bench_interchange_quick(source: Path, tmp_path: Path) -> None:
    out, work = tmp_path / "results", tmp_path / "work"
    args = ["bench", "interchange", "--quick", "--events", "200", "--branches", "40", "--repeat", "1",
            "--output", str(out), "--workdir", str(work)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "bench-interchange.json").read_text())
    assert (out / "bench-interchange.png").read_bytes().startswith(PNG_MAGIC)
    assert data["parameters"]["events"] == 200 and data["parameters"]["branches"] == 40
    steps = {r["step"]: r for r in data["results"]}
    assert set(steps) == {"uproot write", "uproot read", "giod import", "giod write", "giod read", "giod export",
                          "uproot read + giod write", "giod read + uproot write"}
    for row in steps.values():
        assert row["seconds"] > 0 and row["events_per_s"] == pytest.approx(200 / row["seconds"])
    bounds = {r["what"]: r for r in data["bounds"]}
    assert bounds["giod import"]["bound_s"] == pytest.approx(
        steps["uproot read"]["seconds"] + steps["giod write"]["seconds"])
    assert bounds["giod export"]["ratio"] == pytest.approx(
        steps["giod export"]["seconds"] / steps["giod read + uproot write"]["seconds"])
    assert "giod import" in result.output and "uproot read + giod write" in result.output
    assert not any(work.iterdir()), "the benchmark left data behind"
