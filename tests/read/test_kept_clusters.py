"""The kept clusters' bound and admission (``giod.read.clusters.Segmented``): never over the bound, a cluster
used again survives a stream of one-off ones, and what a read gives never depends on what was kept.

The policy alone first (any sequence of uses against a model of what it must hold), then a federation: a
selection read again keeps its clusters however many ``ds.event`` lookups come between its reads, and every
selection and event read under a small bound is what it is with nothing kept.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import awkward as ak
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.counting import counted

import giod
from giod.read import clusters
from giod.read.clusters import Segmented
from giod.testing import synthetic

BOUND = 1_000

_use = st.tuples(st.sampled_from(["put", "get"]), st.integers(0, 30), st.integers(1, BOUND + 50), st.booleans())


def _check(cache: Segmented[Any, int], bound: int) -> None:
    assert cache.nbytes <= bound
    assert cache.held[0] == sum(c for _, c in cache.probation.values())
    assert cache.held[1] == sum(c for _, c in cache.protected.values())
    assert cache.held[1] <= cache.share * bound
    assert not set(cache.probation) & set(cache.protected)


@settings(max_examples=300, deadline=None)
@given(uses=st.lists(_use, max_size=200), share=st.sampled_from([0.0, 0.5, 0.9, 1.0]))
def test_never_over_the_bound_and_each_key_its_own_value(uses: list[tuple[str, int, int, bool]], share: float
                                                         ) -> None:
    cache: Segmented[int, int] = Segmented(share)
    costs: dict[int, int] = {}
    for what, key, cost, read in uses:
        if what == "put":
            was = key in cache
            cache.put(key, key * 7, cost, BOUND, protect=read)
            if not was and key in cache:
                costs[key] = cost
            if cost > BOUND:
                assert key in cache if was else key not in cache
        else:
            found = cache.get(key, BOUND, promote=read)
            assert found is None or found == key * 7
        _check(cache, BOUND)
        for k, (value, cost) in [*cache.probation.items(), *cache.protected.items()]:
            assert value == k * 7 and cost == costs[k]
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0


@settings(max_examples=300, deadline=None)
@given(uses=st.lists(st.tuples(st.sampled_from(["put", "get"]), st.integers(0, 30), st.integers(1, BOUND)),
                     max_size=200), share=st.sampled_from([0.0, 0.5, 0.9, 1.0]))
def test_reads_alone_see_a_plain_lru_over_the_whole_bound(uses: list[tuple[str, int, int]], share: float) -> None:
    cache: Segmented[int, int] = Segmented(share)
    lru: OrderedDict[int, int] = OrderedDict()  # the model: key -> cost, least recently used first
    for what, key, cost in uses:
        if what == "put":
            cache.put(key, key, cost, BOUND)
            if key not in lru:
                lru[key] = cost
                while sum(lru.values()) > BOUND:
                    lru.popitem(last=False)
        else:
            assert (cache.get(key, BOUND) is None) == (key not in lru)
            if key in lru:
                lru.move_to_end(key)
        assert set(cache.probation) | set(cache.protected) == set(lru)


@settings(max_examples=300, deadline=None)
@given(hot=st.integers(1, 900), read_again=st.booleans(),
       stream=st.lists(st.tuples(st.integers(1, BOUND), st.booleans()), max_size=120))
def test_a_cluster_reads_use_survives_a_stream_of_lookups(hot: int, read_again: bool,
                                                          stream: list[tuple[int, bool]]) -> None:
    """A cluster a read decoded (or a lookup's that a read used) stays however many clusters point lookups
    decode and look at after it, as long as each fits beside it."""
    cache: Segmented[str, int] = Segmented(0.9)
    cache.put("hot", 1, hot, BOUND, protect=not read_again)
    if read_again:
        assert cache.get("hot", BOUND) == 1  # a read's use of a lookup's cluster: protected
    for i, (cost, looked_again) in enumerate(stream):
        cache.put(f"once {i}", i, min(cost, BOUND - hot), BOUND, protect=False)
        if looked_again and i:
            cache.get(f"once {i - 1}", BOUND, promote=False)  # a lookup's second use: still probation
        _check(cache, BOUND)
        assert "hot" in cache.protected
    assert not {k for k in cache.protected if k != "hot"}


# a federation: the bench's layout in small (tags and hits, one dataset selected, one looked up in)
FIELDS = ["hits", "run", "event", "njets", "ntracks", "ht", "lead_pt"]
EVENTS = {"sel": synthetic.events(1_200, seed=3, hits=10, cells=0, tracks=0, jets=4)[FIELDS],
          "look": synthetic.events(1_600, seed=4, hits=10, cells=0, tracks=0, jets=4)[FIELDS]}


LAYOUTS = {"sel": (100, 50), "look": (200, 200)}  # (events a database, a cluster): lookups' blocks are 64


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    f = giod.open(tmp_path_factory.mktemp("kept") / "fed", create=True)
    out = {}
    for name, events in EVENTS.items():
        ds = f.create_dataset(name, synthetic.schema())
        database, cluster = LAYOUTS[name]
        with ds.writer(database_events=database, cluster_events=cluster) as w:
            w.append(events)
        out[name] = ds
    yield out
    f.close()


@pytest.fixture
def kept_anew(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Clusters (whole, or a read's few rows of them) decoded to be kept, counted; the kept clusters emptied
    before and after."""
    counts = counted(monkeypatch, clusters._Cluster, "of")
    clusters.forget()
    yield counts
    clusters.forget()


def _cut(fraction: float) -> str:
    ht = ak.to_numpy(EVENTS["sel"]["ht"])
    return f"ht > {float(np.quantile(ht, 1 - fraction))!r}"


def test_a_selection_read_again_keeps_its_clusters_between_lookups(both: dict[str, Any], kept_anew: list[int],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    sel, look = both["sel"], both["look"]
    expr = _cut(0.05)  # a few events in most clusters of hits
    want = ak.to_list(sel.select(expr).read(["hits"]))
    working = clusters._KEPT.nbytes  # what the selection keeps
    assert working > 0
    clusters.forget()
    monkeypatch.setattr(clusters, "CACHE_BYTES", int(working / clusters.PROTECTED) + 1)
    assert ak.to_list(sel.select(expr).read(["hits"])) == want  # a read's clusters: protected
    before = kept_anew[0]
    database = LAYOUTS["look"][0]
    for first in range(0, len(look), database):
        for entry in (first, first + 100):  # two blocks of each cluster: the second lookup keeps them whole
            assert look.event(entry).ht == pytest.approx(float(EVENTS["look"]["ht"][entry]))
    looked = kept_anew[0] - before
    assert looked >= len(look) // database  # at least each database's cluster of hits
    assert len(clusters._KEPT.probation) < looked  # not all of them fit beside the selection's
    before = kept_anew[0]
    assert ak.to_list(sel.select(expr).read(["hits"])) == want
    assert kept_anew[0] == before  # nothing of the selection's was dropped for them


@settings(max_examples=20, deadline=None)
@given(bytes_kept=st.integers(0, 400_000),
       reads=st.lists(st.one_of(st.tuples(st.just("select"), st.sampled_from([0.002, 0.02, 0.2])),
                                st.tuples(st.just("event"), st.integers(0, len(EVENTS["look"]) - 1))),
                      min_size=1, max_size=12))
def test_reads_are_the_same_whatever_was_kept(both: dict[str, Any], bytes_kept: int,
                                              reads: list[tuple[str, float]]) -> None:
    """Selections and lookups under any bound give what the events written hold."""
    sel, look = both["sel"], both["look"]
    clusters.forget()
    was = clusters.CACHE_BYTES
    clusters.CACHE_BYTES = bytes_kept
    try:
        for what, arg in reads:
            if what == "select":
                expr = _cut(arg)
                mask = ak.to_numpy(EVENTS["sel"]["ht"]) > float(expr.split(">")[1])
                assert ak.to_list(sel.select(expr).read(["hits", "ht"])) == \
                    ak.to_list(EVENTS["sel"][["hits", "ht"]][mask])
            else:
                entry = int(arg)
                got = look.event(entry)
                assert ak.to_list(got.hits) == ak.to_list(EVENTS["look"]["hits"][entry])
                assert got.njets == EVENTS["look"]["njets"][entry]
            assert clusters._KEPT.nbytes <= bytes_kept
    finally:
        clusters.CACHE_BYTES = was
        clusters.forget()


def _tracker_kept() -> list[Any]:
    """The kept clusters of ``hits`` (both segments)."""
    return [v for k, (v, _) in [*clusters._KEPT.probation.items(), *clusters._KEPT.protected.items()]
            if k[1].endswith("raw.tracker.arrow")]


def test_a_sparse_read_keeps_its_rows_of_a_cluster_not_the_whole_cluster(both: dict[str, Any],
                                                                        kept_anew: list[int]) -> None:
    sel = both["sel"]
    ht = ak.to_numpy(EVENTS["sel"]["ht"])
    hits = ak.to_list(EVENTS["sel"]["hits"])
    clusters_of_hits = len(ht) // LAYOUTS["sel"][1]
    few, a, b = np.sort(ht)[[-8, 600, 607]]  # the 7 highest; 8 in the middle: at most 3 in a cluster of 50
    middle = f"ht between {float(a)!r} and {float(b)!r}"
    assert np.count_nonzero((ht >= a) & (ht <= b)) == 8
    assert max(np.bincount(np.flatnonzero(ht > few) // 50).max(),
               np.bincount(np.flatnonzero((ht >= a) & (ht <= b)) // 50).max()) \
        <= clusters.PARTIAL_SHARE * LAYOUTS["sel"][1]
    high = ak.to_list(sel.select(f"ht > {float(few)!r}").read(["hits"]).hits)
    assert high == [h for h, v in zip(hits, ht, strict=True) if v > few]
    kept = _tracker_kept()
    assert kept and all(c.rows is not None for c in kept)  # the rows alone
    assert sum(len(c.rows) for c in kept) == 7
    assert len(kept) < clusters_of_hits
    decoded = kept_anew[0]
    assert ak.to_list(sel.select(f"ht > {float(few)!r}").read(["hits"]).hits) == high
    assert kept_anew[0] == decoded  # read again: gathered from what was kept
    low = ak.to_list(sel.select(middle).read(["hits"]).hits)
    assert low == [h for h, v in zip(hits, ht, strict=True) if a <= v <= b]
    assert sum(len(c.rows) for c in _tracker_kept()) == 15  # a cluster holding both keeps both
    decoded = kept_anew[0]
    assert ak.to_list(sel.select(f"ht > {float(few)!r}").read(["hits"]).hits) == high
    assert ak.to_list(sel.select(middle).read(["hits"]).hits) == low
    assert kept_anew[0] == decoded
    half = float(np.median(ht))  # many events of every cluster: kept whole, and the few rows read from it
    assert ak.to_list(sel.select(f"ht > {half!r}").read(["hits"]).hits) == [h for h, v in zip(hits, ht, strict=True)
                                                                            if v > half]
    whole = [c for c in _tracker_kept() if c.rows is None]
    assert len(whole) == clusters_of_hits
    assert sum(len(c.rows) for c in _tracker_kept() if c.rows is not None) == 15  # the rows stay beside them
    decoded = kept_anew[0]
    assert ak.to_list(sel.select(f"ht > {float(few)!r}").read(["hits"]).hits) == high
    assert kept_anew[0] == decoded


@settings(max_examples=25, deadline=None)
@given(windows=st.lists(st.tuples(st.integers(0, len(EVENTS["sel"]) - 1), st.integers(1, 60)), min_size=1,
                        max_size=8),
       bytes_kept=st.sampled_from([0, 20_000, 2 << 30]))
def test_rows_kept_from_any_sequence_of_sparse_reads_give_the_events_written(
        both: dict[str, Any], windows: list[tuple[int, int]], bytes_kept: int) -> None:
    """Sparse selections in any order (rows kept, grown, then a cluster kept whole) read what was written."""
    sel = both["sel"]
    ht = ak.to_numpy(EVENTS["sel"]["ht"])
    ordered = np.sort(ht)
    clusters.forget()
    was = clusters.CACHE_BYTES
    clusters.CACHE_BYTES = bytes_kept
    try:
        for start, width in windows:
            lo, hi = float(ordered[start]), float(ordered[min(start + width, len(ht) - 1)])
            mask = (ht >= lo) & (ht <= hi)
            got = sel.select(f"ht between {lo!r} and {hi!r}").read(["hits", "ht"])
            assert ak.to_list(got) == ak.to_list(EVENTS["sel"][["hits", "ht"]][mask])
            assert clusters._KEPT.nbytes <= bytes_kept
            for c in _tracker_kept():
                assert c.rows is None or (len(c.rows) <= clusters.PARTIAL_SHARE * LAYOUTS["sel"][1]
                                          and np.all(np.diff(c.rows) > 0))
    finally:
        clusters.CACHE_BYTES = was
        clusters.forget()


def test_a_federation_never_answers_for_another_with_the_same_paths_and_checksums(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crafted federation whose catalog names the same files (paths and whole-file checksums, which the reads
    never recompute) as a trusted one, with other bytes of its own, read first in the same process: the
    trusted federation's reads give its own events, not the kept clusters of the other."""
    same = uuid.UUID(int=7)
    monkeypatch.setattr("giod.write.writer.uuid.uuid4", lambda: same)  # both writers name their files alike
    written = {}
    for name, seed in (("trusted", 11), ("crafted", 12)):
        f = giod.open(tmp_path / name, create=True)
        ds = f.create_dataset("sel", synthetic.schema())
        written[name] = synthetic.events(400, seed=seed, hits=10, cells=0, tracks=0, jets=4)[FIELDS]
        with ds.writer(database_events=100, cluster_events=50) as w:
            w.append(written[name])
        f.close()
    monkeypatch.undo()
    trusted = sqlite3.connect(tmp_path / "trusted" / "catalog.sqlite")
    sums = dict(trusted.execute("SELECT path, checksum FROM containers").fetchall())
    trusted.close()
    crafted = sqlite3.connect(tmp_path / "crafted" / "catalog.sqlite")
    with crafted:
        for path, theirs in crafted.execute("SELECT path, checksum FROM containers").fetchall():
            assert path in sums  # the same names
            crafted.execute("UPDATE containers SET checksum = ? WHERE path = ?", (sums[path], path))
            crafted.execute("UPDATE database_summaries SET record = replace(record, ?, ?)", (theirs, sums[path]))
    crafted.close()
    clusters.forget()
    expr = _cut(0.05)
    sel_mask = ak.to_numpy(written["trusted"]["ht"]) > float(expr.split(">")[1])
    opened = {name: giod.open(tmp_path / name) for name in written}
    try:
        for name in ("crafted", "trusted"):  # the crafted federation's clusters kept first
            ds = opened[name].dataset("sel")
            mask = ak.to_numpy(written[name]["ht"]) > float(expr.split(">")[1])
            for _ in range(2):  # a read that keeps, then one served from what is kept
                assert ak.to_list(ds.select(expr).read(["hits"]).hits) == ak.to_list(written[name]["hits"][mask])
                assert ak.to_list(ds.read(["hits"]).hits) == ak.to_list(written[name]["hits"])
                for entry in (0, 1, 150):
                    assert ak.to_list(ds.event(entry).hits) == ak.to_list(written[name]["hits"][entry])
        assert sel_mask.any()
    finally:
        for f in opened.values():
            f.close()
        clusters.forget()
