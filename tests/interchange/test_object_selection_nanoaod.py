"""Object cuts on an imported CMS NanoAOD file, against uproot's reading of the original.

Counters (``nJet``) are not stored on import: they come from the lengths of
the collections' lists.
"""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import numpy as np
import pytest
import uproot
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.interchange import import_root


@pytest.fixture(scope="module")
def imported(ttbar: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ak.Array]:
    path = tmp_path_factory.mktemp("nanoaod") / "fed"
    with giod.open(path, create=True) as fed:
        import_root(fed, ttbar, "ttbar")
    with uproot.open(ttbar) as f:
        raw = f["Events"].arrays(["nJet", "Jet_pt", "Jet_eta", "nMuon", "Muon_pt", "Muon_eta"])
    return str(path), ak.Array({k: ak.values_astype(raw[k], np.float64) if "_" in k else raw[k] for k in raw.fields})


def _true(values: ak.Array) -> np.ndarray:
    return ak.to_numpy(ak.fill_none(values, False)).astype(bool)


CUTS = [
    ("nJet >= 5", lambda r: r.nJet >= 5),
    ("count(Jet.pt > 30) >= 2", lambda r: ak.sum(r.Jet_pt > 30, axis=1) >= 2),
    ("any(abs(Muon.eta) < 2.4 and Muon.pt > 20)", lambda r: ak.any((abs(r.Muon_eta) < 2.4) & (r.Muon_pt > 20), axis=1)),
    ("all(Jet.pt > 25)", lambda r: ak.all(r.Jet_pt > 25, axis=1)),
    ("sum(Jet.pt) > 300", lambda r: ak.sum(r.Jet_pt, axis=1) > 300),
    ("max(Jet.pt) > 100", lambda r: ak.max(r.Jet_pt, axis=1) > 100),
    ("min(Muon.pt) < 20", lambda r: ak.min(r.Muon_pt, axis=1) < 20),
    ("Jet.pt[0] > 80", lambda r: ak.firsts(r.Jet_pt) > 80),
    ("nMuon == 0 or Muon.pt[1] > 15", lambda r: (r.nMuon == 0) | _true(ak.firsts(r.Muon_pt[:, 1:2]) > 15)),
]


@pytest.mark.parametrize(("text", "reference"), CUTS, ids=[c[0] for c in CUTS])
def test_object_cuts_on_imported_nanoaod_match_uproot(imported, text, reference):
    path, raw = imported
    expected = np.flatnonzero(_true(reference(raw)))
    assert 0 < len(expected) < len(raw)
    with giod.open(path) as fed:
        ds = fed.dataset("ttbar")
        assert "nJet" not in ds.schema.tags  # derived, not stored twice
        sel = ds.select(text)
        np.testing.assert_array_equal(sel.entries(), expected)
    r = CliRunner().invoke(main, ["select", "ttbar", text, "--count", "-f", path])
    assert r.exit_code == 0 and r.output.startswith(f"{len(expected):,} of {len(raw):,} events selected")


def test_misspelt_nanoaod_names_get_suggestions(imported):
    path, _ = imported
    with giod.open(path) as fed, pytest.raises(giod.ExpressionError, match=r"did you mean 'Muon'\?"):
        fed.dataset("ttbar").select("any(Muons.pt > 20)")
    r = CliRunner().invoke(main, ["select", "ttbar", "count(Jet.ptt > 30) >= 2", "-f", path])
    assert r.exit_code == 2 and "unknown Jet field 'ptt'; did you mean 'pt'?" in r.output
