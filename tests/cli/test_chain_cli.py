"""`giod simulate` and `giod reconstruct`: the physics chain from the shell, on a real embedded federation."""

from __future__ import annotations

import sys
from pathlib import Path

import awkward as ak
import numpy as np
import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.physics.layout import model_text
from giod.schema import Schema

pytestmark = pytest.mark.slow  # the module's chain simulates and reconstructs (a minute on two cores)
TINY = "schema_version: 1\nname: tiny\ntypes:\n  P: {fields: {x: float32}}\ncollections: {parts: P}\n"


def giod_cli(fed: str, *args: str):
    return CliRunner().invoke(main, ["-f", fed, *args])


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A federation filled and reconstructed from the shell: 40 events in two databases."""
    path = tmp_path_factory.mktemp("chain-cli") / "fed"
    giod.open(path, create=True).close()
    fed = str(path)
    r = giod_cli(fed, "simulate", "qcd", "-n", "40", "--seed", "5", "--database-events", "20")
    assert r.exit_code == 0, r.output
    assert "now 40 events in 2 databases" in r.output
    r = giod_cli(fed, "reconstruct", "qcd")
    assert r.exit_code == 0, r.output
    assert "reconstructed 40 events in 2 databases" in r.output
    with giod.open(fed) as f:
        f.create_dataset("tiny", Schema.from_yaml(TINY))
    return fed


def test_simulate_and_reconstruct_fill_a_dataset_that_selects_and_reads(chain: str) -> None:
    with giod.open(chain) as fed:
        ds = fed.dataset("qcd")
        assert len(ds) == 40
        for db in ds.databases():
            assert {c.name for c in db.containers} >= {"truth", "raw.tracker", "raw.calo", "reco", "tag"}
        sel = ds.select("njets >= 2 and lead_jet_pt > 40")
        arr = sel.read(["jets", "njets", "event"])
        assert 0 < len(arr) < 40
        assert ak.all(ak.num(arr.jets) >= 2)
        assert np.array_equal(ak.to_numpy(arr.event), sel.entries())
        assert ak.all(arr.jets.pt[:, 0] > 40)


def test_reconstructing_again_needs_force(chain: str) -> None:
    before = giod.open(chain).version
    line = one_error_line(giod_cli(chain, "reconstruct", "qcd"))
    assert "already reconstructed" in line and "--force" in line
    assert giod.open(chain).version == before
    r = giod_cli(chain, "reconstruct", "qcd", "--force")
    assert r.exit_code == 0, r.output
    assert giod.open(chain).version == before + 1


def test_simulate_appends_to_a_dataset_of_the_model(tmp_path: Path) -> None:
    fed = str(tmp_path / "fed")
    giod.open(fed, create=True).close()
    assert giod_cli(fed, "simulate", "qcd", "-n", "15", "--seed", "2").exit_code == 0
    assert giod_cli(fed, "reconstruct", "qcd").exit_code == 0
    r = giod_cli(fed, "simulate", "qcd", "-n", "10", "--seed", "2")
    assert r.exit_code == 0 and "now 25 events in 2 databases" in r.output, r.output
    r = giod_cli(fed, "reconstruct", "qcd")
    assert r.exit_code == 0 and "reconstructed 10 events in 1 database " in r.output, r.output
    arr = giod.open(fed).dataset("qcd").read(["event", "mcparticles.px"])
    assert np.array_equal(ak.to_numpy(arr.event), np.arange(25))
    # the same seed on an append gives new events, not a copy of the first ones
    assert not ak.array_equal(arr.mcparticles.px[15:25], arr.mcparticles.px[0:10])


@pytest.mark.parametrize("args, words", [
    (["simulate", "qcd", "-n", "0"], "-n must be a positive"),
    (["simulate", "new", "-n", "-3"], "-n must be a positive"),
    (["simulate", "tiny", "-n", "5"], "follows the model 'tiny'"),
    (["simulate", "new", "-n", "5", "--generator", "herwig"], "unknown generator"),
    (["simulate", "new", "-n", "5", "--pileup", "-1"], "pileup"),
    (["reconstruct", "nosuch"], "nosuch"),
    (["reconstruct", "tiny"], "cannot be reconstructed"),
    (["reconstruct", "qcd", "--force", "--scheduler", "tcp://nowhere"], "bad scheduler address"),
    (["reconstruct", "qcd", "--force", "--scheduler", "nowhere"], "bad scheduler"),
    (["reconstruct", "qcd", "--force", "--workers", "0"], "--workers"),
    (["reconstruct", "qcd", "--force", "--workers", "2", "--scheduler", "tcp://h:8786"], "not both"),
])
def test_bad_input_is_one_line_and_exit_2(chain: str, args: list[str], words: str) -> None:
    with giod.open(chain) as fed:
        before, names = fed.version, set(fed.datasets())
    assert words in one_error_line(giod_cli(chain, *args))
    with giod.open(chain) as fed:
        assert fed.version == before and set(fed.datasets()) == names


def test_pythia_when_not_installed_is_one_line(chain: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pythia8mc", None)  # import fails as if it were not installed
    line = one_error_line(giod_cli(chain, "simulate", "py", "-n", "5", "--generator", "pythia"))
    assert "Pythia 8 is not installed" in line and "pip install" in line
    assert "py" not in giod.open(chain).datasets()


def _interrupt_at(monkeypatch: pytest.MonkeyPatch, module: str, name: str, call: int) -> None:
    """Ctrl-C (KeyboardInterrupt) raised inside the ``call``-th call of ``module.name``."""
    import importlib

    mod = importlib.import_module(module)
    real, calls = getattr(mod, name), []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(mod, name, interrupted)


def test_ctrl_c_in_simulate_keeps_only_complete_databases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fed = str(tmp_path / "fed")
    giod.open(fed, create=True).close()
    _interrupt_at(monkeypatch, "giod.physics.simulate", "simulate", 3)
    r = giod_cli(fed, "simulate", "qcd", "-n", "60", "--database-events", "20")
    assert r.exit_code == 130 and "interrupted: 40 events in complete databases" in r.output, r.output
    with giod.open(fed) as f:
        ds = f.dataset("qcd")
        assert len(ds) == 40 and [db.n_events for db in ds.databases()] == [20, 20]
    _interrupt_at(monkeypatch, "giod.physics.simulate", "simulate", 1)
    r = giod_cli(fed, "simulate", "new", "-n", "20")
    assert r.exit_code == 130 and "interrupted: 0 events" in r.output, r.output
    assert giod.open(fed).datasets() == ["qcd"]  # no empty dataset left behind
    assert "0 problems" in CliRunner().invoke(main, ["fsck", "-f", fed]).output


def test_ctrl_c_in_reconstruct_commits_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fed = str(tmp_path / "fed")
    giod.open(fed, create=True).close()
    assert giod_cli(fed, "simulate", "qcd", "-n", "30", "--database-events", "10").exit_code == 0
    before = giod.open(fed).version
    _interrupt_at(monkeypatch, "giod.physics.reconstruct", "reconstruct", 2)
    r = giod_cli(fed, "reconstruct", "qcd")
    assert r.exit_code == 130 and "nothing was committed" in r.output, r.output
    with giod.open(fed) as f:
        assert f.version == before
        assert all(db.container("reco") is None for db in f.dataset("qcd").databases())
    assert "0 problems" in CliRunner().invoke(main, ["fsck", "-f", fed]).output
    assert "0 orphans" in CliRunner().invoke(main, ["fsck", "-f", fed]).output


def test_model_of_a_simulated_dataset_is_the_physics_model(chain: str) -> None:
    assert giod.open(chain).dataset("qcd").schema.fingerprint == Schema.from_yaml(model_text()).fingerprint


def test_cut_flow_rows_are_consistent_with_the_histogram(chain: str) -> None:
    from giod.analysis import dijet

    ds = giod.open(chain).dataset("qcd")
    expression = "njets >= 1"
    h, flow = dijet.run_with_cutflow(ds, expression, histogram=dijet.mass_histogram(20, 0, 250))
    counts = [n for _, n in flow.rows]
    assert [cut.split(":")[0] for cut, _ in flow.rows[:2]] == ["events in the dataset", "tag selection"]
    assert all(b <= a for a, b in zip(counts, counts[1:], strict=False))
    assert counts[0] == len(ds) and counts[1] == len(ds.select(expression))
    assert counts[-1] == int(h.sum())
    # each row counted independently, from the jets read back
    jets = ds.select(expression).read(["jets"]).jets
    good = jets[(jets.pt > 30) & (abs(jets.eta) < 2.5)]
    assert counts[2] == int(ak.sum(ak.num(good) >= 2))
    masses = dijet.dijet_masses(jets)
    assert counts[3] == len(masses) and counts[4] == int(np.sum(masses < 250))
    # every share in the table is a percentage, with its uncertainty between the ends
    for _, kept, of_before, of_all in flow.table():
        assert kept.replace(",", "").isdigit() and of_before.endswith("%") and of_all.endswith("%")


def test_analyze_and_demo_print_the_cut_flow(chain: str, tmp_path: Path) -> None:
    from giod.analysis import dijet

    r = giod_cli(chain, "analyze", "dijet", "qcd", "--where", "njets >= 1", "-o", str(tmp_path / "d.png"))
    assert r.exit_code == 0, r.output
    h, flow = dijet.run_with_cutflow(giod.open(chain).dataset("qcd"), "njets >= 1",
                                     histogram=dijet.mass_histogram(60, 0, 2000))
    assert r.output.lstrip().startswith(f"{int(h.sum()):,} events in the histogram")
    assert "cut flow" in r.output and "|Δη| of the two leading" in r.output and "tag selection" in r.output
    r = CliRunner().invoke(main, ["demo", "--events", "40", "--workers", "1", "--output", str(tmp_path / "demo")])
    assert r.exit_code == 0, r.output
    assert "cut flow of the di-jet analysis" in r.output and "m_jj within the histogram" in r.output
    with giod.open(tmp_path / "demo" / "federation") as fed:
        _, flow = dijet.run_with_cutflow(fed.dataset("qcd"), "njets >= 2 and lead_jet_pt > 60",
                                         histogram=dijet.mass_histogram(50, 0, 1000))
    shown = [ln for ln in r.output.splitlines() if "in di-jet histogram" in ln]
    assert shown and shown[0].split("│")[-2].strip() == f"{flow.rows[-1][1]:,}"

@pytest.mark.slow

def test_validate_creates_the_directory_it_is_named_and_no_missing_parent(chain: str, tmp_path: Path) -> None:
    assert "does not exist" in one_error_line(giod_cli(chain, "validate", "qcd", "-o", str(tmp_path / "a" / "b")))
    assert not (tmp_path / "a").exists()
    r = giod_cli(chain, "validate", "qcd", "-o", str(tmp_path / "plots"))
    assert r.exit_code == 0, r.output
    made = sorted(p.suffix for p in (tmp_path / "plots").iterdir())
    assert made and set(made) == {".png"}
