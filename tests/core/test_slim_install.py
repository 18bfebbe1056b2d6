"""The core install is the store: nothing of the extras is needed to use a local federation.

Each check runs a child Python in which an import hook (a ``sys.meta_path`` finder) makes the
packages of the extras fail to import as if they were not installed. The store works there; a
part that needs an extra is one error line naming it, exit code 2.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

import giod
from giod.testing import synthetic

pytestmark = pytest.mark.slow  # a child Python per check, with every import of giod from source
SRC = Path(giod.__file__).resolve().parents[1]
#: What the extras bring (giod[server], giod[postgres], giod[plots], giod[display], giod[sql]), by top-level name.
EXTRAS = {
    "server": ("fastapi", "starlette", "uvicorn", "watchfiles"),
    "postgres": ("psycopg", "psycopg_binary", "psycopg_c"),
    "plots": ("matplotlib", "mplhep", "hist", "vector"),
    "display": ("plotly",),
    "sql": ("duckdb",),
}
HIDDEN = sorted(name for names in EXTRAS.values() for name in names)
#: The distributions each extra declares (those of the display beside the server's).
DECLARED = {"server": {"fastapi", "uvicorn", "watchfiles"}, "postgres": {"psycopg"},
            "plots": {"matplotlib", "mplhep", "hist", "vector"}, "display": {"plotly", "fastapi", "uvicorn"},
            "sql": {"duckdb"}}

HOOK = f"""
import importlib.abc, sys

HIDDEN = {HIDDEN!r}

class Hidden(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Hidden())
"""


def _child(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = cwd / "child.py"
    script.write_text(HOOK + textwrap.dedent(code))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC), "HOME": str(cwd)}
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def _giod(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return _child("import runpy\nrunpy.run_module('giod', run_name='__main__', alter_sys=True)\n",
                  *args, cwd=cwd)


def test_the_hook_hides_the_extras(tmp_path):
    done = _child("""
        import json
        hidden = []
        for name in HIDDEN:
            try:
                __import__(name)
            except ImportError:
                hidden.append(name)
        print(json.dumps(hidden))
    """, cwd=tmp_path)
    assert json.loads(done.stdout) == HIDDEN, done.stderr


def test_a_local_federation_needs_no_extra(tmp_path):
    done = _child("""
        import json, sys
        import numpy as np
        import giod
        from giod.testing import synthetic

        with giod.open("fed", create=True) as fed:
            ds = fed.create_dataset("qcd", synthetic.schema())
            events = synthetic.events(200, seed=3)
            with ds.writer(database_events=50) as w:
                w.append(events)
            sel = ds.select("njets >= 2")
            got = sel.read(["njets"])
            want = int(np.sum(np.asarray(events.njets) >= 2))
            loaded = sorted(m for m in sys.modules if m.partition(".")[0] in HIDDEN)
            print(json.dumps({"selected": len(sel), "read": len(got), "want": want,
                              "databases": len(ds.databases()), "loaded": loaded}))
    """, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["selected"] == result["read"] == result["want"] > 0
    assert result["databases"] == 4
    assert result["loaded"] == []


def test_the_command_line_needs_no_extra(tmp_path):
    done = _giod("--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "serve" in done.stdout and "analyze" in done.stdout
    done = _giod("init", "fed", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def federation(tmp_path: Path) -> Path:
    with giod.open(tmp_path / "fed", create=True) as fed:
        ds = fed.create_dataset("qcd", synthetic.schema())
        with ds.writer() as w:
            w.append(synthetic.events(50, seed=4))
    return tmp_path / "fed"


@pytest.mark.parametrize(("extra", "args"), [
    ("server", ["serve", "--port", "0"]),
    ("plots", ["analyze", "dijet", "qcd", "-o", "dijet.png"]),
    ("postgres", ["ls", "-f", "postgresql://postgres@127.0.0.1:5432/giod_never_made"]),
    ("sql", ["sql", "qcd", "SELECT count(*) FROM jets"]),
])
def test_a_part_that_needs_an_extra_names_it(federation, extra, args):
    if "-f" not in args:
        args = [*args, "-f", str(federation)]
    done = _giod(*args, cwd=federation.parent)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert f"pip install 'giod[{extra}]'" in lines[0]
    assert not (federation.parent / "dijet.png").exists()


def test_the_api_raises_missing_dependency(tmp_path):
    done = _child("""
        import giod

        for target in ("postgresql://postgres@127.0.0.1:5432/giod_never_made",):
            try:
                giod.open(target)
            except giod.MissingDependency as exc:
                print(type(exc).__name__, isinstance(exc, giod.GiodError), exc)
        try:
            import giod.server
        except giod.MissingDependency as exc:
            print(type(exc).__name__, isinstance(exc, giod.GiodError), exc)
        try:
            from giod.analysis import plots
            plots.pyplot()
        except giod.MissingDependency as exc:
            print(type(exc).__name__, isinstance(exc, giod.GiodError), exc)
    """, cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert len(lines) == 3, (done.stdout, done.stderr)
    for line, extra in zip(lines, ("postgres", "server", "plots"), strict=True):
        assert line.startswith("MissingDependency True ") and f"pip install 'giod[{extra}]'" in line, line


def _names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in requirements}


def test_pyproject_declares_the_core_and_the_extras():
    project = tomllib.loads((SRC.parent / "pyproject.toml").read_text())["project"]
    core = _names(project["dependencies"])
    extras = project["optional-dependencies"]
    assert {"fsspec", "urllib3", "uproot", "google-crc32c"} <= core
    for extra, names in DECLARED.items():
        assert names <= _names(extras[extra]), extra
        assert not names & core, f"{extra}: {sorted(names & core)} also in the core"
    assert extras["all"] == ["giod[server,postgres,plots,display,sql]"]
