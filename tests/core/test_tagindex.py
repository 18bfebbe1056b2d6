"""The tag index: selections through it equal the full scan, and a narrow one reads little."""

from __future__ import annotations

import tempfile
from pathlib import Path

import awkward as ak
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.test_expression_properties import FIELDS, SETTINGS, SPECIAL_FLOATS, expressions, parsed

import giod
from giod.expression import parse
from giod.read import tagindex
from giod.storage.formats.arrow import ArrowContainerReader

_YAML = """schema_version: 1
name: tagged
types:
  Hit:
    fields: {x: float32}
collections:
  hits: Hit
tags:
""" + "".join(f"  {name}: {dtype}\n" for name, dtype in FIELDS.items())


@st.composite
def tag_columns(draw, nulls: bool = True) -> dict[str, pa.Array]:
    """Random tags of a few blocks: narrow or wide ranges, runs of equal values, special floats, nulls."""
    size = draw(st.integers(1, 120))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    sort = draw(st.booleans())  # clustered data: values grow with the entry
    columns: dict[str, pa.Array] = {}
    for name, dtype in FIELDS.items():
        if dtype == "bool":
            values = rng.random(size) < draw(st.sampled_from([0.0, 0.5, 1.0]))
        elif dtype.startswith(("int", "uint")):
            low = draw(st.integers(0 if dtype == "uint8" else -9, 9))
            values = rng.integers(low, min(low + draw(st.integers(0, 12)), 12) + 1, size)
        else:
            values = draw(st.integers(-20, 20)) / 2 + draw(st.sampled_from([0.0, 0.5, 30.0])) * rng.random(size)
            special = rng.random(size) < draw(st.sampled_from([0.0, 0.0, 0.2]))
            values[special] = rng.choice(SPECIAL_FLOATS, int(special.sum()))
        if sort:
            values = np.sort(values)
        missing = rng.random(size) < draw(st.sampled_from([0.0, 0.0, 0.3])) if nulls else None
        arrow_type = pa.type_for_alias(dtype)
        columns[name] = pa.array(values.astype(arrow_type.to_pandas_dtype()), arrow_type, mask=missing)
    return columns


@settings(SETTINGS, max_examples=300)
@given(expressions(), tag_columns(), st.sampled_from([0.25, 1.0]))
def test_index_selects_what_the_full_scan_selects(generated, columns, share):
    """Built and queried in memory, nulls included: the index's answer is the scan's, or it declines."""
    expression = parsed(generated)
    if expression is None or not expression.fields:
        return
    reads = []
    with pytest.MonkeyPatch.context() as mp:
        # blocks of 8 positions: random data of a hundred events spans many of them
        mp.setattr(tagindex, "BLOCK", 8)
        mp.setattr(tagindex, "MAX_SHARE", share)
        built = tagindex.build(pa.table(columns), "d/x/tag.arrow", "crc32c:0")
        assert built is not None
        index, meta = built
        directory = tagindex.Directory.of(index.schema.with_metadata(meta))

        def read(blocks, names):
            reads.append(blocks)
            return pa.concat_tables([index.slice(int(b) * 8, 8) for b in blocks]).select(names)

        got = tagindex.select(expression, directory, read)
    want = np.flatnonzero(expression.evaluate(columns))
    if got is None:
        assert share < 1.0, "with no bound on its share the index always answers"
        return
    np.testing.assert_array_equal(got, want, err_msg=generated[1])
    for blocks in reads:  # only blocks of the index, each once, never past its share
        assert len(blocks) == len(set(blocks.tolist())) <= max(1, share * directory.n_blocks)


@settings(SETTINGS, max_examples=40)
@given(st.lists(expressions(), min_size=1, max_size=4), tag_columns(nulls=False))
def test_selections_of_a_federation_equal_the_full_scan(generated, columns):
    """Written, committed and selected through a real catalog and real files, index or not."""
    schema = giod.Schema.from_text(_YAML)
    events = ak.Array({name: ak.from_arrow(col) for name, col in columns.items()})
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setattr(tagindex, "BLOCK", 8)
        mp.setattr(tagindex, "MAX_SHARE", 1.0)
        mp.setattr(tagindex, "worth_writing", lambda events: True)  # an index however small the database
        fed = giod.open(Path(tmp) / "fed", create=True)
        try:
            ds = fed.create_dataset("d", schema)
            with ds.writer(database_events=50) as w:
                w.append(events)
            assert all(db.container(tagindex.TAG_INDEX) is not None for db in ds.databases())
            for one in generated:
                expression = parsed(one)
                if expression is None:
                    continue
                want = np.flatnonzero(expression.evaluate(columns))
                sel = ds.select(expression.text)
                np.testing.assert_array_equal(sel.entries(), want, err_msg=one[1])
                if expression.fields:
                    for db in sel.databases():  # the index answered, not the fallback
                        assert sel._indexed(db, db.container("tag")) is not None
        finally:
            fed.close()


