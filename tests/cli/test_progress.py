"""Progress where the output is not a terminal: a line per stage, with its count and time; none on failure."""

from __future__ import annotations

import io
import re

import pytest

from giod.cli import progress as module
from giod.cli.progress import PlainProgress, progress_bar


def test_off_a_terminal_each_stage_is_one_line_with_its_count_and_time() -> None:
    out = io.StringIO()
    with PlainProgress(out) as bar:
        first = bar.add_task("generate + simulate + store", total=1000)
        for _ in range(4):
            bar.advance(first, 250)
        second = bar.add_task("reconstruct (2 processes)", total=1000)
        bar.advance(second, 600)  # the next stage, or the end of the block, ends it
        third = bar.add_task("importing x.root", total=None)
        bar.update(third, completed=200, total=200)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert re.fullmatch(r"generate \+ simulate \+ store: 1,000 of 1,000 in \d+\.\d s", lines[0])
    assert re.fullmatch(r"reconstruct \(2 processes\): 600 of 1,000 in \d+\.\d s", lines[1])
    assert re.fullmatch(r"importing x\.root: 200 of 200 in \d+\.\d s", lines[2])


def test_a_long_stage_says_how_far_it_is_while_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "EVERY", -1.0)  # every update is "long enough since the last line"
    out = io.StringIO()
    with PlainProgress(out) as bar:
        task = bar.add_task("store raw events", total=3)
        bar.advance(task)
        bar.advance(task)
        bar.advance(task)
    lines = out.getvalue().splitlines()
    assert [re.sub(r"\d+(\.\d)? s", "T s", ln) for ln in lines] == [
        "store raw events: 1 of 3, T s so far", "store raw events: 2 of 3, T s so far",
        "store raw events: 3 of 3 in T s"]


def test_a_failed_stage_prints_nothing_so_the_error_stays_one_line() -> None:
    out = io.StringIO()
    with pytest.raises(ValueError), PlainProgress(out) as bar:
        task = bar.add_task("importing bad.root", total=None)
        bar.update(task, completed=0, total=100)
        raise ValueError("the file is corrupt")
    assert out.getvalue() == ""


def test_a_pipe_gets_the_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert isinstance(progress_bar(), PlainProgress)
