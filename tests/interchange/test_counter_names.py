"""A file's counter names select: after importing uproot-HZZ.root, ``NJet >= 2`` counts the jets.

Through the API, the command line and a real server on loopback, compared
with uproot's reading of the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import uproot
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.errors import ExpressionError, SchemaError
from giod.interchange import import_root
from giod.schema import Schema
from tests.server.conftest import Served, serve

pytestmark = pytest.mark.rootdata


@pytest.fixture(scope="module")
def fed_path(hzz: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("counters") / "fed"
    with giod.open(path, create=True) as fed:
        import_root(fed, hzz, "hzz")
    return path


@pytest.fixture(scope="module")
def expected(hzz: Path) -> int:
    with uproot.open(hzz) as f:
        return int(np.sum(f["events"]["NJet"].array(library="np") >= 2))


@pytest.fixture(scope="module")
def served(fed_path: Path) -> Served:
    yield from serve(fed_path)


def test_schema_records_the_counter(fed_path: Path) -> None:
    with giod.open(fed_path) as fed:
        schema = fed.dataset("hzz").schema
    assert schema.collections["Jet"].counter == "NJet"
    assert schema.collections["Muon"].counter == "NMuon"


def test_api(fed_path: Path, expected: int) -> None:
    with giod.open(fed_path) as fed:
        ds = fed.dataset("hzz")
        assert 0 < len(ds.select("NJet >= 2")) == len(ds.select("nJet >= 2")) == expected
        counts = ds.select("NJet >= 2").read(["NJet", "Jet.Px"])  # a column too, as nJet is
        assert counts.NJet.tolist() == [len(px) for px in counts.Jet.Px.tolist()]
        with pytest.raises(ExpressionError, match="NJet"):
            ds.select("NJets >= 2")  # a misspelling suggests the file's name


def test_cli(fed_path: Path, expected: int) -> None:
    result = CliRunner().invoke(main, ["select", "hzz", "NJet >= 2", "--count", "-f", str(fed_path)])
    assert result.exit_code == 0, result.output
    assert f"{expected:,}" in result.output


def test_server(served: Served, expected: int) -> None:
    status, body = served.query(dataset="hzz", where="NJet >= 2", columns=["NJet"])
    assert status == 200, body
    table = pa.ipc.open_stream(body).read_all()
    assert table.num_rows == expected and min(table.column("NJet").to_pylist()) == 2
    assert len(served.remote().dataset("hzz").select("NJet >= 2")) == expected


def test_a_counter_cannot_shadow_a_tag() -> None:
    with pytest.raises(SchemaError, match="NJet"):
        Schema.from_dict({"schema_version": 1, "name": "m", "types": {"Jet": {"fields": {"pt": "float32"}}},
                          "collections": {"Jet": {"type": "Jet", "counter": "NJet"}}, "tags": {"NJet": "int32"}})
