"""The block checksum table the Arrow writer puts in every record batch: the fast paths against the plain ones."""

from __future__ import annotations

import google_crc32c
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod.columns import containers_in, to_tables
from giod.storage.formats.arrow.blocks import block_crcs, block_table, canonical, checksummed, crcs_at
from giod.testing import synthetic
from tests.schema.strategies import events_for, schemas


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=5000), block=st.sampled_from([1, 7, 64, 1024]))
def test_block_crcs_are_the_crcs_of_each_slice(data: bytes, block: int) -> None:
    array = np.frombuffer(data, dtype=np.uint8)
    want = [int(google_crc32c.value(data[i:i + block])) for i in range(0, len(data), block)]
    assert block_crcs(array, block) == want


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=5000), block=st.sampled_from([1, 7, 64, 1024]), picks=st.data())
def test_crcs_at_are_the_crcs_of_the_blocks_asked(data: bytes, block: int, picks: st.DataObject) -> None:
    count = -(-len(data) // block)
    blocks = picks.draw(st.lists(st.integers(0, count - 1), max_size=40)) if count else []
    want = [int(google_crc32c.value(data[b * block:(b + 1) * block])) for b in blocks]  # a call a block
    got = crcs_at(np.frombuffer(data, dtype=np.uint8), np.array(blocks, dtype=np.int64), block)
    assert got.dtype == np.uint32 and got.tolist() == want
    if count:  # a block past the buffer is an error, not a CRC of other bytes
        for past in (count, -1):
            with pytest.raises(IndexError):
                crcs_at(np.frombuffer(data, dtype=np.uint8), np.array([past]), block)


def test_crcs_at_sees_a_changed_byte_in_each_block() -> None:
    data = np.random.default_rng(1).integers(0, 256, 10 * 1024 + 100, dtype=np.uint8)
    blocks = np.arange(11)
    before = crcs_at(data, blocks)
    for at in (0, 1023, 1024, 5 * 1024 + 7, 10 * 1024 + 99):  # first, last of one, next, middle, short last
        changed = data.copy()
        changed[at] ^= 0x01
        differs = crcs_at(changed, blocks) != before
        assert differs.tolist() == [b == at // 1024 for b in range(11)]


def _same(batch: pa.RecordBatch) -> None:
    """``checksummed`` gives a batch equal to ``batch`` whose table is that of its canonical form."""
    out, table = checksummed(batch, 64)
    assert out.equals(batch)
    assert table == block_table(canonical(batch), 64)
    assert block_table(canonical(out), 64) == table  # what the IPC writer stores of it has that very table


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_checksummed_batches_match_their_canonical_form(data: st.DataObject) -> None:
    schema = data.draw(schemas())
    events = data.draw(events_for(schema, 8))
    if not events:
        return
    for container in schema.containers:
        table = pa.Table.from_pylist(events, schema=schema.arrow_schema(container))
        start = data.draw(st.integers(0, len(events) - 1))
        stop = data.draw(st.integers(start + 1, len(events)))
        # whole, sliced, and concatenated from pieces as a writer's cluster is
        pieces = [table.slice(0, start), table.slice(start, stop - start), table.slice(stop)]
        for t in (table, table.slice(start, stop - start), pa.concat_tables(pieces).combine_chunks()):
            for batch in t.combine_chunks().to_batches():
                _same(batch)


def test_a_cluster_of_whole_appends_is_written_without_a_copy() -> None:
    model = synthetic.schema()
    events = synthetic.events(300, seed=3)
    parts = [to_tables(events[i:i + 100], model, containers_in(events, model)) for i in range(0, 300, 100)]
    for name in parts[0]:
        batch = pa.concat_tables([p[name] for p in parts]).combine_chunks().to_batches()[0]
        out, table = checksummed(batch)
        assert out is batch, name
        assert table == block_table(canonical(batch))
        sliced = batch.slice(10, 50)
        out, table = checksummed(sliced)
        assert out is not sliced and table == block_table(canonical(sliced))


def test_nulls_and_bitmaps_without_nulls() -> None:
    values = np.arange(20, dtype=np.float32)
    with_nulls = pa.array(values, mask=values % 3 == 0)
    no_nulls = pa.array(values, mask=np.zeros(20, dtype=bool))  # may keep an all-valid bitmap
    lists = pa.ListArray.from_arrays(pa.array([0, 2, 2, 5], pa.int32()), pa.array([1, None, 3, 4, 5], pa.int64()))
    strings = pa.array(["a", None, "ccc", ""])
    for batch in (pa.record_batch({"a": with_nulls, "b": no_nulls}), pa.record_batch({"l": lists}),
                  pa.record_batch({"s": strings}), pa.record_batch({"a": with_nulls}).slice(3, 9)):
        _same(batch)


def _plain_table(batch: pa.RecordBatch, block: int) -> bytes:
    """The checksum table by its definition: per buffer in IPC order, its CRC-32C, then each block's."""
    out: list[int] = []
    for col in batch.columns:
        for buf in col.buffers():
            data = b"" if buf is None else buf.to_pybytes()
            out.append(google_crc32c.value(data))
            out += [google_crc32c.value(data[i : i + block]) for i in range(0, len(data), block)]
    return np.asarray(out, dtype="<u4").tobytes()


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 1, 63, 64, 65, 200]), min_size=1, max_size=6))
def test_the_table_of_buffers_around_one_block_is_its_definition(sizes: list[int]) -> None:
    # a buffer of one block or less takes the short path (its CRC is its one block's); longer ones the long
    rng = np.random.default_rng(len(sizes))
    values = pa.array(rng.integers(0, 255, sum(sizes), dtype=np.uint8))
    offsets = pa.array(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32))
    # one list per row: offsets, then the values; and the same bytes as plain columns of each size
    batch = pa.record_batch([pa.ListArray.from_arrays(offsets, values)], names=["lists"])
    assert block_table(batch, 64) == _plain_table(batch, 64)
    for n in sizes:
        plain = pa.record_batch([pa.array(rng.integers(0, 255, n, dtype=np.uint8))], names=["c"])
        assert block_table(plain, 64) == _plain_table(plain, 64)


def test_the_block_layout_is_known_by_the_fields_whatever_the_footer_metadata() -> None:
    from giod.storage.formats.arrow.blocks import _block_layout, has_block_layout

    schema = synthetic.schema().arrow_schema("reco")
    assert has_block_layout(schema.with_metadata({"giod.commit": "a"}))
    hits = _block_layout.cache_info().hits
    # every container file carries its own commit record: the answer is found again, not worked out again
    assert has_block_layout(schema.with_metadata({"giod.commit": "b"}))
    assert _block_layout.cache_info().hits == hits + 1
    assert not has_block_layout(pa.schema([pa.field("m", pa.map_(pa.string(), pa.int32()))]))
