"""The command line: real commands on a real federation; bad input exits 2 in one line."""

from __future__ import annotations

import re
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.testing import synthetic

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


@pytest.fixture
def fed_dir(tmp_path: Path) -> str:
    path = tmp_path / "fed"
    fed = giod.open(path, create=True)
    ds = fed.create_dataset("qcd", synthetic.schema())
    with ds.writer(database_events=100, program="test") as w:
        w.append(synthetic.events(250, seed=3))
    fed.close()
    return str(path)


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_init_ls_show(tmp_path: Path, fed_dir: str):
    r = run("init", str(tmp_path / "new"))
    assert r.exit_code == 0 and "federation ready" in r.output
    r = run("ls", "-f", fed_dir)
    assert r.exit_code == 0 and "qcd" in r.output and "250" in r.output
    r = run("show", "qcd", env={"GIOD_FEDERATION": fed_dir})
    assert r.exit_code == 0 and "raw.tracker" in r.output and "3 databases" in r.output
    r = run("show", "qcd", "--database", "2", "-f", fed_dir)
    assert r.exit_code == 0 and "entries 100..199" in r.output


def test_select_counts_like_the_api(fed_dir: str):
    r = run("select", "qcd", "njets >= 3 and ht > 100", "--count", "-f", fed_dir)
    assert r.exit_code == 0
    n = int(re.match(r"([\d,]+) of", r.output).group(1).replace(",", ""))
    assert n == len(giod.open(fed_dir).dataset("qcd").select("njets >= 3 and ht > 100"))


def test_select_to_parquet(tmp_path: Path, fed_dir: str):
    import pyarrow.parquet as pq

    out = tmp_path / "sel.parquet"
    r = run("select", "qcd", "njets >= 2", "--columns", "jets,ht", "-o", str(out), "-f", fed_dir)
    assert r.exit_code == 0, r.output
    t = pq.read_table(out)
    assert t.num_rows == len(giod.open(fed_dir).dataset("qcd").select("njets >= 2"))
    assert set(t.column_names) == {"jets", "ht"}


@pytest.mark.parametrize("args", [
    ["select", "qcd", "ht >"],
    ["select", "nosuch", "ht > 1"],
    ["show", "nosuch"],
    ["select", "qcd", "ht > 1", "--columns", "nosuch"],
    ["show", "qcd", "--database", "999"],
])
def test_bad_input_is_one_line_and_exit_2(fed_dir: str, args):
    r = CliRunner().invoke(main, [*args, "-f", fed_dir])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "Traceback" not in r.output


def test_missing_federation_is_exit_2(tmp_path: Path):
    r = CliRunner().invoke(main, ["ls", "-f", str(tmp_path / "nothing")])
    assert r.exit_code == 2 and "no giod federation" in r.output


def test_schema_check(tmp_path: Path):
    good = tmp_path / "m.yaml"
    good.write_text(synthetic.schema().to_yaml())
    assert run("schema", "check", str(good)).exit_code == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nname: x\ntypes:\n  T: {fields: {a: float31}}\ncollections: {t: T}\n")
    r = CliRunner().invoke(main, ["schema", "check", str(bad)])
    assert r.exit_code == 2 and "float31" in r.output and ":4" in r.output


@pytest.mark.parametrize("case, says", [
    ("bomb", "anchors and aliases"),
    ("deep", "nested deeper than"),
    ("huge", "1,000,000,000,000,000,000 elements"),
])
def test_schema_check_of_a_model_over_the_bounds_is_one_line(tmp_path: Path, case: str, says: str):
    from tests.schema.test_bounds import BOMB, _nested, model

    text = {"bomb": BOMB, "deep": _nested("flow", 10_000),
            "huge": model("x: float32[1000000000][1000000000]")}[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    t0 = time.thread_time()  # CPU time; the 10,000-level flow case is 0.25 s alone, 1.5 s under load
    r = CliRunner().invoke(main, ["schema", "check", str(path)])
    assert time.thread_time() - t0 < 5.0
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}:") and says in lines[0], r.output


def test_fsck_and_gc(fed_dir: str):
    site = Path(fed_dir) / "data" / "qcd" / "deadbeef"
    site.mkdir(parents=True)
    (site / ".raw.calo.parquet.tmp-123").write_bytes(b"partial")
    r = run("fsck", "-f", fed_dir)
    assert r.exit_code == 0 and "1 orphans" in r.output
    r = run("gc", "--grace", "0", "-f", fed_dir)
    assert r.exit_code == 0 and "1 orphan files removed" in r.output
    assert "0 problems" in run("fsck", "-f", fed_dir).output


def test_every_command_is_documented():
    text = DOCS.read_text()

    def walk(group, prefix):
        ctx = click.Context(group)
        for name in group.list_commands(ctx):  # the lazy commands (demo, bench) too
            cmd = group.get_command(ctx, name)
            if cmd is not None and cmd.hidden:
                continue  # a hidden alias (`site list` for `site ls`) is not advertised
            full = f"{prefix} {name}".strip()
            yield full
            if hasattr(cmd, "commands"):
                yield from walk(cmd, full)

    missing = [c for c in walk(main, "") if f"giod {c}" not in text]
    assert not missing, f"commands missing from docs/cli.md: {missing}"


