"""A process's first write imports no pandas (0.6 s, more than a crash test's kill window under load)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from giod.read.tagindex import _values

_CHILD = """
import sys
import giod
from giod.testing import synthetic
fed = giod.open(sys.argv[1], create=True)
ds = fed.create_dataset("qcd", synthetic.schema())
with ds.writer(database_events=100) as w:
    w.append(synthetic.events(250, seed=3))
assert len(ds) == 250
print(sorted(m for m in sys.modules if m == "pandas" or m.startswith("pandas.")))
"""


def test_first_write_imports_no_pandas(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "fed")], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("arrow_type", [pa.bool_(), pa.int8(), pa.uint16(), pa.int32(), pa.uint64(), pa.float16(),
                                        pa.float32(), pa.float64()])
def test_tag_values_as_arrow_gives_them(arrow_type):
    """The tag index reads sorted tag values from their buffer as ``to_numpy`` would, sliced ones too."""
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 2 if pa.types.is_boolean(arrow_type) else 100, 37)
    array = pa.array(raw).cast(arrow_type)
    for part in (array, array.slice(3, 20), array.slice(11, 0)):
        got = _values(part)
        want = part.to_numpy(zero_copy_only=False)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
