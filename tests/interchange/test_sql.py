"""SQL (DuckDB) over the CMS ttbar NanoAOD imported into giod, compared with uproot on the file.

The tables come through giod's read path: a selection, a pinned version and a
remote federation with a restricted token read what they read everywhere else.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import awkward as ak
import numpy as np
import pyarrow.parquet as pq
import pytest
import uproot
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.errors import DataError, GiodError, MissingDependency
from giod.interchange import import_root
from tests.server.conftest import Served, serve

pytest.importorskip("duckdb", reason="duckdb is not installed (pip install 'giod[sql]')")

from giod.interchange.sql import connect, sql, tables

pytestmark = pytest.mark.rootdata


@pytest.fixture(scope="module")
def fed_path(ttbar: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sql") / "fed"
    with giod.open(path, create=True) as fed:
        import_root(fed, ttbar, "ttbar")
    return path


@pytest.fixture(scope="module")
def raw(ttbar: Path) -> ak.Array:
    with uproot.open(ttbar) as f:
        return f["Events"].arrays(["Jet_pt", "Muon_pt", "nMuon", "genWeight", "event"])


@pytest.fixture(scope="module")
def served(fed_path: Path) -> Iterator[Served]:
    yield from serve(fed_path)


def test_counts_and_sums_match_uproot(fed_path: Path, raw: ak.Array) -> None:
    with giod.open(fed_path) as fed:
        ds = fed.dataset("ttbar")
        (n,) = sql(ds, "SELECT count(*) AS n FROM Jet WHERE pt > 30").column("n").to_pylist()
        assert n == int(ak.sum(raw.Jet_pt > 30)) > 0
        (w,) = sql(ds, "SELECT sum(genWeight) AS w FROM tags").column("w").to_pylist()
        assert w == pytest.approx(float(np.sum(np.asarray(raw.genWeight, dtype=np.float64))))
        # a join on entry, over a giod selection: the leading muon of events with a muon
        got = sql(ds.select("nMuon >= 1"),
                  'SELECT t.event, m.pt FROM Muon m JOIN tags t USING (entry) WHERE m."index" = 0 ORDER BY entry')
        keep = raw.nMuon >= 1
        assert got.column("event").to_pylist() == raw.event[keep].tolist()
        assert np.allclose(got.column("pt").to_numpy(), ak.to_numpy(raw.Muon_pt[keep][:, 0]))


def test_only_the_tables_a_query_names_are_read(fed_path: Path) -> None:
    with giod.open(fed_path) as fed:
        ds = fed.dataset("ttbar")
        got = tables(ds, ["Muon"])
        assert list(got) == ["Muon"] and got["Muon"].column_names[:2] == ["entry", "index"]
        assert "pt" in got["Muon"].column_names
        con = connect(ds, "SELECT count(*) FROM muon JOIN tags USING (entry)")  # names ignore case, as SQL's
        assert sorted(row[0] for row in con.sql("SHOW TABLES").fetchall()) == ["Muon", "tags"]
        with pytest.raises(GiodError, match="no table 'Jets'"):
            tables(ds, ["Jets"])
        with pytest.raises(DataError, match="SQL query failed"):
            sql(ds, "SELECT nothing FROM Jet")


def test_a_pinned_version_reads_its_snapshot(fed_path: Path, ttbar: Path) -> None:
    with giod.open(fed_path) as fed:
        import_root(fed, ttbar, "twice")
        once = fed.version
        import_root(fed, ttbar, "twice", append=True)
        pinned = fed.dataset("twice", once)  # after the first import only
        (a,) = sql(pinned, "SELECT count(*) AS n FROM tags").column("n").to_pylist()
        (b,) = sql(fed.dataset("twice"), "SELECT count(*) AS n FROM tags").column("n").to_pylist()
        assert (a, b) == (200, 400)


def test_remote_with_a_restricted_token(served: Served, raw: ak.Array) -> None:
    token = served.token("read", "ttbar")
    remote = giod.open(served.url, token=token)
    (n,) = sql(remote.dataset("ttbar"), "SELECT count(*) AS n FROM Jet").column("n").to_pylist()
    assert n == int(ak.sum(ak.num(raw.Jet_pt)))
    with pytest.raises(GiodError):
        giod.open(served.url, token=served.token("read", "other")).dataset("ttbar")


def test_cli_prints_and_writes(fed_path: Path, tmp_path: Path, raw: ak.Array) -> None:
    runner = CliRunner()
    r = runner.invoke(main, ["sql", "ttbar", "SELECT count(*) AS n FROM Jet WHERE pt > 30", "-f", str(fed_path)])
    assert r.exit_code == 0, r.output
    assert str(int(ak.sum(raw.Jet_pt > 30))) in r.output and "1 rows" in r.output
    out = tmp_path / "jets.parquet"
    r = runner.invoke(main, ["sql", "ttbar", "SELECT entry, pt FROM Jet", "--where", "nMuon >= 1",
                             "-o", str(out), "-f", str(fed_path)])
    assert r.exit_code == 0, r.output
    assert pq.read_table(out).num_rows == int(ak.sum(ak.num(raw.Jet_pt[raw.nMuon >= 1])))
    bad = runner.invoke(main, ["sql", "ttbar", "SELEC 1", "-f", str(fed_path)])
    assert bad.exit_code == 2 and bad.output.startswith("error: SQL query failed") and "Traceback" not in bad.output


def test_without_duckdb_the_extra_is_named(fed_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)  # what Python does for a package that is not installed
    with giod.open(fed_path) as fed, pytest.raises(MissingDependency, match=r"pip install 'giod\[sql\]'"):
        sql(fed.dataset("ttbar"), "SELECT 1")
