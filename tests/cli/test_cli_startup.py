"""The command line starts light, finds commands of other distributions, and holds no benchmark code.

``giod --help`` must answer fast, so ``import giod.cli`` loads none of the
array libraries; ``giod bench`` comes from the benchmarks distribution
through the ``giod.commands`` entry-point group, and says how to install it
where it is missing.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import giod.cli.base
from giod.cli import BENCH_MISSING, PLUGIN_GROUP, main

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
HEAVY = ("awkward", "pyarrow", "numpy", "pandas", "matplotlib", "numba", "dask", "sqlalchemy")


def _python(code: str, *path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (*path, SRC))}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def test_importing_the_cli_loads_no_array_library() -> None:
    done = _python(
        "import sys, giod.cli\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


def test_help_lists_every_command_without_loading_the_heavy_ones() -> None:
    done = _python(
        "import sys\nfrom giod.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        f"print('LOADED', ' '.join(m for m in {(*HEAVY, 'giod_bench')!r} if m in sys.modules))"
    )
    assert done.returncode == 0, done.stderr
    out, loaded = done.stdout.rsplit("LOADED", 1)
    for name in ("demo", "bench", "init", "select", "serve", "replicate"):
        assert f"\n  {name} " in out, name
    assert loaded.split() == []


def test_python_dash_m_giod_is_the_giod_command() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-m", "giod", "--help"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: giod ")
    wrong = subprocess.run([sys.executable, "-m", "giod", "selcet"], env=env, capture_output=True, text=True,
                           timeout=120, check=False)
    assert wrong.returncode == 2 and "select" in wrong.stderr  # a typo: one line, a suggestion, exit 2


def test_commands_of_other_distributions_come_from_the_entry_point_group(tmp_path: Path) -> None:
    # a real distribution on the path: metadata with an entry point, and the module it names
    dist = tmp_path / "giod_hello-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: giod-hello\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{PLUGIN_GROUP}]\nhello = giod_hello:hello\n")
    (tmp_path / "giod_hello.py").write_text(
        "import click\n\n@click.command()\n@click.argument('who')\n"
        "def hello(who):\n    '''Say hello to WHO.'''\n    click.echo(f'hello {who}')\n"
    )
    done = _python(
        "from giod.cli import main\n"
        "for args in (['hello', 'giod'], ['--help']):\n"
        "    try:\n        main(args)\n    except SystemExit as e:\n        assert e.code == 0, e.code\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("hello giod\n")
    assert "hello  " in done.stdout and "Say hello to WHO." in done.stdout


@pytest.mark.parametrize("args", [["bench"], ["bench", "read", "--events", "10"], ["bench", "--help"]])
def test_bench_missing_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    # a giod without the benchmarks distribution: no entry point, no command registered
    monkeypatch.setattr(giod.cli.base, "plugin_commands", dict)
    monkeypatch.setattr(main, "commands", {k: v for k, v in main.commands.items() if k != "bench"})
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {BENCH_MISSING}"
    assert "pip install -e ./benchmarks" in BENCH_MISSING


def test_bench_is_the_benchmarks_distribution() -> None:
    from giod_bench.cli import bench

    result = CliRunner().invoke(main, ["bench", "--help"])
    assert result.exit_code == 0, result.output
    assert main.get_command(click_context(), "bench") is bench
    for name in ("daq", "read", "select", "catalog", "granularity", "wan", "replicate", "proxy", "display"):
        assert f"\n  {name} " in result.output, name


def click_context() -> object:
    import click

    return click.Context(main)


def test_the_library_holds_no_benchmark_code() -> None:
    package = SRC / "giod"
    assert not (package / "bench").exists()
    offenders = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(SRC)}: {n}" for n in names if n.split(".")[0] == "giod_bench"]
    assert offenders == []
