"""The parts the benchmarks are built from: models, peer writers, layouts, timing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import awkward as ak
import numpy as np
import pyarrow.parquet as pq
import pytest
import uproot

from giod.errors import ConfigError
from giod.schema import TAG_CONTAINER
from giod.testing import synthetic
from giod_bench import commitcycle, daq, granularity
from giod_bench.report import Column, round_robin, stopwatch


def test_one_container_model_keeps_types_and_drops_containers() -> None:
    multi, one = synthetic.schema(), daq.one_container_schema()
    assert set(one.containers) == {"events", TAG_CONTAINER}
    assert one.containers["events"] == tuple(sorted(multi.collections))
    assert {c: multi.collection_type(c) for c in multi.collections} == {
        c: one.collection_type(c) for c in one.collections
    }
    assert len(multi.containers) > len(one.containers)


def test_peer_files_hold_the_same_events(tmp_path: Path) -> None:
    events = synthetic.events(300, seed=5)
    schema = synthetic.schema()
    daq.write_parquet(tmp_path / "p.parquet", events, chunk=128)
    back = ak.from_arrow(pq.read_table(tmp_path / "p.parquet"))
    assert pq.ParquetFile(tmp_path / "p.parquet").num_row_groups == 3
    assert ak.array_equal(back, events)

    daq.write_ttree(tmp_path / "t.root", daq.ttree_arrays(events, schema), chunk=128)
    with uproot.open(tmp_path / "t.root") as f:
        tree = f["t"].arrays()
    assert ak.array_equal(tree.tracks_cov_1, events.tracks.cov[:, :, 1])
    assert ak.array_equal(tree.n_tracks_hits, ak.sum(ak.num(events.tracks.hits, axis=2), axis=1), dtype_exact=False)
    assert ak.array_equal(tree.tracks_hits_idx, ak.flatten(events.tracks.hits, axis=2))
    assert ak.array_equal(tree.ntracks, events.ntracks)  # the tag, not the counter

    if daq.rntuple_supported():
        daq.write_rntuple(tmp_path / "n.root", events, chunk=128)
        with uproot.open(tmp_path / "n.root") as f:
            assert ak.array_equal(f["n"].arrays().hits.x, events.hits.x)


def test_payload_is_the_arrow_size_of_what_giod_stores() -> None:
    events = synthetic.events(200, seed=6)
    payload = daq.payload_bytes(events, synthetic.schema())
    floats = 4 * int(ak.sum(ak.num(events.hits)) * 4 + ak.sum(ak.num(events.cells)) * 4)
    assert floats < payload < 2 * events.nbytes
    assert daq.peer_chunk(200, payload) == 200  # less than one 16 MB cluster
    assert daq.peer_chunk(10**6, 10**6 * 10**4) == 1_677


def test_calorimeter_layouts_carry_the_same_energies() -> None:
    e = granularity.energies(2, seed=1)
    image = granularity.layout_events("image", e)
    flat = granularity.layout_events("flat", e)
    cells = granularity.layout_events("cells", e)
    assert image.calo.e.type.content.content.content.size == 64  # layer × phi × eta, one per event
    np.testing.assert_array_equal(ak.to_numpy(image.calo.e[:, 0]), e)
    np.testing.assert_array_equal(ak.to_numpy(flat.calo.e[:, 0]).reshape(e.shape), e)
    c = cells.cells[1]
    pick = 3 * 64 * 1024 - 5
    assert (int(c.layer[pick]), int(c.iphi[pick]), int(c.ieta[pick])) == (2, 63, 1019)
    assert c.e[pick] == e[1, 2, 63, 1019]
    for layout in granularity.LAYOUTS:
        assert granularity.layout_schema(layout).name.endswith(layout)
    with pytest.raises(ConfigError):
        granularity.layout_schema("voxels")


def test_round_robin_takes_every_clock_once_per_round() -> None:
    calls: list[tuple[str, int]] = []

    def clock(name: str, seconds: float) -> Callable[[int], float]:
        def run(i: int) -> float:
            calls.append((name, i))
            return seconds * (i + 1)

        return run

    steps: list[int] = []
    timings = round_robin({"a": clock("a", 1.0), "b": clock("b", 2.0)}, 3, warmup=1, advance=steps.append)
    assert calls == [("a", -1), ("b", -1), ("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert timings["a"].seconds == (1.0, 2.0, 3.0) and timings["b"].median == 4.0
    assert timings["a"].best == 1.0 and len(steps) == 6
    assert stopwatch(lambda i: None)(0) >= 0.0
    with pytest.raises(ConfigError):
        round_robin({"a": clock("a", 1.0)}, 0)
    assert Column("x", "x", "{:.1f}").format(float("nan")) == "–"
    assert Column("x", "x", "{:.1f}").format(2.25) == "2.2"


def test_commit_cycle_counts_every_database_and_refuses_fewer_commits_than_writers(tmp_path: Path) -> None:
    out = commitcycle.cycle(6, 2, tmp_path)
    assert out["commits_per_s"] == pytest.approx(6 / out["seconds"])
    assert out["cpu_ms_per_commit"] > 0
    assert list(tmp_path.iterdir()) == []  # its federation is removed
    with pytest.raises(ConfigError, match="at least as many commits"):
        commitcycle.cycle(1, 2, tmp_path)
