"""A process's first read imports no pandas (about half a second of a first ``giod select``, ``ds.read`` or
``ds.event``), and the buffer views that spare it give what ``to_numpy`` and ``pa.array`` give.

Nothing on the read path is excluded, in either container format (Arrow, Parquet): reads whole and by
rows, selections over tags and objects, the tag index, one event, numpy output and the CLI's ``show``,
``select``, ``object`` and ``export-event`` all run without pandas.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import giod
from giod.errors import IntegrityError
from giod.storage.numpyview import chunked_values, numpy_array, offsets, unique, values
from giod.testing import synthetic

_CHILD = """
import sys
import giod
from giod.cli import main
fed = giod.open(sys.argv[1])
ds = fed["qcd"]
steps = [
    ("read", lambda: len(ds.read()) == 250),
    ("read columns", lambda: len(ds.read(["jets", "ht"])) == 250),
    ("read numpy", lambda: len(ds.read(["ht"], library="np")["ht"]) == 250),
    ("select", lambda: 0 < len(ds.select("njets >= 2 and ht > 50").read()) < 250),
    ("select objects", lambda: 0 < len(ds.select("count(jets.pt > 20) >= 2").read(["jets"])) < 250),
    ("iterate", lambda: sum(len(c) for c in ds.select("njets >= 2").iterate(["jets"], step_size=40)) > 0),
    ("event", lambda: ds.event(0)["run"] == 1),
    ("event late", lambda: len(ds.event(249, ["jets"])["jets"]) >= 0),
]
for name, step in steps:
    assert step(), name
    print(name, "pandas" in sys.modules)
for args in (["show", "qcd"], ["select", "qcd", "njets >= 2", "--limit", "3"], ["object", "db1/jets/0#0"],
             ["export-event", "qcd", "0", "-o", sys.argv[2]]):
    try:
        main(["-f", sys.argv[1], *args])
    except SystemExit as exc:
        assert exc.code == 0, (args, exc.code)
    print(" ".join(args[:1]), "pandas" in sys.modules)
"""


@pytest.fixture(scope="module", params=["arrow", "parquet"])
def federation(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("readimports") / "fed")
    fed = giod.open(path, create=True)
    ds = fed.create_dataset("qcd", synthetic.schema(), container_format=request.param)
    with ds.writer(database_events=100) as w:
        w.append(synthetic.events(250, seed=3))
    return path


def test_first_reads_import_no_pandas(federation: str) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    event = os.path.join(os.path.dirname(federation), "event.json")
    out = subprocess.run([sys.executable, "-c", _CHILD, federation, event], env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    steps = [line.rsplit(" ", 1) for line in out.stdout.splitlines() if line.endswith((" True", " False"))]
    assert [name for name, _ in steps] == ["read", "read columns", "read numpy", "select", "select objects",
                                           "iterate", "event", "event late", "show", "select", "object",
                                           "export-event"]
    assert [name for name, loaded in steps if loaded == "True"] == []
    assert os.path.getsize(event) > 0


_TYPES = [pa.bool_(), pa.int8(), pa.uint8(), pa.int16(), pa.uint32(), pa.int64(), pa.uint64(), pa.float16(),
          pa.float32(), pa.float64()]


@pytest.mark.parametrize("arrow_type", _TYPES)
def test_values_are_to_numpy(arrow_type: pa.DataType) -> None:
    """Whole, sliced and empty arrays, with nulls too (those through ``to_numpy``), and chunked ones."""
    raw = np.random.default_rng(2).integers(0, 2 if pa.types.is_boolean(arrow_type) else 100, 41)
    array = pa.array(raw).cast(arrow_type)
    nulls = pa.array([None if i % 5 == 0 else int(v) for i, v in enumerate(raw)]).cast(arrow_type)
    for part in (array, array.slice(5, 17), array.slice(9, 0), nulls):
        got, want = values(part), part.to_numpy(zero_copy_only=False)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    chunked = pa.chunked_array([array.slice(0, 10), array.slice(13, 8)])
    got, want = chunked_values(chunked), chunked.to_numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert chunked_values(pa.chunked_array([], type=arrow_type)).dtype == want.dtype


@settings(max_examples=200, deadline=None)
@given(arrow_type=st.sampled_from(_TYPES), n=st.integers(0, 40), start=st.integers(0, 9),
       extra=st.integers(-9, 9), seed=st.integers(0, 2**16))
def test_a_buffer_longer_than_its_values_is_read_and_a_shorter_one_refused(
        arrow_type: pa.DataType, n: int, start: int, extra: int, seed: int) -> None:
    """A file may give an array a data buffer of any length (a crafted one: found by `giod bench fuzz`):
    longer than its values, they are read as Arrow reads them; shorter, an IntegrityError, never a
    ValueError of numpy's nor fewer values."""
    raw = np.random.default_rng(seed).integers(0, 2 if pa.types.is_boolean(arrow_type) else 100, start + n)
    whole = pa.array(raw).cast(arrow_type)
    data = whole.buffers()[1].to_pybytes()
    need = (start + n + 7) // 8 if pa.types.is_boolean(arrow_type) else (start + n) * arrow_type.bit_width // 8
    size = max(0, need + extra)
    buffer = pa.py_buffer((data + bytes(max(0, size - len(data))))[:size])
    try:
        array = pa.Array.from_buffers(arrow_type, n, [None, buffer], offset=start)
    except pa.ArrowInvalid:  # Arrow's own check of a short buffer (a file's arrays are not always made so)
        assert size < need
        return
    if size >= need or n == 0:
        got, want = values(array), whole.slice(start, n).to_numpy(zero_copy_only=False)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    else:
        with pytest.raises(IntegrityError, match="buffer of"):
            values(array)


