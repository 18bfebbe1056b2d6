"""docs/server.md's recipes for other tools, run as written against a real server with a real read token.

pyarrow over fsspec, polars, DuckDB, ``giod sql`` and coffea each read a served
federation and must give what a local read gives; no token, a wrong one or a
token for another dataset must be refused.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import giod
from giod.testing import synthetic
from tests.server.conftest import Served, serve

fsspec = pytest.importorskip("fsspec")
aiohttp = pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")

DOC = Path(__file__).resolve().parents[2] / "docs" / "server.md"
SECTION = "## Served data for other tools"


def recipes(language: str = "python") -> list[str]:
    """The code blocks of the doc's section on other tools, in order."""
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return re.findall(rf"^```{language}\n(.*?)^```$", text[start:end], re.MULTILINE | re.DOTALL)


def run(code: str, namespace: dict[str, Any]) -> dict[str, Any]:
    exec(compile(code, f"{DOC.name}:{SECTION[3:]}", "exec"), namespace)  # the repository's own doc
    return namespace


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serve(tmp_path_factory.mktemp("served") / "fed")


@pytest.fixture(scope="module")
def qcd(served: Served) -> giod.Dataset:
    ds = served.local.create_dataset("qcd", synthetic.schema())
    with ds.writer(database_events=400, cluster_events=100) as w:
        w.append(synthetic.events(1_000, seed=11))
    return served.local.dataset("qcd")


@pytest.fixture(scope="module")
def token(served: Served, qcd: giod.Dataset) -> str:
    return served.token("read", "qcd")


@pytest.fixture(scope="module")
def done(served: Served, token: str) -> dict[str, Any]:
    """The namespace after the doc's recipes for files (every python block but coffea's), run in order."""
    for module in ("polars", "duckdb"):  # both in giod[test]; a laptop without them skips, not errs
        pytest.importorskip(module)
    namespace: dict[str, Any] = {"__name__": "__recipes__", "URL": served.url, "TOKEN": token}
    for code in recipes():
        if "giod_coffea" not in code:
            run(code, namespace)
    return namespace


def test_recipes_cover_each_tool() -> None:
    text = "\n".join(recipes() + recipes("sh"))
    for needle in ("fsspec.filesystem(\"http\", headers=", "pl.read_ipc", "duckdb.sql", "giod --token",
                   "giod_coffea.nanoevents", "Authorization"):
        assert needle in text, needle


def test_container_urls_are_the_servers_files(done: dict[str, Any], qcd: giod.Dataset, served: Served) -> None:
    dbs = sorted(qcd.databases(), key=lambda db: db.first_entry)
    assert len(dbs) == 3
    for name in ("tag", "reco", "raw.tracker"):
        want = [f"{served.url}/files/local/{c.path}" for db in dbs for c in db.containers if c.name == name]
        assert done["urls"][name] == want


def test_pyarrow_over_fsspec_equals_local(done: dict[str, Any], qcd: giod.Dataset) -> None:
    local = qcd.read(["run", "event", "njets", "ntracks", "ht", "lead_pt"])
    tags: pa.Table = done["tags"]
    assert tags.num_rows == len(local) == 1_000
    for name in tags.column_names:
        np.testing.assert_array_equal(tags.column(name).to_numpy(), ak.to_numpy(local[name]), err_msg=name)
    first: pa.RecordBatch = done["first"]
    assert first.num_rows == 100  # one cluster, not the file
    want = qcd.read(["jets"])[:100].jets
    for field in ("pt", "eta", "phi", "mass"):  # relations read by giod are views; in the file, indices
        assert [[j[field] for j in ev] for ev in first.column("jets").to_pylist()] == ak.to_list(want[field])


def test_polars_equals_local(done: dict[str, Any], qcd: giod.Dataset) -> None:
    jets = done["jets"]
    assert jets.columns == ["jets"] and jets.height == 400
    want = qcd.read(["jets"])[:400].jets
    assert [[j["pt"] for j in ev] for ev in jets["jets"].to_list()] == ak.to_list(want.pt)
    tags_df = done["tags_df"]
    np.testing.assert_array_equal(tags_df["ht"].to_numpy(), ak.to_numpy(qcd.read(["ht"]).ht))


def test_duckdb_equals_local(done: dict[str, Any], qcd: giod.Dataset) -> None:
    pytest.importorskip("duckdb")
    njets = ak.to_numpy(qcd.read(["njets"]).njets)
    values, counts = np.unique(njets, return_counts=True)
    assert done["per_njets"] == list(zip(values.tolist(), counts.tolist(), strict=True))


