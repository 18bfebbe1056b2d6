"""Random object selections on a real federation equal the same cut computed in awkward over all events."""

from __future__ import annotations

from pathlib import Path

import awkward as ak
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import giod
from giod.testing import synthetic

EVENTS = 300


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory):
    path: Path = tmp_path_factory.mktemp("objects") / "fed"
    events = synthetic.events(EVENTS, seed=41)
    events = events[np.argsort(ak.to_numpy(events.ht), kind="stable")]  # databases with distinct ht ranges
    fed = giod.open(path, create=True)
    ds = fed.create_dataset("qcd", synthetic.schema())
    with ds.writer(database_events=100, cluster_events=25) as w:
        w.append(events)
    yield ds, events
    fed.close()


def _missing_false(values: ak.Array) -> np.ndarray:
    return ak.to_numpy(ak.fill_none(values, False)).astype(bool)


@st.composite
def object_term(draw):
    """(text, reference over all events) of one condition over jets or tracks."""
    collection, field, low, high = draw(st.sampled_from([("jets", "pt", 30, 90), ("tracks", "pt", 1, 4),
                                                         ("tracks", "eta", -2, 2)]))
    cut = draw(st.integers(low, high))
    kind = draw(st.sampled_from(["count", "any", "all", "sum", "max", "min", "index", "counter"]))

    def values(e):
        return ak.values_astype(e[collection][field], np.float64)

    if kind == "count":
        k = draw(st.integers(0, 3))
        return f"count({collection}.{field} > {cut}) >= {k}", lambda e: ak.sum(values(e) > cut, axis=1) >= k
    if kind in ("any", "all"):
        reduce = ak.any if kind == "any" else ak.all
        return f"{kind}({collection}.{field} > {cut})", lambda e: reduce(values(e) > cut, axis=1)
    if kind == "sum":
        return f"sum({collection}.{field}) > {cut * 3}", lambda e: ak.sum(values(e), axis=1) > cut * 3
    if kind in ("max", "min"):
        reduce = ak.max if kind == "max" else ak.min
        return f"{kind}({collection}.{field}) > {cut}", lambda e: _missing_false(reduce(values(e), axis=1) > cut)
    if kind == "index":
        i = draw(st.integers(-2, 2))
        return (f"{collection}.{field}[{i}] > {cut}",
                lambda e: _missing_false(ak.firsts(values(e)[:, i : i + 1 or None], axis=1) > cut))
    n = draw(st.integers(0, 110))
    name = draw(st.sampled_from(["nhits", "ncells"]))
    return f"{name} < {n}", lambda e: ak.num(e[name[1:]], axis=1) < n


@st.composite
def selection(draw):
    (a, fa), (b, fb) = draw(object_term()), draw(object_term())
    ht = draw(st.integers(0, 400))
    shape = draw(st.sampled_from(["{tag} and {a}", "{tag} and {a} and {b}", "{a} or {b}",
                                  "{tag} and ({a} or not {b})"]))
    text = shape.format(tag=f"ht > {ht}", a=f"({a})", b=f"({b})")
    tag = lambda e: ak.to_numpy(e.ht) > ht
    references = {
        "{tag} and {a}": lambda e: tag(e) & _missing_false(fa(e)),
        "{tag} and {a} and {b}": lambda e: tag(e) & _missing_false(fa(e)) & _missing_false(fb(e)),
        "{a} or {b}": lambda e: _missing_false(fa(e)) | _missing_false(fb(e)),
        "{tag} and ({a} or not {b})": lambda e: tag(e) & (_missing_false(fa(e)) | ~_missing_false(fb(e))),
    }
    return text, references[shape]


@settings(max_examples=40, deadline=None)
@given(chosen=selection())
def test_random_object_selections_equal_awkward(written, chosen):
    ds, events = written
    text, reference = chosen
    sel = ds.select(text)
    expected = np.flatnonzero(reference(events))
    np.testing.assert_array_equal(sel.entries(), expected, err_msg=text)
    # the databases skipped by the tag terms hold no selected event
    kept = {db.id for db in sel.databases()}
    for db in ds.databases():
        if db.id not in kept:
            assert not np.any((expected >= db.first_entry) & (expected < db.stop_entry)), text
