"""``giod bench recon`` and ``giod bench simulate`` at smoke-test sizes, and their timed replicas of the chain.

The benchmarks time the physics chain phase by phase with their own copies of
its steps; the replica tests check that those copies still do what the chain
does (the same stored events), so that the phase split describes the real pass.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import awkward as ak
import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.physics.chain import reconstruct_dataset, simulate_into
from giod_bench import recon, simulate

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _bench(tmp_path: Path, *args: str) -> tuple[dict[str, Any], str]:
    out, work = tmp_path / "results", tmp_path / "work"
    result = CliRunner().invoke(main, ["bench", *args, "--output", str(out), "--workdir", str(work)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads((out / f"bench-{args[0]}.json").read_text())
    assert (out / f"bench-{args[0]}.png").read_bytes().startswith(PNG_MAGIC)
    assert data["benchmark"] == args[0]
    assert not any(work.iterdir()), "the benchmark left data behind"
    return data, result.output


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _check_phases(phases: list[dict[str, Any]], names: list[str]) -> None:
    assert [p["phase"] for p in phases] == names
    for share in ("cpu_share", "wall_share"):
        assert sum(p[share] for p in phases) == pytest.approx(1.0)
        assert all(0 <= p[share] <= 1 for p in phases)
    for p in phases:
        assert _positive(p["wall_s"]) and _positive(p["cpu_s"]), p

@pytest.mark.slow

def test_recon_quick(tmp_path: Path) -> None:
    data, output = _bench(tmp_path, "recon", "--quick", "--events", "120")
    assert data["parameters"]["workers"] == [1, 2]
    assert data["parameters"]["databases"] == 2 * recon.DATABASES_PER_WORKER
    rows = data["results"]
    assert [(r["run"], r["workers"]) for r in rows] == [
        ("in memory (no I/O)", 1), ("giod pass", 1), ("giod pass", 2), ("giod pass, phases timed", 1)
    ]
    memory, one, two, timed = rows
    for r in rows:
        assert _positive(r["events_per_s"]) and _positive(r["median_s"]), r
        assert r["events_per_s"] == pytest.approx(120 / r["median_s"])
        assert r["vs_memory"] == pytest.approx(r["events_per_s"] / memory["events_per_s"])
    assert one["speed_up"] == pytest.approx(1.0)
    assert two["speed_up"] == pytest.approx(two["events_per_s"] / one["events_per_s"])
    # a pass with workers pays for starting them; one without pays nothing
    assert one["startup_s"] == 0 and _positive(two["startup_s"])

    phases = data["phases"]
    _check_phases(phases, list(recon.PHASES))
    io = sum(p["cpu_share"] for p in phases if p["io"])
    assert 0 < io < 1
    assert one["io_share"] == timed["io_share"] == pytest.approx(io)
    assert io == pytest.approx(1 - next(p["cpu_share"] for p in phases if p["phase"] == "reconstruct"))
    # the timed pass is the phases and nothing else
    assert sum(p["wall_s"] for p in phases) == pytest.approx(timed["median_s"], rel=0.2)
    assert "reconstruction pass" in output and "I/O share" in output

@pytest.mark.slow

def test_simulate_quick(tmp_path: Path) -> None:
    data, output = _bench(tmp_path, "simulate", "--quick", "--events", "100")
    names, missing = simulate.generators()
    assert data["parameters"]["generators"] == names
    rows = data["results"]
    assert [(r["generator"], r["run"]) for r in rows] == [
        (g, run) for g in names
        for run in ("simulate_into", "simulate_into, phases timed", "store only (already simulated)")
    ]
    for g in names:
        mine = [r for r in rows if r["generator"] == g]
        limit = mine[-1]["events_per_s"]
        assert mine[-1]["vs_storage"] == pytest.approx(1.0)
        for r in mine:
            assert _positive(r["events_per_s"]) and _positive(r["stored_mb"]) and _positive(r["mb_per_s"]), r
            assert r["vs_storage"] == pytest.approx(r["events_per_s"] / limit)
            assert r["kb_per_event"] == pytest.approx(1e3 * r["stored_mb"] / 100)
        _check_phases([p for p in data["phases"] if p["generator"] == g], list(simulate.PHASES))
    for note in missing:
        assert note in data["notes"]
    if "pythia" not in names:
        assert "pythia8mc is not installed" in output


def test_bad_workers_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["bench", "recon", "--workers", "one", "--output", str(tmp_path)])
    assert result.exit_code == 2
    assert "--workers" in result.output and "Traceback" not in result.output

@pytest.mark.slow

def test_timed_pass_writes_what_the_pass_writes(tmp_path: Path) -> None:
    from giod.physics.calibration import Calibration
    from giod.physics.detector import Detector

    with giod.open(tmp_path / "fed", create=True) as fed:
        ds = simulate_into(fed, recon.DATASET, 60, seed=5, database_events=25)
        reconstruct_dataset(ds, workers=1)
        passed = fed.dataset(recon.DATASET).read()
        phases = recon._timed_pass(fed, (Detector.load(), Calibration.load()))
        timed = fed.dataset(recon.DATASET).read()
    assert set(phases.cpu) == set(recon.PHASES)
    assert len(timed) == 60 and ak.sum(ak.num(timed.tracks)) > 0
    assert ak.to_list(timed[["tracks", "clusters", "jets", "njets", "ht", "met"]]) == ak.to_list(
        passed[["tracks", "clusters", "jets", "njets", "ht", "met"]]
    )


def test_timed_chain_stores_what_simulate_into_stores(tmp_path: Path) -> None:
    phases = recon.Phases()
    with giod.open(tmp_path / "a", create=True) as a, giod.open(tmp_path / "b", create=True) as b:
        simulate_into(a, "builtin", 50, seed=simulate.SEED, batch=simulate.BATCH, pthat_min=simulate.PTHAT_MIN)
        simulate._timed_chain(b, 50, "builtin", phases)
        columns = ["mcparticles", "tracker_hits", "calo_cells"]
        assert ak.to_list(b.dataset("builtin").read(columns)) == ak.to_list(a.dataset("builtin").read(columns))
        stored = b.dataset("builtin").summary()["bytes"]
    assert set(phases.wall) == set(simulate.PHASES)
    assert stored > 0