def test_giod_sql_against_the_server(served: Served, token: str, qcd: giod.Dataset, tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    from giod.cli import main

    [line] = [x for x in recipes("sh")[0].splitlines() if x.startswith("giod")]
    query = re.search(r'sql qcd "([^"]+)"', line)
    assert query is not None and '--token "$TOKEN"' in line and '-f "$URL"' in line
    out = tmp_path / "per-njets.parquet"
    args = ["sql", "qcd", query.group(1), "-f", served.url]
    result = CliRunner().invoke(main, ["--token", token, *args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    got = pq.read_table(out)
    values, counts = np.unique(ak.to_numpy(qcd.read(["njets"]).njets), return_counts=True)
    assert got.column("njets").to_pylist() == values.tolist()
    assert got.column("events").to_pylist() == counts.tolist()
    # a wrong token: one line, exit code 2, nothing read
    bad = CliRunner().invoke(main, ["--token", "giod_1_wrong", *args])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1, bad.output


@pytest.mark.parametrize("who", ["none", "wrong"])
def test_files_refused_without_the_right_token(done: dict[str, Any], who: str) -> None:
    headers = {"none": {}, "wrong": {"Authorization": "Bearer giod_1_not-a-token"}}[who]
    fs = fsspec.filesystem("http", headers=headers, skip_instance_cache=True)
    for url in (done["urls"]["tag"][0], done["URL"] + "/api/v1/datasets/qcd/databases"):
        with pytest.raises(aiohttp.ClientResponseError) as refused:
            fs.cat(url)
        assert refused.value.status == 401


def test_a_token_for_another_dataset_sees_nothing(done: dict[str, Any], served: Served) -> None:
    """As documented: another dataset's files and listing are answered as if they did not exist."""
    fs = fsspec.filesystem("http", headers={"Authorization": f"Bearer {served.token('read', 'elsewhere')}"},
                           skip_instance_cache=True)
    for url in (done["urls"]["tag"][0], done["URL"] + "/api/v1/datasets/qcd/databases"):
        with pytest.raises(FileNotFoundError):  # fsspec's word for 404
            fs.cat(url)


def test_polars_alone_cannot_send_the_token(done: dict[str, Any]) -> None:
    """Why the polars recipe goes through fsspec: polars' own HTTP reader is answered 401."""
    pl = pytest.importorskip("polars")
    with pytest.raises(Exception, match="authentication|401|Unauthorized"):
        pl.read_ipc(done["urls"]["tag"][0])


@pytest.mark.rootdata
@pytest.mark.filterwarnings("ignore")  # coffea's warnings about NanoAOD cross-references this file lacks
def test_coffea_on_another_machine(served: Served) -> None:
    if os.environ.get("CI") != "true":
        pytest.importorskip("coffea", reason="coffea is not installed (pip install 'giod[coffea]')")
    from giod.interchange import import_root
    from tests.interchange.conftest import TTBAR, open_data

    import_root(served.local, open_data(TTBAR), "ttbar")
    token = served.token("read", "ttbar")
    [code] = [c for c in recipes() if "giod_coffea" in c]
    dask = pytest.importorskip("dask")
    pytest.importorskip("dask_awkward")
    with dask.config.set(scheduler="sync"):  # the tasks open the server from the URL and token they carry
        namespace = run(code, {"__name__": "__recipes__", "URL": served.url, "TOKEN": token})
    events = namespace["events"]
    assert namespace["fed"].site("local").endpoint.requests > 0  # read through the server, not the files
    from giod.interchange import coffea as giod_coffea

    want = giod_coffea.nanoevents(served.local.dataset("ttbar").select("nMuon >= 1"))
    assert 0 < len(events) == len(want)
    assert ak.array_equal(namespace["muon_jet_pt"], want.Muon.matched_jet.pt, equal_nan=True, check_parameters=False)
    assert ak.array_equal(namespace["muon_pt"], want.Muon.pt, check_parameters=False)
    read = set(events.attrs["giod_reader"].read)
    assert {"Muon.jetIdx", "Jet.pt"} <= read and len(read) <= 4, read  # and one column per counter: no other
    # the same recipe with a token for another dataset sees no ttbar
    with pytest.raises(giod.NotFound):
        run(code, {"__name__": "__recipes__", "URL": served.url, "TOKEN": served.token("read", "qcd")})


def test_one_batch_over_fsspec_reads_part_of_the_file(done: dict[str, Any], qcd: giod.Dataset) -> None:
    """What the doc says of ``get_batch``: range requests of fsspec's blocks, not the whole file."""
    [size] = [c.size for c in sorted(qcd.databases(), key=lambda db: db.first_entry)[0].containers
              if c.name == "raw.calo"]
    with done["fs"].open(done["urls"]["raw.calo"][0], "rb", block_size=64 * 1024) as f:
        batch = pa.ipc.open_file(f).get_batch(1)
        moved = f.cache.total_requested_bytes
    assert batch.num_rows == 100
    assert 0 < moved < size / 2, (moved, size)  # four clusters: the footer and one of them
