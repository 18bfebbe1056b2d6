"""``giod select``: a bad limit exits 2 in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import giod
from giod.bench import synthetic
from giod.cli import main

EVENTS = 250


@pytest.fixture(scope="module")
def fed_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("select") / "fed"
    with giod.open(path, create=True) as fed:
        ds = fed.create_dataset("qcd", synthetic.schema())
        with ds.writer(database_events=100) as w:
            w.append(synthetic.events(EVENTS, seed=3))
    return str(path)


@pytest.mark.parametrize("args", [
    ["select", "qcd", "ht > 0", "--limit", "-1"],
    ["select", "qcd", "--limit", "-5", "--count"],
])
def test_bad_input_is_one_line_and_exit_2(fed_dir: str, args: list[str]):
    r = CliRunner().invoke(main, [*args, "-f", fed_dir])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.output
    assert "--limit" in lines[0]


def test_limit_zero_prints_no_event(fed_dir: str):
    r = CliRunner().invoke(main, ["select", "qcd", "ht > 0", "--limit", "0", "-f", fed_dir])
    assert r.exit_code == 0 and len(r.output.splitlines()) == 1
