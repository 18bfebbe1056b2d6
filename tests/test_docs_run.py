"""The README's and the docs' code blocks run as written, and the README lists every doc and benchmark.

Each file's ``python`` and ``sh`` blocks run in order in one fresh directory
(the repository's ``examples/`` beside them), python blocks sharing one
namespace (blocks written as ``>>>`` sessions have their outputs checked),
shell blocks under ``bash -eu`` with ``giod`` on the PATH. A block
that cannot run here (a server that runs until interrupted, a file not
shipped) says so on the line before its fence::

    <!-- not run: serves until interrupted -->

A block that needs the CMS open-data files runs where they are (as
``../shared/data`` from the directory it runs in, as beside the repository),
and its doc's test skips without them (fails under ``CI=true``)::

    <!-- needs the CMS open-data files -->
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOT_RUN = re.compile(r"^<!--\s*not run:\s*\S.*-->$")
NEEDS_DATA = re.compile(r"^<!--\s*needs the CMS open-data files\b.*-->$")
DATA = ROOT.parent / "shared" / "data"
LANGUAGES = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "shell": "sh"}
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass
class Block:
    language: str  # "python" or "sh"
    code: str
    line: int
    run: bool
    needs_data: bool = False


def blocks(text: str) -> list[Block]:
    """The fenced python and shell blocks of a Markdown text, with whether each is to run."""
    found: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = re.fullmatch(r"(`{3,})(\w*)\s*", lines[i])
        if match is None:
            i += 1
            continue
        fence, language, start = match.group(1), match.group(2), i
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i])
            i += 1
        i += 1
        if language in LANGUAGES:
            before = next((line.strip() for line in reversed(lines[:start]) if line.strip()), "")
            found.append(Block(LANGUAGES[language], "\n".join(body) + "\n", start + 1,
                               not NOT_RUN.match(before), bool(NEEDS_DATA.match(before))))
    return found


def test_blocks_and_markers_are_found() -> None:
    text = "a\n<!-- not run: needs a server -->\n```sh\ngiod serve\n```\n\n```python\nx = 1\n```\n```text\nno\n```\n"
    assert blocks(text) == [Block("sh", "giod serve\n", 3, False), Block("python", "x = 1\n", 7, True)]
    text = "<!-- needs the CMS open-data files -->\n```sh\ngiod import x.root\n```\n"
    assert blocks(text) == [Block("sh", "giod import x.root\n", 2, True, True)]


def _runnable(path: Path) -> list[Block]:
    return [b for b in blocks(path.read_text()) if b.run]


# Only the docs that have a block to run: a doc of prose and tables is not a skipped test.
RUNNABLE = [p for p in DOCS if _runnable(p)]


def _giod_on_path(bin_dir: Path) -> dict[str, str]:
    bin_dir.mkdir()
    wrapper = bin_dir / "giod"
    call = "from giod.cli import main; main(prog_name='giod')"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "{call}" "$@"\n')
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIOD_")}
    src = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    return env


def _params() -> list[Any]:
    """One test per doc with a block to run; a doc with blocks on the CMS files has a second,
    slow one that runs every block, those included."""
    params: list[Any] = []
    for path in RUNNABLE:
        name = path.relative_to(ROOT).as_posix()
        if any(not b.needs_data for b in _runnable(path)):
            params.append(pytest.param(path, False, id=name))
        if any(b.needs_data for b in _runnable(path)):
            heavy = [pytest.mark.rootdata, pytest.mark.slow, pytest.mark.timeout(900)]  # minutes of simulation
            params.append(pytest.param(path, True, id=f"{name}+data", marks=heavy))
    return params


@pytest.mark.parametrize(("path", "with_data"), _params())
def test_code_blocks_run(path: Path, with_data: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runnable = [b for b in _runnable(path) if with_data or not b.needs_data]
    if with_data and not DATA.is_dir():
        reason = f"{path.name}: the CMS open-data files are not in {DATA}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: they are required)")
        pytest.skip(reason)
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")
    if with_data:  # where the docs find the files: ../shared/data, as beside the repository
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared" / "data").symlink_to(DATA)
    env = _giod_on_path(tmp_path / "bin")
    monkeypatch.chdir(work)
    for key in [k for k in os.environ if k.startswith("GIOD_")]:
        monkeypatch.delenv(key)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in runnable:
        where = f"{path.name}:{block.line}"
        if block.code.lstrip().startswith(">>>"):
            _doctest(block.code, where, namespace)
        elif block.language == "python":
            exec(compile(block.code, where, "exec"), namespace)  # the repository's own docs
        else:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=300, check=False)
            assert done.returncode == 0, f"{where}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"


def _doctest(code: str, where: str, namespace: dict[str, object]) -> None:
    """A block written as an interactive session: its outputs are checked, as doctest does."""
    test = doctest.DocTestParser().get_doctest(code, namespace, where, where, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    runner.run(test, out=report.append, clear_globs=False)
    namespace.update(test.globs)  # the doctest ran on a copy: later blocks see its names
    assert runner.failures == 0, "".join(report)


def _readme() -> str:
    return (ROOT / "README.md").read_text()


def test_the_readme_lists_every_doc() -> None:
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"`docs/{p.name}`" not in _readme()]
    assert missing == []


def test_the_readme_lists_every_benchmark() -> None:
    from giod_bench.cli import bench

    listed = set(re.findall(r"^\| `giod bench ([a-z-]+)` \|", _readme(), re.MULTILINE))
    assert listed == set(bench.commands)


def test_the_tour_model_is_the_one_the_readme_loads() -> None:
    from giod.schema import Schema

    assert 'Schema.from_yaml("examples/model.yaml")' in _readme()
    schema = Schema.from_yaml((ROOT / "examples" / "model.yaml").read_text())
    assert set(schema.collections) == {"hits", "tracks", "jets"} and set(schema.tags) == {"njets", "ht"}
