"""giod analyze --scheduler: the same histogram on every scheduler; the dashboard link on a cluster."""

from __future__ import annotations

import re
from pathlib import Path

import dask
from click.testing import CliRunner

from giod.cli import main

from .conftest import DATASET


def _count(output: str) -> int:
    match = re.search(r"([\d,]+) events in the histogram", output)
    assert match, output
    return int(match.group(1).replace(",", ""))


def test_analyze_on_each_scheduler(fed_path: Path, client, tmp_path: Path) -> None:
    runner = CliRunner()
    counts = []
    for scheduler in ("sync", "processes:2", client.scheduler.address):
        out = tmp_path / f"dijet-{len(counts)}.png"
        result = runner.invoke(main, ["analyze", "dijet", DATASET, "--where", "njets >= 2", "-o", str(out),
                                      "--scheduler", scheduler, "-f", str(fed_path)])
        assert result.exit_code == 0, result.output
        assert out.stat().st_size > 0
        counts.append(_count(result.output))
        assert ("Dask dashboard: http://127.0.0.1:" in result.output) == scheduler.startswith("tcp://")
    assert counts[0] > 0 and len(set(counts)) == 1


def test_a_bad_scheduler_is_one_clear_line(fed_path: Path) -> None:
    result = CliRunner().invoke(main, ["analyze", "dijet", DATASET, "--scheduler", "threads", "-f", str(fed_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: unknown scheduler 'threads': use sync, processes[:N], localcluster[:N] or tcp://HOST:PORT"]
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):  # nothing listens on port 9
        result = CliRunner().invoke(main, ["analyze", "dijet", DATASET, "--scheduler", "tcp://127.0.0.1:9",
                                           "-f", str(fed_path)])
    assert result.exit_code == 2 and result.output.startswith("error: cannot reach the Dask scheduler")
