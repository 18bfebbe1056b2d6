"""Properties of the server's bounded bookkeeping, for any sequence of operations: the caches and the
upload quota never hold more than their bounds, and their counts are exact."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.errors import QuotaExceeded
from giod.server.cache import ETagCache, QueryCache
from giod.server.quota import UploadQuota

paths = st.text(alphabet="abc/", min_size=1, max_size=40)
etag_ops = st.lists(st.tuples(st.sampled_from(["put", "get"]), paths, st.integers(0, 3),
                              st.text(alphabet="0123456789abcdef", max_size=80)), max_size=200)


@settings(max_examples=200, deadline=None)
@given(ops=etag_ops, entries=st.integers(1, 12), capacity=st.integers(0, 3000))
def test_etag_cache_stays_within_its_bounds_and_keeps_the_newest(ops, entries, capacity) -> None:
    cache = ETagCache(max_entries=entries, capacity=capacity)
    model: dict[tuple, str] = {}  # what a lookup may answer: the last value put under each key
    for op, path, size, value in ops:
        key = ("local", path, size, 0)
        if op == "put":
            cache.put(key, value)
            model[key] = value
            if cache.cost(key, value) <= capacity:
                assert cache.get(key) == value  # the entry just put is never the one evicted
        else:
            got = cache.get(key)
            assert got is None or got == model.get(key)
        assert len(cache) <= entries and cache.held <= capacity
        assert cache.held == sum(cache.cost(k, v) for k, (v, _) in cache._items.items())


@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.integers(0, 100), max_size=60), capacity=st.integers(0, 400), largest=st.integers(0, 150))
def test_query_cache_holds_at_most_its_capacity(sizes, capacity, largest) -> None:
    cache = QueryCache(capacity, largest)
    for i, n in enumerate(sizes):
        cache.put(i % 7, b"x" * n)
        assert cache.held <= capacity and all(len(v) <= largest for v, _ in cache._items.values())


quota_ops = st.lists(st.tuples(st.sampled_from(["reserve", "arrived", "release"]), st.integers(0, 2),
                               st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 600)), max_size=80)


@settings(max_examples=200, deadline=None)
@given(ops=quota_ops, per_token=st.integers(0, 1000), gone=st.sets(st.sampled_from(["a", "b", "c", "d"])))
def test_upload_quota_never_exceeded_and_counted_exactly(ops, per_token, gone) -> None:
    quota = UploadQuota(per_token)
    model: dict[int, dict[str, int]] = {}
    arriving: set[tuple[int, str]] = set()

    def still_held(item: tuple[str, str]) -> bool:
        return item[1] not in gone  # files named in ``gone`` were committed or removed meanwhile

    for op, token, path, size in ops:
        mine = model.setdefault(token, {})
        if op == "reserve":
            others = {p: n for p, n in mine.items() if p != path}
            kept = {p: n for p, n in others.items() if (token, p) in arriving or still_held(("local", p))}
            try:
                quota.reserve(token, ("local", path), size, still_held)
            except QuotaExceeded:
                assert sum(kept.values()) + size > per_token  # refused only when even a fresh count is over
                if sum(others.values()) + size > per_token:
                    model[token] = {p: n for p, n in mine.items() if p == path or p in kept}
            else:
                if sum(others.values()) + size > per_token:  # admitted after pruning
                    mine = model[token] = {p: n for p, n in mine.items() if p == path or p in kept}
                mine[path] = size
                arriving.add((token, path))
        elif op == "arrived":
            arriving.discard((token, path))
            quota.arrived(token, ("local", path))
        else:
            arriving.discard((token, path))
            mine.pop(path, None)
            quota.release(token, ("local", path))
        for t, items in model.items():
            assert quota.held(t) == sum(items.values()) <= max(per_token, 0)


def test_a_refused_upload_names_the_quota() -> None:
    quota = UploadQuota(100)
    quota.reserve(1, ("local", "a"), 80, lambda item: True)
    with pytest.raises(QuotaExceeded, match="quota of 100"):
        quota.reserve(1, ("local", "b"), 30, lambda item: True)
    quota.reserve(2, ("local", "b"), 30, lambda item: True)  # another token has its own
    quota.arrived(1, ("local", "a"))
    quota.reserve(1, ("local", "b"), 30, lambda item: False)  # "a" was committed meanwhile
    assert quota.held(1) == 30
