"""giod bench tape, small: planned staging mounts each cartridge once, one-at-a-time mounts more, results match."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from giod.cli import main


@pytest.mark.slow
def test_bench_tape_small(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["bench", "tape", "--databases", "20", "--events", "10", "--cartridges", "20",
                                       "--drives", "2", "-o", str(tmp_path), "--workdir", str(tmp_path / "w")])
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "bench-tape.json").read_text())["rows"]
    by = {(r["job"], r["mode"]): r for r in rows}
    for job in ("select", "map"):
        planned, alone = by[(job, "planned")], by[(job, "one at a time")]
        assert planned["identical"] and alone["identical"]
        assert planned["reads"] > 0 and alone["reads"] > 0  # each run a job of its own: nothing kept spares a read
        assert planned["mounts"] == planned["cartridges"] <= 20
        assert alone["mounts"] > planned["mounts"] and alone["tape_s"] > planned["tape_s"]
        assert planned["ratio_unmounts"] == pytest.approx(1.0, abs=0.35)
    moved = by[("move to tape", "queued, flushed")]  # written from the queue: a mount per cartridge, in drive time
    assert moved["mounts"] == moved["cartridges"] == 20 and moved["tape_s"] >= moved["limit_s"] > 0
    bad = CliRunner().invoke(main, ["bench", "tape", "--databases", "2", "--cartridges", "20"])
    assert bad.exit_code == 2 and "--cartridges" in bad.output
