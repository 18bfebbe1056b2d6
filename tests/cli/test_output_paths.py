"""One rule for every command that writes output (docs/cli.md, "Output files").

The output may be new, its directory must exist (giod creates at most the
directory it is named, never missing parents); a place that takes no file is
one error line and exit code 2 before any work; nothing giod did not make in
the run is removed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import giod
from giod.cli import main
from giod.testing import synthetic

#: Each command that writes a file, with OUT where its output path goes.
FILE_COMMANDS = {
    "export": ["export", "qcd", "-o", "OUT"],
    "export-event": ["export-event", "qcd", "0", "-o", "OUT"],
    "select": ["select", "qcd", "njets >= 0", "-o", "OUT"],
    "sql": ["sql", "qcd", "SELECT count(*) AS n FROM jets", "-o", "OUT"],
    "analyze": ["analyze", "dijet", "qcd", "-o", "OUT"],
}
#: Each command that writes a directory of files.
DIR_COMMANDS = {
    "validate": ["validate", "qcd", "-o", "OUT"],
    "demo": ["demo", "--synthetic", "--events", "300", "--output", "OUT"],
}
ALL = {**FILE_COMMANDS, **DIR_COMMANDS}


@pytest.fixture(scope="module")
def fed_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("out") / "fed"
    with giod.open(path, create=True) as fed:
        with fed.create_dataset("qcd", synthetic.schema()).writer(database_events=100) as w:
            w.append(synthetic.events(200, seed=4))
    return str(path)


def run(fed_dir: str, command: str, out: Path | str, *extra: str) -> Result:
    args = [str(out) if a == "OUT" else a for a in ALL[command]]
    return CliRunner().invoke(main, [*args, *extra], env={"GIOD_FEDERATION": fed_dir})


def one_error_line(r: Result) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert "Traceback" not in r.output
    return lines[0]


@pytest.mark.parametrize("command", ALL)
def test_a_missing_parent_directory_is_refused_and_not_created(fed_dir: str, tmp_path: Path, command: str) -> None:
    out = tmp_path / "a" / "b" / "out"
    line = one_error_line(run(fed_dir, command, out))
    assert f"directory {tmp_path / 'a' / 'b'} does not exist" in line
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("place", ["/proc/giod-out", "/sys/giod-out", "/proc/self/giod/out"])
@pytest.mark.parametrize("command", ALL)
def test_a_special_location_is_one_error_line(fed_dir: str, command: str, place: str) -> None:
    mount = Path("/", place.split("/")[1])
    if not mount.is_dir():
        pytest.skip(f"no {mount} here")
    assert f"cannot write {place}" in one_error_line(run(fed_dir, command, place))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
@pytest.mark.parametrize("command", ALL)
def test_a_read_only_directory_is_one_error_line(fed_dir: str, tmp_path: Path, command: str) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        assert "cannot write" in one_error_line(run(fed_dir, command, locked / "out"))
    finally:
        locked.chmod(0o755)
    assert list(locked.iterdir()) == []


@pytest.mark.parametrize("command", FILE_COMMANDS)
def test_a_file_output_refuses_a_directory_or_a_device(fed_dir: str, tmp_path: Path, command: str) -> None:
    assert "it is a directory" in one_error_line(run(fed_dir, command, tmp_path))
    assert "not a regular file" in one_error_line(run(fed_dir, command, os.devnull))


@pytest.mark.parametrize("command", DIR_COMMANDS)
def test_a_directory_output_refuses_a_file(fed_dir: str, tmp_path: Path, command: str) -> None:
    (tmp_path / "plain").write_text("mine\n")
    assert "not a directory" in one_error_line(run(fed_dir, command, tmp_path / "plain"))
    assert (tmp_path / "plain").read_text() == "mine\n"


@pytest.mark.parametrize("command", FILE_COMMANDS)
def test_a_file_output_is_written_new_or_replaced(fed_dir: str, tmp_path: Path, command: str) -> None:
    out = tmp_path / "out.png"  # matplotlib would add the suffix of its format to a name without one
    r = run(fed_dir, command, out)
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 0
    out.write_bytes(b"stale")
    r = run(fed_dir, command, out)
    assert r.exit_code == 0, r.output
    assert out.read_bytes() != b"stale"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.png"]  # no probe or temporary file left


def test_demo_creates_its_directory_and_keeps_an_earlier_run_unless_forced(fed_dir: str, tmp_path: Path) -> None:
    out = tmp_path / "demo"
    r = run(fed_dir, "demo", out)
    assert r.exit_code == 0, r.output
    assert (out / "dijet.png").is_file() and len(giod.open(out / "federation").dataset("demo")) == 300
    first = (out / "dijet.png").read_bytes()
    line = one_error_line(run(fed_dir, "demo", out))
    assert "already exists" in line and "--force" in line
    assert (out / "dijet.png").read_bytes() == first and len(giod.open(out / "federation").dataset("demo")) == 300
    r = run(fed_dir, "demo", out, "--force", "--events", "200")
    assert r.exit_code == 0, r.output
    assert len(giod.open(out / "federation").dataset("demo")) == 200


def test_demo_never_removes_a_federation_it_did_not_make(fed_dir: str, tmp_path: Path) -> None:
    out = tmp_path / "results"
    theirs = out / "federation"
    theirs.mkdir(parents=True)
    (theirs / "thesis.tex").write_text("years of work\n")
    for extra in ([], ["--force"]):
        line = one_error_line(run(fed_dir, "demo", out, *extra))
        assert str(theirs) in line
        assert (theirs / "thesis.tex").read_text() == "years of work\n"
        assert sorted(p.name for p in out.iterdir()) == ["federation"]
