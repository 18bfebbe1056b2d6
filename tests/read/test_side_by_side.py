"""A sparse read's rows of many databases kept side by side (``giod.read.clusters.side_by_side``): the next
read of those databases' rows is one gather with no step per database, and what it gives never depends on
what was kept."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import awkward as ak
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.counting import counted

import giod
from giod.read import clusters, projection
from giod.testing import synthetic

FIELDS = ["hits", "run", "event", "njets", "ntracks", "ht", "lead_pt"]
EVENTS = synthetic.events(1_600, seed=5, hits=10, cells=0, tracks=0, jets=4)[FIELDS]
DATABASE, CLUSTER = 400, 400  # 4 databases of one cluster each


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    f = giod.open(tmp_path_factory.mktemp("side") / "fed", create=True)
    d = f.create_dataset("sel", synthetic.schema())
    with d.writer(database_events=DATABASE, cluster_events=CLUSTER) as w:
        w.append(EVENTS)
    yield d
    f.close()


@pytest.fixture
def per_database(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Calls of the step per database and container (``projection.kept_pieces``), counted; nothing kept
    before and after."""
    counts = counted(monkeypatch, projection, "kept_pieces")
    clusters.forget()
    yield counts
    clusters.forget()


def _top(n: int) -> str:
    """A cut selecting the ``n`` events of highest ht (few in each database)."""
    return f"ht > {float(np.sort(ak.to_numpy(EVENTS['ht']))[-n - 1])!r}"


def _want(expr: str, fields: list[str]) -> list[Any]:
    ht = ak.to_numpy(EVENTS["ht"])
    mask = ht > float(expr.split(">")[1]) if ">" in expr else np.ones(len(ht), dtype=bool)
    return ak.to_list(EVENTS[fields][mask])


def _side_by_side() -> list[Any]:
    """Each read's rows kept side by side, in the order kept (the last read's first for each files)."""
    return [h for k, (v, _) in clusters._DERIVED.items() if isinstance(k, tuple) and k[0] == "side by side"
            for h in v]


def test_a_sparse_read_of_many_databases_is_gathered_side_by_side_the_next_time(ds: Any, per_database: list[int]
                                                                               ) -> None:
    expr = _top(40)
    first = ak.to_list(ds.select(expr).read(["hits", "ht"]))
    assert first == _want(expr, ["hits", "ht"])
    databases = len(ds.select(expr).plan())
    assert databases == 4
    assert per_database[0] == 2 * databases  # tags and hits, database by database
    kept = _side_by_side()
    assert len(kept) == 2 and all(len(k.files) == databases and len(k.kept.rows) == 40 for k in kept)
    for _ in range(3):
        assert ak.to_list(ds.select(expr).read(["hits", "ht"])) == first
    assert per_database[0] == 2 * databases  # no step per database again


def test_two_selections_over_the_same_databases_keep_each_its_rows_side_by_side(ds: Any, per_database: list[int]
                                                                                 ) -> None:
    ht = np.sort(ak.to_numpy(EVENTS["ht"]))
    high, middle = _top(30), f"ht between {float(ht[700])!r} and {float(ht[729])!r}"
    want_high = _want(high, ["hits"])
    got_middle = ak.to_list(ds.select(middle).read(["hits"]))
    assert got_middle == ak.to_list(EVENTS[["hits"]][(ak.to_numpy(EVENTS["ht"]) >= ht[700])
                                                     & (ak.to_numpy(EVENTS["ht"]) <= ht[729])])
    assert ak.to_list(ds.select(high).read(["hits"])) == want_high
    assert [db.id for db, _ in ds.select(high).plan()] == [db.id for db, _ in ds.select(middle).plan()]
    assert [len(k.kept.rows) for k in _side_by_side()] == [30, 30]  # each its own, the last read's first
    before = per_database[0]
    for _ in range(2):
        assert ak.to_list(ds.select(high).read(["hits"])) == want_high
        assert ak.to_list(ds.select(middle).read(["hits"])) == got_middle
    assert per_database[0] == before
    narrow = _top(10)  # rows the wider high read holds: gathered from it, nothing kept anew
    assert ak.to_list(ds.select(narrow).read(["hits"])) == _want(narrow, ["hits"])
    assert per_database[0] == before
    assert len(_side_by_side()) == 2


