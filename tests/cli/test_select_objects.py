"""``giod select`` with selections over objects and counters."""

from __future__ import annotations

import re
from pathlib import Path

import awkward as ak
import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.testing import synthetic


@pytest.fixture
def fed_dir(tmp_path: Path) -> str:
    path = tmp_path / "fed"
    with giod.open(path, create=True) as fed:
        ds = fed.create_dataset("qcd", synthetic.schema())
        with ds.writer(database_events=100) as w:
            w.append(synthetic.events(250, seed=3))
    return str(path)


def test_select_counts_object_cuts(fed_dir: str):
    events = synthetic.events(250, seed=3)
    expected = int(ak.sum((ak.sum(events.jets.pt > 40, axis=1) >= 2) & (ak.num(events.cells, axis=1) > 90)))
    r = CliRunner().invoke(main, ["select", "qcd", "count(jets.pt > 40) >= 2 and ncells > 90", "--count",
                                  "-f", fed_dir])
    assert r.exit_code == 0, r.output
    assert int(re.match(r"([\d,]+) of", r.output).group(1).replace(",", "")) == expected > 0


def test_select_prints_the_events_that_pass(fed_dir: str):
    events = synthetic.events(250, seed=3)
    first = int(ak.argmax(ak.fill_none(ak.firsts(events.jets.pt) > 80, False)))
    r = CliRunner().invoke(main, ["select", "qcd", "jets.pt[0] > 80", "--columns", "event", "--limit", "1",
                                  "-f", fed_dir])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[1] == f"{first}: {{'event': {int(events.event[first])}}}"


@pytest.mark.parametrize(("expression", "says"), [
    ("count(jet.pt > 30) >= 2", "unknown collection 'jet'; did you mean 'jets'?"),
    ("max(jets.energy) > 3", "unknown jets field 'energy'"),
    ("jets.pt > 30", "say how many objects must pass"),
])
def test_bad_object_expressions_are_one_line_and_exit_2(fed_dir: str, expression: str, says: str):
    r = CliRunner().invoke(main, ["select", "qcd", expression, "-f", fed_dir])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0]


def test_counters_are_columns_of_select(fed_dir: str):
    events = synthetic.events(250, seed=3)
    r = CliRunner().invoke(main, ["select", "qcd", "nhits > 0", "--columns", "event,nhits", "--limit", "1",
                                  "-f", fed_dir])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[1] == f"0: {{'event': {int(events.event[0])}, 'nhits': {len(events.hits[0])}}}"
