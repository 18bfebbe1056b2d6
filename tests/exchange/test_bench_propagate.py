"""``giod bench propagate --quick``: the soak at smoke-test size, kills included, nothing lost or duplicated."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from giod.cli import main


def test_bench_propagate_quick(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["bench", "propagate", "--quick", "--seconds", "5", "--rate", "2",
                                    "-o", str(tmp_path), "--workdir", str(tmp_path / "work")])
    assert out.exit_code == 0, out.output
    result = json.loads((tmp_path / "bench-propagate.json").read_text())
    assert (tmp_path / "bench-propagate.png").stat().st_size > 0
    latency = {row["place"].split(" ")[0]: row for row in result["latency"]}
    soak = {row["what"]: row["value"] for row in result["soak"]}
    assert soak["databases committed"] >= 2
    for row in latency.values():  # every database reached both places
        assert row["lost"] == 0 and row["databases"] == soak["databases committed"]
        assert 0 < row["median"] <= row["max"]
    assert soak["duplicated at the analysis federation"] == 0
    assert soak["duplicate commits in the DAQ federation"] == 0
    assert soak["writer killed (SIGKILL) and restarted"] == 1
    assert soak["follower killed (SIGKILL) and restarted"] == 1
