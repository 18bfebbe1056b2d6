"""``giod export-event``: one event as Phoenix (or scene) JSON, from the command line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from giod.cli import main
from giod.display import phoenix_event


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_export_event_writes_phoenix_json(sim_root: Path, sim, tmp_path: Path):
    out = tmp_path / "event.json"
    r = run("export-event", "sim", "1", "--format", "phoenix", "-o", str(out), "-f", str(sim_root))
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text()) == json.loads(json.dumps(phoenix_event(sim["sim"], 1)))


def test_export_event_to_stdout_and_as_scene(sim_root: Path):
    r = run("export-event", "sim", "0", "-f", str(sim_root))
    assert r.exit_code == 0
    (event,) = json.loads(r.stdout).values()
    assert event["entry"] == 0 and "Tracks" in event
    r = run("export-event", "sim", "0", "--format", "scene", "-f", str(sim_root))
    assert json.loads(r.stdout)["format"] == "giod-scene/1"


def test_export_event_bad_input_is_one_line_and_exit_2(sim_root: Path, tmp_path: Path):
    for args, words in [(["sim", "99"], "no entry 99"), (["nope", "0"], "nope"),
                        (["weights", "0"], "nothing the display draws")]:
        r = run("export-event", *args, "-f", str(sim_root))
        assert r.exit_code == 2, r.output
        assert r.output.startswith("error:") and words in r.output and r.output.count("\n") == 1
    r = run("export-event", "sim", "-3", "-f", str(sim_root))
    assert r.exit_code == 2  # click refuses a negative entry before giod sees it
    r = run("export-event", "sim", "0", "-o", str(tmp_path / "missing" / "x.json"), "-f", str(sim_root))
    assert r.exit_code == 2 and "cannot write" in r.output
