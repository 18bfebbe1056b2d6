"""Smoke tests of ``giod bench …``: each benchmark end to end at tiny sizes.

They check that a run completes, prints its table, and writes a JSON file
whose measured numbers are positive and finite and a PNG plot. Speed
targets are for the benchmarks themselves, never for tests.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from giod.cli import main
from giod.read import tagindex

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _bench(tmp_path: Path, *args: str) -> tuple[dict[str, Any], str]:
    out = tmp_path / "results"
    result = CliRunner().invoke(
        main,
        ["bench", *args, "--output", str(out), "--workdir", str(tmp_path / "work")],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    name = args[0]
    data = json.loads((out / f"bench-{name}.json").read_text())
    png = (out / f"bench-{name}.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000
    assert data["benchmark"] == name
    assert data["environment"]["versions"]["pyarrow"]
    assert not any((tmp_path / "work").iterdir()), "the benchmark left data behind"
    return data, result.output


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_daq(tmp_path: Path) -> None:
    data, output = _bench(tmp_path, "daq", "--quick", "--events", "400", "--writers", "2")
    rows = data["results"]
    writers = {(r["writer"], r["writers"]) for r in rows}
    for model in ("giod multi-container", "giod multi-container, size first", "giod one-container"):
        assert (model, 2) in writers
    assert {"pyarrow Parquet", "uproot TTree"} <= {r["writer"] for r in rows}
    by = {(r["writer"], r["writers"]): r for r in rows}
    # size first: every container compressed, so fewer bytes than the default layout of the same events
    assert by[("giod multi-container, size first", 2)]["stored_mb"] < by[("giod multi-container", 2)]["stored_mb"]
    if ("uproot RNTuple", 1) in by:  # rates and bytes beside RNTuple's, from the same run
        for r in rows:
            if r["writer"].startswith("giod"):
                assert _positive(r["vs_rntuple"]) and _positive(r["bytes_vs_rntuple"]), r
        assert "× RNTuple" in output
    for r in rows:
        assert _positive(r["mb_per_s"]), r
        assert _positive(r["seconds"]), r
        if r["writer"].startswith(("giod", "pyarrow", "uproot")):
            assert _positive(r["events_per_s"]) and _positive(r["stored_mb"]) and _positive(r["vs_pyarrow"])
            assert r["events"] == 400
    assert next(r for r in rows if r["writer"] == "pyarrow Parquet")["vs_pyarrow"] == pytest.approx(1.0)
    assert "DAQ write" in output and "giod multi-container" in output


def test_read(tmp_path: Path) -> None:
    data, output = _bench(tmp_path, "read", "--quick", "--events", "300", "--repeat", "2")
    rows = data["results"]
    readers = {r["reader"] for r in rows}
    assert {"giod", "giod, 10-bit floats", "pyarrow Parquet", "uproot TTree"} <= readers
    assert {r["what"] for r in rows} == {"everything", "hits"}
    stored = {r["reader"]: r["stored_mb"] for r in rows if r["what"] == "everything"}
    assert stored["giod, 10-bit floats"] < stored["giod"]  # rounded mantissas compress
    for r in rows:
        assert len(r["timing"]["seconds"]) == 2
        assert r["best_s"] <= r["median_s"]
        assert _positive(r["mb_per_s"]) and _positive(r["vs_fastest_peer"])
    everything = [r for r in rows if r["what"] == "everything"]
    hits = [r for r in rows if r["what"] == "hits"]
    assert all(h["payload_mb"] < e["payload_mb"] for h in hits for e in everything)
    split = data["split"]
    assert {(s["reader"], s["what"]) for s in split} == {
        (a, b) for a in ("giod", "pyarrow Parquet") for b in ("everything", "hits")
    }
    for s in split:
        assert _positive(s["decode_s"]) and _positive(s["convert_s"]) and 0 < s["convert_share"] < 1
    assert "where the time goes" in output


def test_select(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # databases of 1,000 events: blocks of 100 give each a tag index of ten blocks, as the full-size
    # bench's databases of 100,000 events have one (a database of one block has none)
    monkeypatch.setattr(tagindex, "BLOCK", 100)
    data, output = _bench(tmp_path, "select", "--quick", "--events", "3000", "--clusters", "100,default",
                          "--databases", "3")
    rows = data["results"]
    assert [(r["cluster_events"], r["fraction"]) for r in rows] == [
        (c, f) for c in (100, None) for f in (0.001, 0.01, 0.1)
    ]
    assert {r["databases"] for r in rows} == {3}
    for r in rows:
        assert r["selected"] == round(r["fraction"] * 3000)
        assert _positive(r["speedup"]) and _positive(r["scan_s"]) and _positive(r["select_s"])
        assert 0 < r["clusters_read"] <= 1
        assert _positive(r["first_count_s"]) and _positive(r["build_count_s"])
        assert r["event_goal"] == ("met" if max(r["event_ms"], r["pinned_event_ms"]) <= 1.0 else "missed")
    # smaller clusters can only lower the share of clusters a selection touches
    small = {r["fraction"]: r["clusters_read"] for r in rows if r["cluster_events"] == 100}
    large = {r["fraction"]: r["clusters_read"] for r in rows if r["cluster_events"] is None}
    assert all(small[f] <= large[f] for f in small)
    assert "speed-up" in output
    assert any("<= 1 ms warm" in note for note in data["notes"])  # ds.event beside its goal
    # three databases: no count merges them, so nothing is saved and a new process asks each database
    assert [(r["cluster_events"], r["databases"]) for r in data["first_counts"]] == [(100, 3), (None, 3)]
    for r in data["first_counts"]:
        assert r["new_count_s"] is None and r["saved_read"] is None and r["counts"]["saved"] == []
        assert r["counts"]["bare"] == [r["selected"]] and r["merged"]["bare"] == [False]  # --quick: one round
        assert _positive(r["bare_count_s"]) and _positive(r["open_s"])
    # through a server at 250 ms: planned and read at the source in a few requests, the files in many
    source, files = data["served"]
    assert (source["how"], files["how"]) == ("at the source", "client reads the files")
    assert source["selected"] == files["selected"] == round(0.001 * 3000) and source["databases"] == 3
    assert source["requests"] <= 3 < files["requests"]
    # a count through the proxy costs its round trip (which of the two counts is faster is the machine's
    # noise at three databases; the requests above are what differ)
    assert source["count_rtts"] >= 0.9 and files["count_rtts"] >= 0.9 and _positive(source["speedup"])


def test_select_keeps_its_datasets_and_reuses_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from giod_bench import select as module

    kept = tmp_path / "kept"
    args = ("select", "--quick", "--events", "600", "--clusters", "default", "--databases", "2", "--repeat", "2",
            "--no-served", "--keep", str(kept))
    first, _ = _bench(tmp_path, *args)
    assert (kept / "fed").is_dir() and (kept / "tags.npy").is_file()

    def refuse(*_: Any) -> Any:
        raise AssertionError("a kept run wrote its datasets again")

    monkeypatch.setattr(module, "_write", refuse)
    again, _ = _bench(tmp_path, *args)
    assert [r["selected"] for r in again["results"]] == [r["selected"] for r in first["results"]]
    for r in again["results"]:
        assert _positive(r["worst_speedup"]) and _positive(r["first_speedup"])
        assert r["worst_speedup"] <= r["first_speedup"] + 1e-9  # the lowest of the rounds, the first among them
    other = CliRunner().invoke(main, ["bench", "select", "--quick", "--events", "600", "--clusters", "default",
                                      "--databases", "3", "--no-served", "--keep", str(kept),
                                      "--output", str(tmp_path / "results")])
    assert other.exit_code != 0 and "another folder" in other.output


def test_select_first_counts_in_new_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from giod.read.datasetindex import saved_path

    # ten databases: the second count merges their tag indexes and saves the merged index
    monkeypatch.setattr(tagindex, "BLOCK", 100)
    kept = tmp_path / "kept"
    data, output = _bench(tmp_path, "select", "--quick", "--events", "2000", "--clusters", "default",
                          "--databases", "10", "--repeat", "2", "--no-served", "--keep", str(kept))
    (r,) = data["first_counts"]
    assert (r["databases"], r["fraction"], r["selected"]) == (10, 0.001, round(0.001 * 2000))
    assert r["selected"] == next(x["selected"] for x in data["results"] if x["fraction"] == 0.001)
    # both new processes found the events the bench process counted, the saved index answering the first
    # and each database's own index the second (nothing merged: its file was away)
    assert r["counts"] == {"saved": [r["selected"]] * 2, "bare": [r["selected"]] * 2}
    assert r["merged"] == {"saved": [True, True], "bare": [False, False]} and r["saved_read"] == "yes"
    assert _positive(r["new_count_s"]) and _positive(r["bare_count_s"]) and _positive(r["saved_gain"])
    assert r["saved_gain"] == pytest.approx(r["bare_count_s"] / r["new_count_s"])
    assert _positive(r["first_count_s"]) and _positive(r["build_count_s"])
    # the saved index is back where it was, nothing left beside it
    assert saved_path(kept / "fed", "select_0", "ht").is_file()
    assert sorted(p.name for p in kept.iterdir()) == ["fed", "giod-bench-select.json", "tags.npy"]
    assert "new process s" in output and "no saved index s" in output


def test_granularity(tmp_path: Path) -> None:
    data, output = _bench(tmp_path, "granularity", "--quick", "--events", "2")
    rows = {r["layout"]: r for r in data["results"]}
    assert set(rows) == {"image", "flat", "cells"}
    for r in rows.values():
        for key in (
            "write_s",
            "read_s",
            "stored_mb",
            "payload_mb",
            "write_ratio",
            "read_ratio",
            "size_ratio",
        ):
            assert _positive(r[key]), (key, r)
    assert rows["image"]["size_ratio"] == pytest.approx(1.0)
    # one record per cell carries the cell indices besides the energies
    assert rows["cells"]["payload_mb"] > rows["image"]["payload_mb"]
    assert "granularity" in output


def test_catalog_sqlite(tmp_path: Path) -> None:
    data, output = _bench(tmp_path, "catalog", "--databases", "30", "--step", "10", "--postgres", "none")
    rows = data["results"]
    assert [(r["backend"], r["databases"]) for r in rows] == [("SQLite", n) for n in (10, 20, 30)]
    for r in rows:
        assert _positive(r["rate"]) and _positive(r["seconds"]) and _positive(r["list_seconds"])
        assert _positive(r["prune_seconds"]) and r["kept"] == 0  # mjj >= 500: 1 database in 101
        assert r["goal"] == 500 and r["met"] == ("yes" if r["rate"] >= 500 else "no")
    assert data["parameters"]["writers"] == 8
    assert "registrations/s" in output and "prune s" in output and "goal /s" in output
    assert "against the goal of 500/s" in output


def test_databases_sqlite(tmp_path: Path) -> None:
    data, output = _bench(tmp_path, "databases", "--databases", "12", "--repeat", "1", "--postgres", "none")
    (row,) = data["results"]  # the plan kept exactly one database, or the benchmark would have failed
    assert (row["backend"], row["databases"], row["listed"]) == ("SQLite", 12, 12)
    for key in ("len_ms", "plan_ms", "event_ms", "list_rate", "rows_rate", "driver_rate", "register_rate"):
        assert _positive(row[key]), key
    assert "lines/s" in output and "misses goal" in output


def test_bad_option_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["bench", "select", "--clusters", "ten", "--output", str(tmp_path)])
    assert result.exit_code == 2
    assert "--clusters" in result.output and "Traceback" not in result.output


@pytest.mark.postgres
def test_catalog_postgres(tmp_path: Path) -> None:
    import psycopg
    from sqlalchemy.engine import make_url

    from giod_bench.cli import POSTGRES_URL, _throwaway_postgres

    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except psycopg.Error:
        if os.environ.get("CI") == "true":
            pytest.fail("PostgreSQL not reachable at 127.0.0.1:5432 (CI=true: it is required)")
        pytest.skip("PostgreSQL not reachable at 127.0.0.1:5432")
    data, _ = _bench(tmp_path, "catalog", "--databases", "20", "--step", "10")
    assert [(r["backend"], r["databases"]) for r in data["results"]] == [
        ("SQLite", 10),
        ("SQLite", 20),
        ("PostgreSQL", 10),
        ("PostgreSQL", 20),
    ]
    assert all(_positive(r["rate"]) for r in data["results"])
    assert {r["backend"]: r["goal"] for r in data["results"]} == {"SQLite": 500, "PostgreSQL": 2_000}

    def exists(name: str) -> bool:
        with psycopg.connect(POSTGRES_URL) as conn:
            sql = "SELECT 1 FROM pg_database WHERE datname = %s"
            return conn.execute(sql, (name,)).fetchone() is not None

    notes: list[str] = []
    with _throwaway_postgres(POSTGRES_URL, notes) as url:
        assert url is not None and not notes
        name = make_url(url).database
        assert name is not None and name.startswith("giod_bench_") and exists(name)
    assert not exists(name), "the throwaway benchmark database was not dropped"
    with _throwaway_postgres("postgresql://postgres@127.0.0.1:1/postgres", notes) as url:
        assert url is None
    assert notes and "PostgreSQL left out" in notes[0]


@pytest.mark.parametrize("name", ["daq", "read", "select", "granularity"])
def test_help_quotes_the_module_defaults(name: str) -> None:
    import importlib

    module = importlib.import_module(f"giod_bench.{name}")
    result = CliRunner().invoke(main, ["bench", name, "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert f"{module.DEFAULT_EVENTS:,}" in text and f"{module.QUICK_EVENTS:,}" in text
