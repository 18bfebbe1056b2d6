"""The dataset's merged tag index and entry map: the full scan's answer at every pinned version."""

from __future__ import annotations

import tempfile
from pathlib import Path

import awkward as ak
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.core.test_tagindex import _YAML, tag_columns
from tests.test_expression_properties import SETTINGS, expressions, parsed

import giod
from giod.errors import NotFound
from giod.read import datasetindex, locate, selection, tagindex


@settings(SETTINGS, max_examples=15)
@given(st.lists(expressions(), min_size=1, max_size=4), tag_columns(nulls=False), st.integers(3, 40))
def test_merged_selections_equal_the_full_scan(generated, columns, per_database):
    """Tags with nan and infinities over many small databases: the merged index gives the scan's entries."""
    schema = giod.Schema.from_text(_YAML)
    events = ak.Array({name: ak.from_arrow(col) for name, col in columns.items()})
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setattr(tagindex, "BLOCK", 8)
        mp.setattr(tagindex, "MAX_SHARE", 1.0)  # the merged index always answers
        mp.setattr(selection, "MERGE_FROM", 1)
        mp.setattr(selection, "MERGE_AT_ONCE", 1)  # merged from the first selection
        fed = giod.open(Path(tmp) / "fed", create=True)
        try:
            ds = fed.create_dataset("d", schema)
            with ds.writer(database_events=per_database) as w:
                w.append(events)
            for one in generated:
                expression = parsed(one)
                if expression is None or not expression.fields:
                    continue
                want = np.flatnonzero(expression.evaluate(columns))
                sel = ds.select(expression.text)
                np.testing.assert_array_equal(sel.entries(), want, err_msg=one[1])
                assert len(sel) == len(want)
                if sel.databases():  # (none left by the catalog's statistics: nothing to merge)
                    assert datasetindex.cached(sel.dataset, sorted(expression.fields))  # merged, not per database
                    again = ds.select(expression.text)
                    assert len(again) == len(want), one[1]  # counted through the merged index
                    # a cut on one tag is counted without a plan (its whole blocks unread)
                    assert ("_plan" in again.__dict__) == (len(expression.fields) != 1)
        finally:
            fed.close()


def _write(ds, values: np.ndarray, per_database: int) -> None:
    with ds.writer(database_events=per_database) as w:
        w.append(ak.Array({"f32": values.astype(np.float32), "i32": np.arange(len(values), dtype=np.int32)}))


_SCHEMA = """schema_version: 1
name: few
types:
  Hit:
    fields: {x: float32}
collections:
  hits: Hit
tags:
  f32: float32
  i32: int32
"""


def test_a_pinned_selection_sees_its_version_and_later_ones_merge_only_what_is_new(local_fed, monkeypatch):
    """Commits after a pin do not show through the cached index; the next version merges only the new
    databases (the tag indexes of the old ones are not read again)."""
    monkeypatch.setattr(tagindex, "MAX_SHARE", 1.0)  # two blocks of 4,096: let the index answer
    monkeypatch.setattr(tagindex, "BLOCK", 128)  # databases of 500 events: several blocks, an index each
    monkeypatch.setattr(selection, "MERGE_AT_ONCE", 1)  # merged from the first selection
    rng = np.random.default_rng(3)
    ds = local_fed.create_dataset("grow", giod.Schema.from_text(_SCHEMA))
    first = rng.random(5_000)
    _write(ds, first, 500)  # ten databases
    pinned = ds.at(local_fed.version)
    before = pinned.select("f32 > 0.99")
    want_before = np.flatnonzero(first.astype(np.float32) > np.float32(0.99))
    np.testing.assert_array_equal(before.entries(), want_before)
    assert datasetindex.cached(before.dataset, ["f32"])

    second = rng.random(3_000) + 0.5  # more events above the cut
    _write(ds, second, 500)
    every = np.concatenate([first, second]).astype(np.float32)
    opened: list[str] = []
    real = local_fed.store.read_container

    def counted(container, read):
        opened.append(container.path)
        return real(container, read)

    monkeypatch.setattr(local_fed.store, "read_container", counted)
    after = ds.select("f32 > 0.99")
    np.testing.assert_array_equal(after.entries(), np.flatnonzero(every > np.float32(0.99)))
    index_reads = [p for p in opened if p.endswith(f"{tagindex.TAG_INDEX}.arrow")]
    assert len(index_reads) == 6, opened  # only the six new databases' indexes were merged in
    # the pinned selection and a new one at the old version still see the first ten databases only
    np.testing.assert_array_equal(pinned.select("f32 > 0.99").entries(), want_before)
    assert len(before) == len(want_before)
    assert len(pinned.select("f32 > 0.99")) == len(want_before)


