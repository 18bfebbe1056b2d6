"""``giod select``: constant selections count right; bad expressions and limits exit 2 in one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.testing import synthetic

EVENTS = 250


@pytest.fixture(scope="module")
def fed_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("select") / "fed"
    with giod.open(path, create=True) as fed:
        ds = fed.create_dataset("qcd", synthetic.schema())
        with ds.writer(database_events=100) as w:
            w.append(synthetic.events(EVENTS, seed=3))
        fed.create_dataset("fresh", synthetic.schema())
    return str(path)


def _selected(output: str) -> int:
    found = re.match(r"([\d,]+) of ([\d,]+) events selected", output)
    assert found, output
    return int(found.group(1).replace(",", ""))


@pytest.mark.parametrize("expression", ["false", "1 > 2", "not true", "njets > 1 and false"])
def test_a_false_selection_selects_nothing(fed_dir: str, expression: str):
    for extra in (["--count"], ["--columns", "ht,njets"]):
        r = CliRunner().invoke(main, ["select", "qcd", expression, *extra, "-f", fed_dir])
        assert r.exit_code == 0, r.output
        assert _selected(r.output) == 0 and "(0 databases read)" in r.output
        assert len(r.output.splitlines()) == 1  # no event printed


@pytest.mark.parametrize("expression", ["true", "not false", "2 > 1"])
def test_a_true_selection_selects_everything(fed_dir: str, expression: str):
    r = CliRunner().invoke(main, ["select", "qcd", expression, "--count", "-f", fed_dir])
    assert r.exit_code == 0 and _selected(r.output) == EVENTS


@pytest.mark.parametrize("args", [
    ["select", "qcd", "1 % 0 == 0"],
    ["select", "qcd", "ht / (2 - 2) > 1", "--count"],
    ["select", "qcd", "ht > 0", "--limit", "-1"],
    ["select", "qcd", "--limit", "-5", "--count"],
])
def test_bad_input_is_one_line_and_exit_2(fed_dir: str, args: list[str]):
    r = CliRunner().invoke(main, [*args, "-f", fed_dir])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.output
    assert ("by zero" in lines[0]) != ("--limit" in lines[0])


def test_limit_zero_prints_no_event(fed_dir: str):
    r = CliRunner().invoke(main, ["select", "qcd", "ht > 0", "--limit", "0", "-f", fed_dir])
    assert r.exit_code == 0 and len(r.output.splitlines()) == 1


def test_an_empty_dataset_selects_nothing(fed_dir: str):
    r = CliRunner().invoke(main, ["select", "fresh", "ht > 1", "--columns", "ht,jets.pt", "-f", fed_dir])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("0 of 0 events selected")


@pytest.mark.parametrize(("dataset", "expression"), [("qcd", "false"), ("qcd", "njets < 0"), ("fresh", "true")])
def test_no_selected_event_still_writes_the_parquet_file(tmp_path: Path, fed_dir: str, dataset: str,
                                                         expression: str):
    import pyarrow.parquet as pq

    out = tmp_path / "none.parquet"
    r = CliRunner().invoke(main, ["select", dataset, expression, "--columns", "ht,jets.pt", "-o", str(out),
                                  "-f", fed_dir])
    assert r.exit_code == 0, r.output
    table = pq.read_table(out)
    assert table.num_rows == 0 and table.column_names == ["ht", "jets"]


@pytest.mark.parametrize("args", [
    ["select", "qcd", ""],
    ["select", "qcd", "  ", "--count"],
    ["export", "qcd", "--where", "", "-o", "out.parquet"],
    ["analyze", "dijet", "qcd", "--where", " ", "-o", "out.png"],
])
def test_a_blank_expression_is_refused_not_read_as_every_event(fed_dir: str, args: list[str], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, [*args, "-f", fed_dir])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: empty expression"), r.output
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("select", ["", "  "])
def test_copy_refuses_a_blank_select_before_it_makes_anything(fed_dir: str, tmp_path: Path, select: str):
    giod.open(tmp_path / "dst", create=True).close()
    r = CliRunner().invoke(main, ["copy", "qcd", "--from", fed_dir, "--to", str(tmp_path / "dst"),
                                  "--select", select])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: empty expression"), r.output
    assert giod.open(tmp_path / "dst").datasets() == []
