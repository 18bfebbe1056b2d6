"""docs/exchange.md stays true: its Python example runs, and it is in the README's list."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import giod
from tests.exchange.conftest import make_daq

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "exchange.md"


def test_the_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                          ) -> None:
    monkeypatch.chdir(tmp_path)
    make_daq(tmp_path / "daq").close()
    giod.open(tmp_path / "reco", create=True).close()
    example = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert example is not None
    scope: dict[str, object] = {}
    exec(compile(example.group(1), str(DOC), "exec"), scope)
    assert "3 databases (120 events) copied" in capsys.readouterr().out
    reco = giod.open(tmp_path / "reco")
    assert reco.datasets() == ["dijet", "raw"]
    assert len(reco.dataset("dijet")) == len(giod.open(tmp_path / "daq").dataset("raw").select("njets >= 2"))


def test_the_docs_are_listed() -> None:
    assert "`docs/exchange.md`" in (ROOT / "README.md").read_text()
    cli = (ROOT / "docs" / "cli.md").read_text()
    for command in ("giod copy", "giod replicator [--once] [--interval S] [--streams N] [--follow]",
                    "giod bench propagate"):
        assert command in cli