def _clustered(fed, events: int, database_events: int):
    schema = giod.Schema.from_text(_YAML)
    rng = np.random.default_rng(5)
    columns = {name: np.sort(rng.integers(0, 1000, events)).astype(pa.type_for_alias(dtype).to_pandas_dtype())
               if dtype != "bool" else rng.random(events) < 0.5 for name, dtype in FIELDS.items()}
    columns["f64"] = np.linspace(0.0, 1.0, events)  # ordered with the entry: clustered data
    columns["f32"] = rng.random(events).astype(np.float32)  # independent of the entry
    ds = fed.create_dataset("clustered", schema)
    with ds.writer(database_events=database_events) as w:
        w.append(ak.Array(columns))
    return ds, columns


class _Bytes:
    """Counts the bytes Arrow containers read (footers and record batches), per file name."""

    def __init__(self, monkeypatch):
        self.by_file: dict[str, int] = {}
        real = ArrowContainerReader._ranges

        def counted(reader, ranges):
            name = reader.path.rsplit("/", 1)[-1]
            self.by_file[name] = self.by_file.get(name, 0) + sum(b - a for a, b in ranges)
            return real(reader, ranges)

        monkeypatch.setattr(ArrowContainerReader, "_ranges", counted)


@pytest.mark.parametrize("field", ["f64", "f32"])
def test_a_narrow_selection_reads_a_small_fraction_of_the_tags(local_fed, monkeypatch, field):
    """0.1 % of 200,000 events, on data ordered with the entry (f64) or not (f32): a few blocks per
    database are read, not the tag values of every event."""
    ds, columns = _clustered(local_fed, 200_000, 50_000)
    values = columns[field]
    cut = float(np.sort(values)[-201])
    counter = _Bytes(monkeypatch)
    sel = ds.select(f"{field} > {cut!r}")
    np.testing.assert_array_equal(sel.entries(), np.flatnonzero(values > cut))
    tag_bytes = sum(db.container("tag").size for db in ds.databases())
    read = sum(counter.by_file.values())
    assert "tag.arrow" not in counter.by_file  # the tag container is not opened at all
    assert read < tag_bytes / 20, (read, tag_bytes)


def test_a_wide_selection_reads_the_tags_whole(local_fed, monkeypatch):
    ds, columns = _clustered(local_fed, 20_000, 10_000)
    counter = _Bytes(monkeypatch)
    sel = ds.select("f32 > 0.5")
    np.testing.assert_array_equal(sel.entries(), np.flatnonzero(columns["f32"] > 0.5))
    assert counter.by_file.get("tag.arrow", 0) > 0


def test_databases_without_an_index_and_stale_indexes_fall_back(local_fed, monkeypatch):
    """Federations written before the index, and an index whose tags a later pass replaced."""
    ds, columns = _clustered(local_fed, 20_000, 10_000)
    cut = float(np.sort(columns["f32"])[-21])
    want = np.flatnonzero(columns["f32"] > cut)
    with monkeypatch.context() as mp:  # a writer of the releases before the index
        mp.setattr(tagindex, "build", lambda *a, **k: None)
        old = local_fed.create_dataset("old", ds.schema)
        with old.writer(database_events=10_000) as w:
            w.append(ak.Array(columns))
    assert all(db.container(tagindex.TAG_INDEX) is None for db in old.databases())
    np.testing.assert_array_equal(old.select(f"f32 > {cut!r}").entries(), want)



def test_a_pass_that_replaces_the_tags_replaces_their_index(local_fed, monkeypatch):
    monkeypatch.setattr(tagindex, "MAX_SHARE", 1.0)  # databases of three blocks: let the index answer
    ds, columns = _clustered(local_fed, 20_000, 10_000)
    db = ds.databases()[0]
    old_index = db.container(tagindex.TAG_INDEX)
    new = {name: np.asarray(col)[::-1].copy() for name, col in columns.items()}  # the tags reversed
    first = {name: col[:10_000] for name, col in new.items()}
    with ds.add_containers(program="retag", replace=True) as p:
        p.write(db, ak.Array(first), containers=["tag"])
    db = ds.databases()[0]
    index, tag = db.container(tagindex.TAG_INDEX), db.container("tag")
    assert index.path != old_index.path
    directory = local_fed.store.read_container(index, lambda r: tagindex.Directory.of(r.arrow_schema))
    assert (directory.tag, directory.checksum) == (tag.path, tag.checksum)
    values = np.concatenate([first["f32"], columns["f32"][10_000:]])
    cut = float(np.sort(values)[-21])
    sel = ds.select(f"f32 > {cut!r}")
    assert sel._indexed(db, tag) is not None
    np.testing.assert_array_equal(sel.entries(), np.flatnonzero(values > cut))