def test_the_merged_index_is_built_by_the_second_selection_on_its_tags_or_at_once_for_many(local_fed,
                                                                                           monkeypatch):
    """A process that selects once asks each database's own index (building the merged one costs about a
    scan of the tags); the next selection naming the same tags builds it; from MERGE_AT_ONCE candidates
    it is built at once. Every answer is the scan's."""
    monkeypatch.setattr(tagindex, "MAX_SHARE", 1.0)
    monkeypatch.setattr(tagindex, "BLOCK", 128)  # databases of 400 events: several blocks, an index each
    rng = np.random.default_rng(5)
    ds = local_fed.create_dataset("policy", giod.Schema.from_text(_SCHEMA))
    values = rng.random(4_000)
    _write(ds, values, 400)  # ten databases, at least MERGE_FROM
    f32 = values.astype(np.float32)
    opened: list[str] = []
    real = local_fed.store.read_container
    monkeypatch.setattr(local_fed.store, "read_container",
                        lambda container, read: opened.append(container.path) or real(container, read))
    first = ds.select("f32 > 0.9")
    np.testing.assert_array_equal(first.entries(), np.flatnonzero(f32 > 0.9))
    assert not datasetindex.cached(first.dataset, ["f32"])
    assert len([p for p in opened if p.endswith(f"{tagindex.TAG_INDEX}.arrow")]) == 10  # each its own index
    other = ds.select("i32 >= 0 and i32 < 5")  # another tag: its first time too
    np.testing.assert_array_equal(other.entries(), np.arange(5))
    assert not datasetindex.cached(other.dataset, ["i32"])
    again = ds.select("f32 > 0.95")
    np.testing.assert_array_equal(again.entries(), np.flatnonzero(f32 > 0.95))
    assert datasetindex.cached(again.dataset, ["f32"]) and not datasetindex.cached(again.dataset, ["i32"])
    # many candidates: merged by the first selection
    monkeypatch.setattr(selection, "MERGE_AT_ONCE", 10)
    at_once = ds.select("i32 >= 100 and i32 < 4000")
    np.testing.assert_array_equal(at_once.entries(), np.arange(100, 4_000))
    assert datasetindex.cached(at_once.dataset, ["i32"])


def test_a_pass_that_replaces_tags_is_merged_again_and_old_versions_keep_old_values(local_fed):
    ds = local_fed.create_dataset("retag", giod.Schema.from_text(_SCHEMA))
    values = np.linspace(0.0, 1.0, 4_000)
    _write(ds, values, 400)
    old = ds.at(local_fed.version)
    before = np.flatnonzero(values.astype(np.float32) > 0.995)
    np.testing.assert_array_equal(old.select("f32 > 0.995").entries(), before)
    db = ds.databases()[0]
    with ds.add_containers(program="retag", replace=True) as p:  # the first database's tags, made all large
        p.write(db, ak.Array({"f32": np.ones(400, np.float32), "i32": np.arange(400, dtype=np.int32)}),
                containers=["tag"])
    new = np.concatenate([np.ones(400), values[400:]]).astype(np.float32)
    np.testing.assert_array_equal(ds.select("f32 > 0.995").entries(), np.flatnonzero(new > 0.995))
    np.testing.assert_array_equal(old.select("f32 > 0.995").entries(), before)


def test_selected_events_read_across_databases_equal_the_scan(local_fed):
    ds = local_fed.create_dataset("read", giod.Schema.from_text(_SCHEMA))
    rng = np.random.default_rng(8)
    values = rng.random(3_000).astype(np.float32)
    hits = ak.Array([[{"x": float(v)}] * (i % 3) for i, v in enumerate(values)])
    with ds.writer(database_events=250) as w:
        w.append(ak.Array({"f32": values, "i32": np.arange(3_000, dtype=np.int32), "hits": hits}))
    got = ds.select("f32 > 0.98").read(["hits", "i32"])
    keep = values > np.float32(0.98)
    np.testing.assert_array_equal(ak.to_numpy(got["i32"]), np.flatnonzero(keep))
    assert ak.to_list(got["hits"]) == ak.to_list(hits[keep])


@pytest.mark.parametrize("by_index", [False, True], ids=["entry map", "catalog index"])
def test_event_by_entry_finds_its_database(local_fed, monkeypatch, by_index):
    """Found through the snapshot's entry map when a selection built it, else through the catalog's index
    per entry, each record asked once per version; one event never lists the dataset."""
    ds = local_fed.create_dataset("events", giod.Schema.from_text(_SCHEMA))
    _write(ds, np.linspace(0.0, 1.0, 1_000), 90)  # databases of 90 events and one of 10
    catalog = local_fed.store.catalog
    asked: list[int] = []
    ask = catalog.database_at
    monkeypatch.setattr(catalog, "database_at", lambda name, entry, version=None: asked.append(entry) or ask(
        name, entry, version))
    pinned = ds.snapshot.pinned()
    if by_index:
        monkeypatch.setattr(catalog, "databases", None)  # a map would list every database
    else:
        locate.locate(pinned, np.array([0]))
    for entry in [0, 89, 90, 91, 539, 989, 990, 999, 0, 95]:
        assert ds.event(entry)["i32"] == entry
    assert asked == ([] if not by_index else [0, 90, 539, 989, 990])  # a database seen before asks nothing
    for entry in [-1, 1_000]:
        with pytest.raises(NotFound, match="no entry"):
            ds.event(entry)
    if by_index:
        monkeypatch.undo()
    whole = ak.to_list(ds.read())
    assert [ak.to_list(ds.event(i)) for i in range(0, 1_000, 7)] == whole[::7]  # every event as the full read