def test_object_shows_fields_and_relations(fed_dir: str):
    fed = giod.open(fed_dir)
    ds = fed.dataset("qcd")
    db = ds.databases()[1]
    entry = db.first_entry + 5
    ev = ds.event(entry)
    j = next(i for i in range(len(ev.jets)) if len(ev.jets[i].tracks_index))
    r = run("object", f"db{db.id}/jets/{entry}#{j}", "-f", fed_dir)
    assert r.exit_code == 0, r.output
    assert f"pt = {ev.jets[j].pt}" in r.output
    first = int(ev.jets[j].tracks_index[0])
    assert f"tracks -> db{db.id}/tracks/{entry}#{first}" in r.output
    bad = CliRunner().invoke(main, ["object", "db1/jets/0", "-f", fed_dir])
    assert bad.exit_code == 2


SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
NANO = SHARED / "nanoAOD_2015_CMS_Open_Data_ttbar.root"


@pytest.mark.slow
@pytest.mark.rootdata
def test_import_and_dijet_on_real_nanoaod(tmp_path: Path):
    import os

    if not NANO.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CMS open-data file missing: {NANO} (CI=true)")
        pytest.skip(f"CMS open-data file not found at {NANO}")
    fed = str(tmp_path / "fed")
    assert run("init", fed).exit_code == 0
    r = run("import", str(NANO), "--dataset", "ttbar", "-f", fed)
    assert r.exit_code == 0 and "imported 200 events" in r.output, r.output
    png = tmp_path / "dijet.png"
    r = run("analyze", "dijet", "ttbar", "-o", str(png), "--max-mass", "1000", "-f", fed)
    assert r.exit_code == 0, r.output
    n = int(r.output.split(" events")[0].replace(",", ""))
    from giod.analysis import dijet

    ds = giod.open(fed).dataset("ttbar")
    masses = dijet.dijet_masses(ds.read(["Jet"]).Jet)
    assert n == len(masses) and n > 0
    assert png.stat().st_size > 10_000


def test_federation_option_before_the_command(tmp_path, monkeypatch):
    import os

    from click.testing import CliRunner

    from giod.cli import main

    monkeypatch.setenv("GIOD_FEDERATION", str(tmp_path / "unused"))
    target = str(tmp_path / "fed")
    runner = CliRunner()
    assert runner.invoke(main, ["init", target]).exit_code == 0
    got = runner.invoke(main, ["-f", target, "ls"])
    assert got.exit_code == 0, got.output
    assert "federation version" in got.output
    assert os.environ["GIOD_FEDERATION"] == str(tmp_path / "unused")  # passed to the command, not through here
    missing = runner.invoke(main, ["-f", str(tmp_path / "nowhere"), "ls"])
    assert missing.exit_code == 2
    # the command's own -f wins over the group's; without either, GIOD_FEDERATION is used
    assert runner.invoke(main, ["-f", str(tmp_path / "nowhere"), "ls", "-f", target]).exit_code == 0
    assert "no giod federation at" in runner.invoke(main, ["ls"]).output


def test_import_needs_a_federation_unless_told_to_create_it(tmp_path: Path):
    import numpy as np
    import uproot

    tree = tmp_path / "tiny.root"
    with uproot.recreate(tree) as f:
        f["Events"] = {"MET_pt": np.array([1.5, 2.5], dtype=np.float32)}
    fed = tmp_path / "fed"
    r = CliRunner().invoke(main, ["import", str(tree), "--dataset", "met", "-f", str(fed)])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "giod init" in lines[0]
    assert not fed.exists()
    r = run("import", str(tree), "--dataset", "met", "--create", "-f", str(fed))
    assert r.exit_code == 0 and "imported 2 events" in r.output, r.output
    r = run("import", str(tree), "--dataset", "met2", "-f", str(fed))  # now it exists: no flag needed
    assert r.exit_code == 0, r.output
    with giod.open(fed) as opened:
        assert sorted(opened.datasets()) == ["met", "met2"]


def test_import_can_fix_the_container_format_of_the_dataset_it_creates(tmp_path: Path):
    import numpy as np
    import uproot

    tree = tmp_path / "tiny.root"
    with uproot.recreate(tree) as f:
        f["Events"] = {"MET_pt": np.array([1.5, 2.5, 3.5], dtype=np.float32)}
    fed = tmp_path / "fed"
    r = run("import", str(tree), "--dataset", "lake", "--container-format", "parquet", "--create", "-f", str(fed))
    assert r.exit_code == 0, r.output
    with giod.open(fed) as opened:
        ds = opened.dataset("lake")
        assert ds.record.container_format == "parquet"
        assert {c.format for c in ds.databases()[0].containers if c.name != "tag-index"} == {"parquet"}
        with pytest.raises(giod.ConfigError, match="keeps its containers as parquet"):
            ds.writer(container_format="arrow")
    r = CliRunner().invoke(main, ["import", str(tree), "--dataset", "x", "--container-format", "root", "-f",
                                  str(fed)])
    assert r.exit_code == 2 and "'root' is not one of 'arrow', 'parquet'" in r.output, r.output
