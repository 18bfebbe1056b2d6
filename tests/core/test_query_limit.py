"""``Dataset.query(limit=…)``: a whole number from 0 up to a bound, or a typed error."""

from __future__ import annotations

import numpy as np
import pytest

import giod
from giod.testing import synthetic


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory):
    fed = giod.open(tmp_path_factory.mktemp("limits") / "fed", create=True)
    ds = fed.create_dataset("qcd", synthetic.schema())
    with ds.writer(database_events=100) as w:
        w.append(synthetic.events(300, seed=4))
    yield ds
    fed.close()


@pytest.mark.parametrize("limit", [-1, -800, 10**12, 2.5, "5", True])
def test_a_bad_query_limit_is_a_data_error(stored, limit):
    ds = stored
    with pytest.raises(giod.DataError, match="limit must be a whole number"):
        ds.query("ht > 0", ["ht"], limit=limit)


def test_a_query_limit_bounds_the_answer(stored):
    ds = stored
    assert len(ds.query("ht > 0", ["ht"], limit=0)) == 0
    assert len(ds.query("ht > 0", ["ht"], limit=np.int64(7))) == 7
    assert len(ds.query("ht > 0", ["ht"], limit=10**9)) == len(ds.select("ht > 0"))