def test_half_precision_and_unsigned_tags_are_indexed(monkeypatch):
    """Arrow cannot sort float16: the index sorts a widened copy and keeps the values; uint64 past 2**63."""
    monkeypatch.setattr(tagindex, "BLOCK", 8)
    monkeypatch.setattr(tagindex, "MAX_SHARE", 1.0)
    rng = np.random.default_rng(3)
    columns = {"h": pa.array(rng.normal(size=200).astype(np.float16)),
               "u": pa.array(rng.integers(0, 2**64 - 1, 200, dtype=np.uint64))}
    index, meta = tagindex.build(pa.table(columns), "d/x/tag.arrow", "crc32c:0")
    directory = tagindex.Directory.of(index.schema.with_metadata(meta))
    assert index.schema.field("h").type == pa.float16()
    fields = {"h": "float16", "u": "uint64"}
    for text in ("h > 1.5", "h < -2 or u < 1000000", "abs(h) < 0.01 and u > 0"):
        expression = parse(text, fields)
        got = tagindex.select(expression, directory,
                              lambda blocks, names: pa.concat_tables([index.slice(int(b) * 8, 8)
                                                                      for b in blocks]).select(names))
        np.testing.assert_array_equal(got, np.flatnonzero(expression.evaluate(columns)), err_msg=text)


def test_a_database_of_one_block_gets_no_index(local_fed, monkeypatch):
    """Its one block would answer no selection (it would be all of the index, past ``MAX_SHARE``; its
    bounds are the catalog's tag statistics): such databases are one file fewer, and select the same."""
    monkeypatch.setattr(tagindex, "BLOCK", 8)
    rng = np.random.default_rng(7)
    columns = {name: (rng.random(20) < 0.5 if dtype == "bool"
                      else rng.integers(0, 9, 20).astype(pa.type_for_alias(dtype).to_pandas_dtype()))
               for name, dtype in FIELDS.items()}
    ds = local_fed.create_dataset("small", giod.Schema.from_text(_YAML))
    with ds.writer(database_events=8) as w:  # 8, 8 and 4 events
        w.append(ak.Array(columns))
    with ds.writer(database_events=20) as w:  # 20 events: three blocks
        w.append(ak.Array(columns))
    dbs = ds.databases()
    assert [db.n_events for db in dbs] == [8, 8, 4, 20]
    assert [db.container(tagindex.TAG_INDEX) is not None for db in dbs] == [False, False, False, True]
    assert len(list(Path(local_fed.store.site(None).root).rglob(f"{tagindex.TAG_INDEX}*"))) == 1
    with monkeypatch.context() as mp:  # a pass's tags of one block: no index either, not even built
        mp.setattr(tagindex, "build", lambda *a, **k: pytest.fail("an index of one block was built"))
        with ds.add_containers(program="retag", replace=True) as p:
            p.write(dbs[0], ak.Array({n: c[:8] for n, c in columns.items()}), containers=["tag"])
    assert ds.databases()[0].container(tagindex.TAG_INDEX) is None
    cut = {name: 4 for name in FIELDS}
    for name, dtype in FIELDS.items():
        if dtype == "bool":
            continue
        want = np.flatnonzero(np.concatenate([columns[name], columns[name]]) > cut[name])
        np.testing.assert_array_equal(ds.select(f"{name} > {cut[name]}").entries(), want)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=400),
       st.floats(-1.1e3, 1.1e3, allow_nan=False), st.floats(0, 300, allow_nan=False), st.booleans())