@pytest.mark.parametrize("arrow_type", _TYPES)
def test_numpy_array_is_pa_array(arrow_type: pa.DataType) -> None:
    raw = np.random.default_rng(3).integers(0, 2 if pa.types.is_boolean(arrow_type) else 100, 37)
    flat = pa.array(raw).cast(arrow_type).to_numpy(zero_copy_only=False)
    for part in (flat, flat[3:30:3], flat[:0]):
        got = numpy_array(part)
        assert got.equals(pa.array(part)), arrow_type
        got.validate(full=True)
        assert numpy_array(part, arrow_type).equals(pa.array(part, type=arrow_type))
    wider = numpy_array(flat.astype(np.int64), pa.float64())  # another type: converted as pa.array does
    assert wider.equals(pa.array(flat.astype(np.int64), type=pa.float64()))


@pytest.mark.parametrize("large", [False, True])
def test_offsets_are_to_numpy(large: bool) -> None:
    lists = pa.array([[1, 2], [], [3], [4, 5, 6], [7]], type=pa.large_list(pa.int32()) if large else None)
    for part in (lists, lists.slice(1, 3), lists.slice(4, 0)):
        got, want = offsets(part), part.offsets.to_numpy()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


_COUNT = """
import sys
import giod
fed = giod.open(sys.argv[1])
ds = fed["big"]
count = len(ds.select("ht > 150").entries())
rows = ds.select("ht > 150").read(["ht"])
print(count, len(rows), "numpy.ma" in sys.modules)
"""


def test_a_first_count_through_the_tag_index_imports_no_numpy_ma(tmp_path) -> None:
    # np.unique imports numpy.ma on its first call: ~15 ms of a new process's first count
    fed = giod.open(tmp_path / "fed", create=True)
    ds = fed.create_dataset("big", synthetic.schema())
    with ds.writer(database_events=5000) as w:  # past one block of the tag index: each database has one
        w.append(synthetic.events(10_000, seed=4))
    want = int(np.count_nonzero(np.asarray(ds.read(["ht"])["ht"]) > 150))
    fed.close()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", _COUNT, str(tmp_path / "fed")], env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(want), str(want), "False"]


@given(st.lists(st.integers(-(2**62), 2**62), max_size=60), st.sampled_from([np.int32, np.int64]))
def test_unique_is_numpys(items: list[int], dtype: type) -> None:
    data = np.asarray([min(max(i, np.iinfo(dtype).min), np.iinfo(dtype).max) for i in items], dtype=dtype)
    got = unique(data)
    assert got.dtype == data.dtype and np.array_equal(got, np.unique(data))