def test_the_last_reads_of_the_same_databases_are_kept(ds: Any, per_database: list[int]) -> None:
    ht = np.sort(ak.to_numpy(EVENTS["ht"]))
    cuts = [f"ht between {float(ht[start])!r} and {float(ht[start + 59])!r}" for start in range(0, 1200, 100)]
    cuts = [c for c in cuts if len(ds.select(c).plan()) == 4][: clusters.SIDE_BY_SIDE_READS + 2]
    assert len(cuts) == clusters.SIDE_BY_SIDE_READS + 2
    for c in cuts:
        ds.select(c).read(["hits"])
    assert len(_side_by_side()) == clusters.SIDE_BY_SIDE_READS
    before = per_database[0]
    for c in cuts[-clusters.SIDE_BY_SIDE_READS:]:  # the last ones, each from its own rows
        assert ak.to_list(ds.select(c).read(["hits"]).hits) == \
            [h for h, v in zip(ak.to_list(EVENTS["hits"]), ak.to_numpy(EVENTS["ht"]), strict=True)
             if float(c.split()[2]) <= v <= float(c.split()[4])]
    assert per_database[0] == before
    ds.select(cuts[0]).read(["hits"])  # the first one's were let go
    assert per_database[0] == before + 4


def test_a_dense_read_keeps_nothing_side_by_side(ds: Any, per_database: list[int]) -> None:
    expr = _top(800)  # half of each database: whole clusters
    assert ak.to_list(ds.select(expr).read(["hits"])) == _want(expr, ["hits"])
    assert _side_by_side() == []


def test_a_later_version_with_another_database_reads_it(tmp_path: Any, per_database: list[int]) -> None:
    f = giod.open(tmp_path / "fed", create=True)
    d = f.create_dataset("sel", synthetic.schema())
    with d.writer(database_events=DATABASE, cluster_events=CLUSTER) as w:
        w.append(EVENTS[:800])
    expr = _top(40)
    pinned = d.pinned()
    old = ak.to_list(d.select(expr).read(["hits", "ht"]))
    assert ak.to_list(d.select(expr).read(["hits", "ht"])) == old  # now side by side
    with d.writer(database_events=DATABASE, cluster_events=CLUSTER) as w:
        w.append(EVENTS[800:])
    assert ak.to_list(d.select(expr).read(["hits", "ht"])) == _want(expr, ["hits", "ht"])
    assert ak.to_list(pinned.select(expr).read(["hits", "ht"])) == old
    f.close()


@settings(max_examples=25, deadline=None)
@given(windows=st.lists(st.tuples(st.integers(0, len(EVENTS) - 1), st.integers(1, 80)), min_size=1, max_size=8),
       derived_bytes=st.sampled_from([0, 30_000, 256 << 20]))
def test_any_sequence_of_sparse_reads_gives_the_events_written(ds: Any, windows: list[tuple[int, int]],
                                                               derived_bytes: int) -> None:
    ht = ak.to_numpy(EVENTS["ht"])
    ordered = np.sort(ht)
    clusters.forget()
    was = clusters.DERIVED_BYTES
    clusters.DERIVED_BYTES = derived_bytes
    try:
        for start, width in [*windows, *windows]:  # each again: from what was kept side by side
            lo, hi = float(ordered[start]), float(ordered[min(start + width, len(ht) - 1)])
            got = ds.select(f"ht between {lo!r} and {hi!r}").read(["hits", "ht"])
            assert ak.to_list(got) == ak.to_list(EVENTS[["hits", "ht"]][(ht >= lo) & (ht <= hi)])
            for k in _side_by_side():
                assert np.all(np.diff(k.kept.rows) > 0)
                assert len(k.kept.rows) <= clusters.PARTIAL_SHARE * DATABASE * len(k.files)
    finally:
        clusters.DERIVED_BYTES = was
        clusters.forget()
