"""The tag index sorts a column without nulls in numpy: the same arrays, and the same index file bytes, as
Arrow's sort kernel (stable, NaN last, -0.0 equal to 0.0)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.read import tagindex

_ELEMENTS = {
    pa.float32(): st.sampled_from([0.0, -0.0, float("nan"), 1.5, -1.5, float("inf")])
    | st.floats(allow_nan=True, allow_infinity=True, width=32),
    pa.float64(): st.sampled_from([0.0, -0.0, float("nan"), 2.0, float("-inf")]) | st.floats(),
    pa.int32(): st.integers(-3, 3) | st.integers(-(2**31), 2**31 - 1),
    pa.int64(): st.integers(-(2**63), 2**63 - 1),
    pa.uint8(): st.integers(0, 255),
    pa.uint64(): st.integers(0, 2**64 - 1),
    pa.int16(): st.integers(-5, 5),
    pa.bool_(): st.booleans(),
}


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _both(tags: pa.Table) -> tuple[tuple[pa.Table, dict[str, str]], tuple[pa.Table, dict[str, str]]]:
    """The index built as a commit builds it, and with every column sorted by Arrow."""
    fast = tagindex.build(tags, "daq/x/tag.arrow", "crc")
    real = tagindex._numpy_sortable
    tagindex._numpy_sortable = lambda col: False
    try:
        slow = tagindex.build(tags, "daq/x/tag.arrow", "crc")
    finally:
        tagindex._numpy_sortable = real
    assert fast is not None and slow is not None
    return fast, slow


@given(st.data())
@settings(max_examples=300, deadline=None)
def test_numpy_sorts_a_column_as_arrow_does(data):
    arrow_type = data.draw(st.sampled_from(list(_ELEMENTS)))
    col = pa.array(data.draw(st.lists(_ELEMENTS[arrow_type], max_size=60)), type=arrow_type)
    offset = data.draw(st.integers(0, min(3, len(col))))
    col = col.slice(offset)  # a slice of a batch: its buffer starts before its first value
    assert tagindex._numpy_sortable(col)
    values, order, head = tagindex._sorted_numpy(col)
    want_values, want_order, want_head = tagindex._sorted_arrow(col)
    # the bytes, not equals(): NaN is not equal to itself
    assert _ipc(pa.table({"v": values, "o": order})) == _ipc(pa.table({"v": want_values,
                                                                      "o": want_order.cast(pa.uint32())}))
    assert head.dtype == want_head.dtype and head.tobytes() == want_head.tobytes()  # -0.0 and NaN bit for bit


@given(st.data())
@settings(max_examples=100, deadline=None)
def test_the_index_of_a_commits_tags_is_the_same_table_and_bytes(data):
    n = data.draw(st.integers(0, 40))
    cols = {}
    for k, arrow_type in enumerate(data.draw(st.lists(st.sampled_from(list(_ELEMENTS)), min_size=1, max_size=5))):
        cols[f"t{k}"] = pa.array(data.draw(st.lists(_ELEMENTS[arrow_type], min_size=n, max_size=n)), type=arrow_type)
    if data.draw(st.booleans()) and n:  # a tag with nulls goes Arrow's way, beside the others
        cols["nulls"] = pa.array([None if i % 3 == 0 else float(i % 5) for i in range(n)], type=pa.float64())
    tags = pa.table(cols)
    fast, slow = _both(tags)
    assert fast[1] == slow[1]  # the directory: bounds of each block
    assert _ipc(fast[0]) == _ipc(slow[0])


def test_float16_and_nulls_stay_with_arrow():
    assert not tagindex._numpy_sortable(pa.array(np.array([1.0, 0.5], dtype=np.float16)))
    assert not tagindex._numpy_sortable(pa.array([1.0, None]))
    assert tagindex._numpy_sortable(pa.array([True, False]))


@pytest.mark.parametrize("n", [0, 1, 5000])
def test_sizes_around_a_block(n):
    rng = np.random.default_rng(n)
    tags = pa.table({"x": rng.integers(0, 7, n).astype(np.int32), "y": rng.normal(size=n)})
    fast, slow = _both(tags)
    assert fast[1] == slow[1] and _ipc(fast[0]) == _ipc(slow[0])
