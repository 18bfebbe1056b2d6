"""Bad input on the command line, whoever notices it (click or giod): one ``error:`` line and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import giod
from giod.cli import main
from giod.testing import synthetic


@pytest.fixture(scope="module")
def fed_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """qcd holds databases 1..3, ttbar databases 4..5."""
    path = tmp_path_factory.mktemp("errors") / "fed"
    fed = giod.open(path, create=True)
    for name, n in (("qcd", 250), ("ttbar", 150)):
        with fed.create_dataset(name, synthetic.schema()).writer(database_events=100, program="test") as w:
            w.append(synthetic.events(n, seed=3))
    fed.close()
    return str(path)


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def one_error_line(r: Result) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    return lines[0]


def test_show_database_of_another_dataset_is_refused_naming_both(fed_dir: str) -> None:
    qcd_db = giod.open(fed_dir).dataset("qcd").databases()[0].id
    line = one_error_line(run("show", "ttbar", "--database", str(qcd_db), "-f", fed_dir))
    assert f"database {qcd_db}" in line and "qcd" in line and "ttbar" in line


def test_show_database_of_the_dataset_itself_traces_it(fed_dir: str) -> None:
    db = giod.open(fed_dir).dataset("ttbar").databases()[0]
    r = run("show", "ttbar", "--database", str(db.id), "-f", fed_dir)
    assert r.exit_code == 0, r.output
    assert r.output.startswith(f"db{db.id}: {db.n_events} events")


def test_show_database_not_yet_in_the_dataset_at_the_version_asked(fed_dir: str) -> None:
    ds = giod.open(fed_dir).dataset("ttbar")
    last = ds.databases()[-1]
    line = one_error_line(run("show", "ttbar", "--database", str(last.id), "--version",
                              str(last.created_version - 1), "-f", fed_dir))
    assert f"database {last.id}" in line and f"version {last.created_version - 1}" in line


@pytest.mark.parametrize(("args", "says"), [
    (["schema", "check", "missing.yaml"], "missing.yaml"),
    (["schema", "check", "model.yaml", "--old", "missing-old.yaml"], "missing-old.yaml"),
    (["ls", "--nosuch"], "--nosuch"),
    (["show"], "DATASET"),
    (["nosuchcommand"], "nosuchcommand"),
    (["export", "qcd", "--format", "csv", "-o", "x.csv"], "csv"),
    (["select", "qcd", "--limit", "many"], "many"),
    (["export-event", "qcd", "-1"], "-1"),
    (["import", "missing.root", "--dataset", "x"], "missing.root"),
    (["serve", "--certfile", "missing.pem", "--keyfile", "missing.pem"], "missing.pem"),
    (["--nosuch", "ls"], "--nosuch"),
])
def test_usage_errors_and_missing_files_are_one_error_line(fed_dir: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, args: list[str],
                                                          says: str) -> None:
    monkeypatch.chdir(tmp_path)
    synthetic_model = Path(synthetic.__file__).with_name("synthetic.yaml")
    (tmp_path / "model.yaml").write_text(synthetic_model.read_text())
    monkeypatch.setenv("GIOD_FEDERATION", fed_dir)
    line = one_error_line(run(*args))
    assert says in line


def test_help_and_version_still_exit_0() -> None:
    assert run("--help").exit_code == 0
    assert run("ls", "--help").exit_code == 0
    assert run("--version").exit_code == 0


def test_the_installed_command_prints_the_same_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "giod", "schema", "check", str(tmp_path / "missing.yaml")],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"error: no such file: {tmp_path / 'missing.yaml'}"]
    assert done.stdout == ""