def test_the_blocks_of_a_cut_are_those_of_its_range_found_by_search(values, low, width, either):
    """A cut's blocks are found by two searches of the range every selected value lies in, then the
    expression's walk within them: every block holding a selected value, and (for a range) only those."""
    block = 4
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    starts = np.arange(0, len(ordered), block)
    ends = np.minimum(starts + block, len(ordered)) - 1
    directory = tagindex.Directory(block, len(ordered), "", "", {"ht": {
        "valid": len(ordered), "numeric": len(ordered), "lo": ordered[starts].tolist(), "hi": ordered[ends].tolist()}})
    text = (f"ht < {low!r} or ht > {low + width!r}" if either else f"ht between {low!r} and {low + width!r}")
    expression = parse(text, {"ht": "float64"})
    calls = [0]

    class Counting:
        def necessary_box(self):
            return expression.necessary_box()

        def may_match(self, bounds, numbers=False):
            calls[0] += 1
            return expression.may_match(bounds, numbers)

    found = set(directory.blocks(Counting(), "ht").tolist())
    passing = ((ordered < low) | (ordered > low + width)) if either else ((ordered >= low) & (ordered <= low + width))
    assert set((np.flatnonzero(passing) // block).tolist()) <= found
    if not either:  # a range: the blocks overlapping it, no other
        overlap = (ordered[ends] >= low) & (ordered[starts] <= low + width)
        assert found == set(np.flatnonzero(overlap).tolist())
        assert calls[0] <= max(0, 2 * len(found) - 1)  # the walk within them only: no step outside


def _built(columns: dict[str, pa.Array]) -> tuple[pa.Table, tagindex.Directory]:
    built = tagindex.build(pa.table(columns), "d/x/tag.arrow", "crc32c:0")
    assert built is not None
    index, meta = built
    directory = tagindex.Directory.of(index.schema.with_metadata(meta))
    assert directory is not None
    return index, directory


_OPS = ["<", "<=", ">", ">=", "==", "!="]
_CONSTANTS = ["-1e300", "1e300", "0", "-0.0", "1", "2.5", "-3", "9", "-9.5", "12"]


@st.composite
def cuts(draw) -> str:
    """A cut on one numeric tag: a comparison, a range, its negation."""
    field = draw(st.sampled_from(["i32", "i64", "u8", "f32", "f64"]))
    a, b = draw(st.sampled_from(_CONSTANTS)), draw(st.sampled_from(_CONSTANTS))
    form = draw(st.sampled_from(["op", "range", "between", "not"]))
    if form == "op":
        return f"{field} {draw(st.sampled_from(_OPS))} {a}"
    if form == "range":
        return f"{a} < {field} <= {b}"
    if form == "between":
        return f"{field} between {a} and {b}"
    return f"not ({field} {draw(st.sampled_from(_OPS))} {a})"


@settings(SETTINGS, max_examples=300)
@given(expressions() | cuts().map(lambda text: (None, text)), tag_columns(), st.sampled_from([0.25, 1.0]))
def test_a_count_through_the_index_is_the_scans(generated, columns, share):
    """Blocks a cut selects whole counted from the directory, the values of the others read: the count is
    the full scan's, or it declines (more than its share to read)."""
    expression = parse(generated[1], FIELDS) if generated[0] is None else parsed(generated)
    if expression is None or len(expression.fields) != 1:
        return
    reads = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tagindex, "BLOCK", 8)
        mp.setattr(tagindex, "MAX_SHARE", share)
        index, directory = _built(columns)

        def read(blocks, names):
            reads.append(blocks)
            return pa.concat_tables([index.slice(int(b) * 8, 8) for b in blocks]).select(names)

        got = tagindex.count(expression, directory, read)
    if got is None:
        assert share < 1.0, "with no bound on its share the index always answers"
        return
    assert got == int(np.count_nonzero(expression.evaluate(columns))), generated[1]
    for blocks in reads:
        assert len(blocks) == len(set(blocks.tolist())) <= max(1, share * directory.n_blocks)


@pytest.mark.parametrize("text, want", [("f64 > 100.5", 899), ("f64 <= 100.5", 101), ("12.5 < f64 < 987.5", 975),
                                        ("not (f64 < 500)", 500), ("f64 != 3", 999)])
def test_a_count_reads_only_the_blocks_at_the_cuts_edges(text, want):
    """1,000 numbers in blocks of 8: a cut reads the block of each edge it has, every other block it selects
    is counted unread."""
    columns = {"f64": pa.array(np.arange(1000, dtype=np.float64))}
    reads = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tagindex, "BLOCK", 8)
        index, directory = _built(columns)

        def read(blocks, names):
            reads.append(blocks.tolist())
            return pa.concat_tables([index.slice(int(b) * 8, 8) for b in blocks]).select(names)

        assert tagindex.count(parse(text, {"f64": "float64"}), directory, read) == want
    edges = 2 if "<" in text.replace("not", "") and text.count("<") == 2 else 1
    assert sum(len(r) for r in reads) <= edges
