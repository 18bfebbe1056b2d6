"""The kept clusters' bound and admission (``giod.read.clusters.Segmented``): never over the bound, a cluster
used again survives a stream of one-off ones, and what a read gives never depends on what was kept.

The policy alone first (any sequence of uses against a model of what it must hold), then a federation: a
selection read again keeps its clusters however many ``ds.event`` lookups come between its reads, and every
selection and event read under a small bound is what it is with nothing kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import awkward as ak
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import giod
from giod.read import clusters
from giod.read.clusters import Segmented
from giod.storage.formats.arrow.reader import ArrowContainerReader
from giod.testing import synthetic

BOUND = 1_000

_use = st.tuples(st.sampled_from(["put", "get"]), st.integers(0, 30), st.integers(1, BOUND + 50), st.booleans())


def _check(cache: Segmented[int, int], bound: int) -> None:
    assert cache.nbytes <= bound
    assert cache.held[0] == sum(c for _, c in cache.probation.values())
    assert cache.held[1] == sum(c for _, c in cache.protected.values())
    assert cache.held[1] <= cache.share * bound
    assert not set(cache.probation) & set(cache.protected)
    assert len(cache.ghosts) <= cache.ghost_keys


@settings(max_examples=300, deadline=None)
@given(uses=st.lists(_use, max_size=200), share=st.sampled_from([0.0, 0.5, 0.8, 1.0]), ghosts=st.integers(0, 8))
def test_never_over_the_bound_and_each_key_its_own_value(uses: list[tuple[str, int, int, bool]], share: float,
                                                         ghosts: int) -> None:
    cache: Segmented[int, int] = Segmented(share, ghosts)
    costs: dict[int, int] = {}
    for what, key, cost, promote in uses:
        if what == "put":
            was = key in cache
            cache.put(key, key * 7, cost, BOUND, promote)
            if not was and key in cache:
                costs[key] = cost
            if cost > BOUND:
                assert key in cache if was else key not in cache
        else:
            found = cache.get(key, BOUND, promote)
            assert found is None or found == key * 7
        _check(cache, BOUND)
        for k, (value, cost) in [*cache.probation.items(), *cache.protected.items()]:
            assert value == k * 7 and cost == costs[k]
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0


@settings(max_examples=300, deadline=None)
@given(hot=st.integers(1, 400), stream=st.lists(st.tuples(st.integers(1, 600), st.booleans(), st.booleans()),
                                                 max_size=120))
def test_a_cluster_used_again_survives_a_stream_of_one_off_ones(hot: int, stream: list[tuple[int, bool, bool]]
                                                               ) -> None:
    """A value read twice stays whatever comes after it once each (new keys, read again only by lookups
    that do not promote), as long as each fits beside it."""
    cache: Segmented[str, int] = Segmented(0.8, 64)
    cache.put("hot", 1, hot, BOUND)
    assert cache.get("hot", BOUND) == 1  # the second use: protected
    for i, (cost, promote, looked_up) in enumerate(stream):
        cache.put(f"once {i}", i, min(cost, BOUND - hot), BOUND, promote)
        if looked_up and i:
            cache.get(f"once {i - 1}", BOUND, promote=False)  # a point lookup's second use: no promotion
        _check(cache, BOUND)
        assert "hot" in cache.protected


def test_a_cluster_read_again_after_it_was_dropped_is_protected() -> None:
    cache: Segmented[str, int] = Segmented(0.8, 4)
    cache.put("a", 1, 600, BOUND)
    cache.put("b", 2, 600, BOUND)  # pushes "a" out of probation, its key remembered
    assert "a" not in cache and "a" in cache.ghosts
    cache.put("a", 1, 600, BOUND, promote=False)  # a lookup's: back to probation only
    assert "a" in cache.probation
    cache.put("c", 3, 600, BOUND)
    cache.put("a", 1, 600, BOUND)  # a read's: straight to the protected segment
    assert "a" in cache.protected and cache.nbytes <= BOUND
    for i in range(10):  # one-off clusters go through probation
        cache.put(f"x{i}", i, 400, BOUND)
    assert "a" in cache.protected


# a federation: the bench's layout in small (tags and hits, one dataset selected, one looked up in)
FIELDS = ["hits", "run", "event", "njets", "ntracks", "ht", "lead_pt"]
EVENTS = {"sel": synthetic.events(1_200, seed=3, hits=10, cells=0, tracks=0, jets=4)[FIELDS],
          "look": synthetic.events(1_600, seed=4, hits=10, cells=0, tracks=0, jets=4)[FIELDS]}


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    f = giod.open(tmp_path_factory.mktemp("kept") / "fed", create=True)
    out = {}
    for name, events in EVENTS.items():
        ds = f.create_dataset(name, synthetic.schema())
        with ds.writer(database_events=100, cluster_events=50) as w:
            w.append(events)
        out[name] = ds
    yield out
    f.close()


@pytest.fixture
def bound(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Decodes of Arrow batches of hits counted (the tag query reads the tags its own way); the kept clusters
    emptied before and after."""
    counts = {"decode": 0}
    real = ArrowContainerReader._decode

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["decode"] += "raw.tracker" in str(self.path)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ArrowContainerReader, "_decode", counting)
    clusters.forget()
    yield counts
    clusters.forget()


def _cut(fraction: float) -> str:
    ht = ak.to_numpy(EVENTS["sel"]["ht"])
    return f"ht > {float(np.quantile(ht, 1 - fraction))!r}"


def test_a_selection_read_again_keeps_its_clusters_between_lookups(both: dict[str, Any], bound: dict[str, int],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    sel, look = both["sel"], both["look"]
    expr = _cut(0.05)  # a few events in most clusters of hits
    want = ak.to_list(sel.select(expr).read(["hits"]))
    working = clusters._KEPT.nbytes  # what the selection keeps
    assert working > 0
    clusters.forget()
    monkeypatch.setattr(clusters, "CACHE_BYTES", int(working / clusters.PROTECTED) + 1)
    for _ in range(2):  # the second read promotes
        assert ak.to_list(sel.select(expr).read(["hits"])) == want
    before = bound["decode"]
    entries = np.arange(0, len(look), 50)  # every cluster of every database looked up in, once
    for entry in entries:
        assert look.event(int(entry)).ht == pytest.approx(float(EVENTS["look"]["ht"][entry]))
    assert bound["decode"] - before == len(entries)  # a cluster of hits decoded by each lookup
    assert len(clusters._KEPT.ghosts) > 0  # the lookups did not all fit beside the selection's clusters
    before = bound["decode"]
    assert ak.to_list(sel.select(expr).read(["hits"])) == want
    assert bound["decode"] == before  # nothing of the selection's was dropped for them


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
