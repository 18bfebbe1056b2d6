"""docs/catalog.md must stay true: its Python example runs, and its module table is complete."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "catalog.md"
PACKAGE = Path(__file__).resolve().parents[2] / "src" / "giod" / "catalog"


def test_the_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    example = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert example is not None
    monkeypatch.chdir(tmp_path)
    scope = {"yaml_text": "collections: {}\n", "fingerprint": "sha256:docs"}
    exec(compile(example.group(1), str(DOC), "exec"), scope)
    scope["catalog"].close()
    printed = capsys.readouterr().out.split("\n")
    assert printed[:2] == [
        "raw.tracker giod.physics.simulate 0.3 {'seed': 17}",
        "reco giod.physics.reconstruct 0.3 {'jet_radius': 0.4}",
    ]
    assert (tmp_path / "fed" / "catalog.db").exists()


def test_every_module_is_in_the_code_table() -> None:
    text = DOC.read_text()
    table = text[text.index("## Code") :]
    modules = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert modules == set(re.findall(r"^\| `(\w+\.py)` \|", table, re.M))
    steps = {p.stem for p in (PACKAGE / "migrations").glob("v*.py")}
    assert steps == set(re.findall(r"\| `(v\d{4}_\w+)` \|", text))
