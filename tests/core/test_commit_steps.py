"""The small commit's steps kept per schema or done in numpy give what the generic steps give."""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from giod.schema import arrow
from giod.storage.numpyview import numpy_array
from giod.store import tagstats
from giod.store.tagstats import merge_stats
from giod.testing import synthetic

NUMBER_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                np.float16, np.float32, np.float64]
SPECIAL = [0.0, -0.0, math.nan, math.inf, -math.inf, 1.5, -2.25]


def _arrow_stats(stats: dict[str, tuple[float, float]], table: pa.Table) -> None:
    """merge_stats as it was: every column's bounds by Arrow's min_max (the numpy path never taken)."""
    with mock.patch.object(tagstats, "_plain_bounds", lambda col: None):
        merge_stats(stats, table)


def _same(a: dict[str, tuple[float, float]], b: dict[str, tuple[float, float]]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        for x, y in zip(a[name], b[name], strict=True):
            assert (math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y)), \
                (name, a[name], b[name])


@st.composite
def _columns(draw: st.DrawFn) -> pa.ChunkedArray:
    dtype = np.dtype(draw(st.sampled_from([t for t in NUMBER_TYPES if t is not np.float16])))  # Arrow: no kernel
    if dtype.kind == "f":
        elements = st.one_of(st.sampled_from(SPECIAL), st.floats(width=8 * dtype.itemsize))
    else:
        elements = st.integers(int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    chunks = draw(st.lists(hnp.arrays(dtype, st.integers(0, 12), elements=elements), min_size=1, max_size=3))
    nulls = draw(st.booleans())
    arrays = [pa.array(c, mask=(np.arange(len(c)) % 3 == 1) if nulls else None) for c in chunks]
    return pa.chunked_array(arrays, type=arrays[0].type)


@settings(max_examples=300, deadline=None)
@given(st.lists(_columns(), min_size=1, max_size=3), st.booleans())
def test_tag_bounds_are_arrows(columns: list[pa.ChunkedArray], twice: bool) -> None:
    ours: dict[str, tuple[float, float]] = {}
    theirs: dict[str, tuple[float, float]] = {}
    for _ in range(2 if twice else 1):
        for k, column in enumerate(columns):  # t0 widened by a later column, as a writer's appends widen it
            table = pa.table({f"t{k % 2}": column})
            merge_stats(ours, table)
            _arrow_stats(theirs, table)
    _same(ours, theirs)


@pytest.mark.parametrize("values", [[0.0, -0.0], [-0.0, 0.0], [1.0, math.nan], [math.nan], [-0.0, 3.0], [-3.0, 0.0]])
def test_tag_bounds_leave_nan_and_zero_to_arrow(values: list[float]) -> None:
    table = pa.table({"x": pa.array(values, pa.float64())})
    ours: dict[str, tuple[float, float]] = {}
    theirs: dict[str, tuple[float, float]] = {}
    merge_stats(ours, table)
    _arrow_stats(theirs, table)
    _same(ours, theirs)


def test_collection_types_are_kept_per_schema() -> None:
    schema = synthetic.schema()
    for name in schema.collections:
        first = schema.arrow_type(name)
        assert first.equals(arrow.collection_arrow_type(schema.collection_type(name)))
        assert schema.arrow_type(name) is first


@settings(max_examples=200, deadline=None)
@given(hnp.arrays(st.sampled_from([np.dtype(t) for t in NUMBER_TYPES if t is not np.float16]),
                  st.integers(0, 20)), st.booleans())
def test_numpy_arrays_wrap_as_pa_array(values: np.ndarray, typed: bool) -> None:
    expected = pa.array(values)
    got = numpy_array(values, expected.type if typed else None)
    assert got.type == expected.type
    assert got.equals(expected) or (values.dtype.kind == "f" and np.array_equal(
        got.to_numpy(zero_copy_only=False), values, equal_nan=True))


def test_the_first_container_is_closed_by_the_caller_the_others_beside_it() -> None:
    import threading

    from giod.write.writer import _each

    where: dict[str, str] = {}

    def close(name: str) -> str:
        where[name] = threading.current_thread().name
        return name.upper()

    assert _each(close, ["a", "b", "c"]) == ["A", "B", "C"]
    assert where["a"] == threading.current_thread().name
    assert {where["b"], where["c"]} <= {t.name for t in threading.enumerate()} - {where["a"]}
    assert _each(close, ["a", "b"], parallel=False) == ["A", "B"]


def test_a_failed_close_of_the_caller_is_raised_once_every_other_close_has_ended() -> None:
    import threading

    from giod.write.writer import _each

    done = threading.Event()
    ended: list[str] = []

    def close(name: str) -> str:
        if name == "a":
            raise OSError("disk full")
        assert done.wait(10)  # still running when the caller's close fails
        ended.append(name)
        if name == "c":
            raise ValueError("later")
        return name

    threading.Timer(0.05, done.set).start()
    with pytest.raises(OSError, match="disk full"):  # the first name's error, as before
        _each(close, ["a", "b", "c"])
    assert sorted(ended) == ["b", "c"]
    done.clear()
    threading.Timer(0.05, done.set).start()
    with pytest.raises(ValueError, match="later"):
        _each(lambda n: close(n) if n != "a" else n, ["a", "b", "c"])
