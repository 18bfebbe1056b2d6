"""Arrow IPC containers: round trips, event-granular reads, and damage caught as IntegrityError."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import giod
from giod.columns import to_tables
from giod.errors import IntegrityError
from giod.storage.container import ContainerReader, ContainerWriter, WriteOptions
from giod.storage.formats.arrow import ArrowContainerReader, blocks, parse_footer
from giod.storage.formats.arrow import columns as batchcolumns
from giod.storage.formats.arrow import reader as arrowfile
from giod.storage.formats.arrow.blocks import layout, parse_message
from giod.storage.formats.arrow.projection import project
from giod.storage.site import open_site
from giod.testing import synthetic
from tests.schema.strategies import events_for, schemas

SHARE = arrowfile.PARTIAL_SHARE, arrowfile.PARTIAL_BLOCKS


def _write(site, path: str, table: pa.Table, sizes: list[int], **options) -> tuple:
    w = ContainerWriter(site, path, table.schema, WriteOptions(container_format="arrow", **options))
    at = 0
    for n in sizes:
        w.write_cluster(table.slice(at, n))
        at += n
    return w.close()


def _reader(site, written) -> ContainerReader:
    return ContainerReader(site, written.path, expected_size=written.size, format="arrow",
                           clusters=written.cluster_entries, checksums=written.cluster_checksums)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_schemas_round_trip(tmp_path: Path, data: st.DataObject) -> None:
    schema = data.draw(schemas())
    events = data.draw(events_for(schema, 8))
    if not events:
        return
    site = open_site("local", str(tmp_path / f"s{data.draw(st.integers(0, 1 << 30))}"))
    codec = data.draw(st.sampled_from(["zstd", "lz4", "none"]))
    # 1: every read of some rows goes block by block; 0: whole batches
    arrowfile.PARTIAL_SHARE = arrowfile.PARTIAL_BLOCKS = data.draw(st.sampled_from([0.0, 1e9]))
    for container in schema.containers:
        table = pa.Table.from_pylist(events, schema=schema.arrow_schema(container))
        cuts = sorted(data.draw(st.sets(st.integers(1, len(events) - 1), max_size=4))) if len(events) > 1 else []
        sizes = list(np.diff([0, *cuts, len(events)]))
        # min_savings 0: the codec is kept, so that compressed batches are read too
        written = _write(site, f"c/{container}.arrow", table, sizes, compression=codec, min_savings=0.0)
        assert written.format == "arrow" and written.cluster_entries == tuple(sizes)
        assert len(written.cluster_checksums) == len(sizes) + 1
        reader = _reader(site, written)
        assert reader.read().equals(table)
        rows = np.array(sorted(data.draw(st.sets(st.integers(0, len(events) - 1), min_size=1))))
        assert reader.read_rows(None, rows).equals(table.take(pa.array(rows)))
        # a member of a collection alone, as the Parquet reader gives it
        coll = next((c for c in schema.containers[container] if schema.collection_type(c).fields), None)
        if coll is not None:
            member = next(iter(schema.collection_type(coll).fields))
            got = reader.read([f"{coll}.list.element.{member}"])
            want = [[o[member] for o in ev[coll]] for ev in events]
            assert got.column_names == [coll]
            assert [[o[member] for o in ev] for ev in got.column(coll).to_pylist()] == want
        reader.close()
        # ordinary tools read the file as it is
        with pa.memory_map(str(Path(site.local_path(written.path)))) as source:
            assert ipc.open_file(source).read_all().equals(table)
    arrowfile.PARTIAL_SHARE, arrowfile.PARTIAL_BLOCKS = SHARE


@pytest.fixture
def written(tmp_path: Path):
    site = open_site("local", str(tmp_path / "site"))
    model = synthetic.schema()
    table = to_tables(synthetic.events(400, seed=5), model, ["raw.tracker"])["raw.tracker"]
    return site, _write(site, "d/raw.tracker.arrow", table, [100, 100, 100, 100]), table


def _damage(site, written, change) -> None:
    path = Path(site.local_path(written.path))
    data = bytearray(path.read_bytes())
    change(data)
    path.write_bytes(bytes(data))


def _spans(site, written) -> np.ndarray:
    data = Path(site.local_path(written.path)).read_bytes()
    n = int.from_bytes(data[-10:-6], "little")
    blocks = parse_footer(data[-10 - n:-10])
    return np.stack([blocks["offset"], blocks["offset"] + blocks["meta"] + blocks["body"]], axis=1)


def _touched(site, written, batch: int) -> np.ndarray:
    """The byte ranges of a batch that a reader uses: its metadata and every buffer (not the padding)."""
    data = Path(site.local_path(written.path)).read_bytes()
    n = int.from_bytes(data[-10:-6], "little")
    block = parse_footer(data[-10 - n:-10])[batch]
    at, meta = int(block["offset"]), int(block["meta"])
    msg = parse_message(data[at:at + meta])
    body = at + meta
    return np.array([(at, body)] + [(body + o, body + o + k) for o, k in msg.buffers if k], dtype=np.int64)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_a_flipped_bit_in_a_batch_is_caught_where_it_is_read(written, where: float, bit: int) -> None:
    site, w, table = written
    spans = _spans(site, w)
    original = Path(site.local_path(w.path)).read_bytes()
    batch = int(where * len(spans))
    ranges = _touched(site, w, batch)
    offsets = np.cumsum(np.concatenate([[0], ranges[:, 1] - ranges[:, 0]]))
    k = int((where * len(spans) - batch) * offsets[-1])
    part = int(np.searchsorted(offsets, k, side="right")) - 1
    at = int(ranges[part, 0] + k - offsets[part])
    _damage(site, w, lambda d: d.__setitem__(at, d[at] ^ (1 << bit)))
    try:
        reader = _reader(site, w)
        with pytest.raises(IntegrityError, match="CRC-32C"):
            reader.read(["hits"])
        with pytest.raises(IntegrityError):
            reader.read_rows(None, np.arange(batch * 100, batch * 100 + 100))
        if part == 0:  # the metadata: any read of the batch checks it
            with pytest.raises(IntegrityError, match="CRC-32C"):
                reader.read_rows(None, np.array([batch * 100 + 7]))
        other = (batch + 1) % len(spans)  # the batches the flip is not in still read
        rows = np.array([other * 100, other * 100 + 99])
        assert reader.read_rows(None, rows).equals(table.take(pa.array(rows)))
    finally:
        Path(site.local_path(w.path)).write_bytes(original)


def test_a_flipped_bit_in_the_footer_is_caught_on_opening(written) -> None:
    site, w, _ = written
    _damage(site, w, lambda d: d.__setitem__(len(d) - 40, d[len(d) - 40] ^ 0x04))
    with pytest.raises(IntegrityError):
        _reader(site, w)


@pytest.mark.parametrize("keep", [0.3, 0.9, 0.999])
def test_a_truncated_container_is_an_integrity_error(written, keep: float) -> None:
    site, w, _ = written
    path = Path(site.local_path(w.path))
    path.write_bytes(path.read_bytes()[: int(w.size * keep)])
    with pytest.raises(IntegrityError):
        _reader(site, w).read()
    # without the catalog's size the file itself says it is cut short
    with pytest.raises(IntegrityError):
        ContainerReader(site, w.path, format="arrow").read()


def test_without_catalog_checksums_a_garbled_batch_is_still_refused(written) -> None:
    site, w, _ = written
    a, b = _spans(site, w)[2]
    _damage(site, w, lambda d: d.__setitem__(slice(a + 200, b - 8), bytes(b - a - 208)))
    reader = ArrowContainerReader(site, w.path, size=w.size)
    with pytest.raises(IntegrityError):
        reader.read(None, [2])


def _bytes_read(monkeypatch) -> list[int]:
    seen: list[int] = []
    original = ArrowContainerReader._ranges

    def counting(self, ranges):
        seen.extend(b - a for a, b in ranges)
        return original(self, ranges)

    monkeypatch.setattr(ArrowContainerReader, "_ranges", counting)
    return seen


def _dataset(fed, n: int = 2000):
    ds = fed.create_dataset("qcd", synthetic.schema())
    events = synthetic.events(n, seed=11)
    with ds.writer(database_events=n, cluster_events=100) as w:
        w.append(events)
    return ds, events


def test_a_few_selected_events_read_only_their_batches(tmp_path: Path, monkeypatch) -> None:
    fed = giod.open(tmp_path / "fed", create=True)
    ds, events = _dataset(fed)
    rec = ds.databases()[0].container("raw.tracker")
    assert rec.format == "arrow" and len(rec.cluster_entries) == 20
    seen = _bytes_read(monkeypatch)
    picked = ds.select("event == 150 || event == 1234").read(["hits"])
    assert picked.hits.x.to_list() == [events.hits.x[150].to_list(), events.hits.x[1234].to_list()]
    # the tag container (one batch) and two batches of 100 events of raw.tracker, each with its footer
    batch = rec.size / len(rec.cluster_entries)
    assert sum(seen) < 3 * batch + 200_000
    seen.clear()
    assert ds.event(1999, ["hits"]).hits.x.to_list() == events.hits.x[1999].to_list()
    assert sum(seen) < 2 * batch + 100_000
    fed.close()


def test_remote_reads_of_arrow_containers(tmp_path: Path) -> None:
    from tests.server.conftest import serve

    for served in serve(tmp_path / "served"):
        ds, events = _dataset(served.local)
        rec = ds.databases()[0].container("raw.tracker")

        def sent() -> int:
            req = urllib.request.Request(f"{served.url}/metrics", headers={"authorization": f"Bearer {served.admin}"})
            text = urllib.request.urlopen(req).read().decode()
            return int(next(line.split()[1] for line in text.splitlines() if line.startswith("giod_bytes_sent_total")))

        remote = served.remote()
        rds = remote.dataset("qcd")
        whole = rds.read(["hits", "tracks", "jets", "ht"])
        assert whole.hits.x.to_list() == events.hits.x.to_list()
        pts, links = events.tracks.pt.to_list(), events.jets.tracks.to_list()
        assert whole.jets.tracks.pt.to_list() == [[[pt[i] for i in jet] for jet in ev]
                                                  for pt, ev in zip(pts, links)]
        before = sent()
        picked = rds.select("event == 1500").read(["hits"])
        assert picked.hits.e.to_list() == [events.hits.e[1500].to_list()]
        # one batch of raw.tracker and the tag container, not the whole file
        assert sent() - before < rec.size / 4
        remote.close()


def _big(tmp_path: Path, n: int = 4000, site=None):
    site = site or open_site("local", str(tmp_path / "big"))
    table = to_tables(synthetic.events(n, seed=3), synthetic.schema(), ["raw.tracker"])["raw.tracker"]
    return site, _write(site, "d/raw.tracker.arrow", table, [n], compression="none"), table


def test_a_few_events_of_a_big_batch_read_only_their_blocks(tmp_path: Path, monkeypatch) -> None:
    seen = _bytes_read(monkeypatch)
    # memory-mapped, and fetched in ranges
    for site in (None, open_site("memory", f"memory://giod-blocks-{tmp_path.name}")):
        site, w, table = _big(tmp_path, site=site)
        reader = _reader(site, w)
        seen.clear()
        rows = np.array([5, 6, 1999, 3998])
        assert reader.read_rows(["hits"], rows).equals(table.take(pa.array(rows)))
        if site.local_path(w.path) is None:  # the metadata, then offsets and values near those events
            assert 0 < sum(seen) < w.size / 20
        member = reader.read_rows(["hits.list.element.e"], rows)
        assert member.column("hits").to_pylist() == [[{"e": h["e"]} for h in ev]
                                                     for ev in table.take(pa.array(rows)).column("hits").to_pylist()]
        reader.close()


def test_a_flipped_bit_in_a_block_an_event_uses_is_caught(tmp_path: Path) -> None:
    site, w, table = _big(tmp_path)
    data = Path(site.local_path(w.path)).read_bytes()
    block = parse_footer(data[-10 - int.from_bytes(data[-10:-6], "little"):-10])[0]
    body = int(block["offset"]) + int(block["meta"])
    msg = parse_message(data[int(block["offset"]):body])
    hits = table.column("hits").combine_chunks()
    event = 2500
    first = int(hits.offsets[event].as_py())
    assert len(hits[event]) > 0
    # buffers: hits validity and offsets, the struct's validity, x's validity and values, ...
    at = body + int(msg.buffers[4, 0]) + 4 * first  # x of the event's first hit
    _damage(site, w, lambda d: d.__setitem__(at, d[at] ^ 0x10))
    reader = _reader(site, w)
    with pytest.raises(IntegrityError, match=f"CRC-32C mismatch in block {4 * first // 1024} of buffer 4 "):
        reader.read_rows(["hits"], np.array([event]))
    # an event whose bytes lie in other blocks reads, and so do other members of this one
    assert reader.read_rows(["hits"], np.array([10])).equals(table.take(pa.array([10])))
    got = reader.read_rows(["hits.list.element.e"], np.array([event])).column("hits").to_pylist()
    assert got == [[{"e": h["e"]} for h in hits[event].as_py()]]
    with pytest.raises(IntegrityError, match="CRC-32C"):
        reader.read(["hits"])


def _count_decompressed(monkeypatch) -> list[int]:
    """The sizes of the buffers ``batchcolumns`` decompresses and checks, as they are checked."""
    sizes: list[int] = []

    def counting(crc, data):
        sizes.append(len(data))
        return google_crc32c.extend(crc, data)

    monkeypatch.setattr(batchcolumns, "extend", counting)
    return sizes


def test_a_few_events_of_compressed_batches_decode_only_their_columns(tmp_path: Path, monkeypatch) -> None:
    site = open_site("local", str(tmp_path / "z"))
    table = to_tables(synthetic.events(3000, seed=5), synthetic.schema(), ["reco"])["reco"]
    w = _write(site, "d/reco.arrow", table, [1000, 2000], compression="zstd", min_savings=0.0)
    decompressed = _count_decompressed(monkeypatch)  # every buffer decompressed is checked once
    reader = _reader(site, w)
    rows = np.array([3, 500, 1999, 2500])
    assert reader.read_rows(None, rows).equals(table.take(pa.array(rows)))
    everything = len(decompressed)
    decompressed.clear()
    got = reader.read_rows(["jets.list.element.pt"], rows)
    assert got.column("jets").to_pylist() == [[{"pt": o["pt"]} for o in ev]
                                              for ev in table.column("jets").take(pa.array(rows)).to_pylist()]
    assert 0 < len(decompressed) <= everything / 2  # the jets' buffers, not those of the tracks too
    # a flipped bit in a buffer a read decompresses is caught
    data = Path(site.local_path(w.path)).read_bytes()
    block = parse_footer(data[-10 - int.from_bytes(data[-10:-6], "little"):-10])[0]
    body = int(block["offset"]) + int(block["meta"])
    msg = parse_message(data[int(block["offset"]):body])
    first, second = table.column_names  # buffer 1: the offsets of the first column
    at = body + int(msg.buffers[1, 0] + msg.buffers[1, 1]) - 100
    _damage(site, w, lambda d: d.__setitem__(at, d[at] ^ 0x01))
    with pytest.raises(IntegrityError):
        _reader(site, w).read_rows([first], np.array([3]))
    got = _reader(site, w).read_rows([second], np.array([3]))
    assert got.equals(table.select([second]).take(pa.array([3])))


def test_some_columns_of_compressed_batches_decompress_only_theirs(tmp_path: Path, monkeypatch) -> None:
    site = open_site("local", str(tmp_path / "z"))
    table = to_tables(synthetic.events(3000, seed=6), synthetic.schema(), ["reco"])["reco"]
    w = _write(site, "d/reco.arrow", table, [1000, 1000, 1000], compression="zstd", min_savings=0.0)
    assert list(w.cluster_entries) == [1000, 1000, 1000]
    decompressed = _count_decompressed(monkeypatch)
    first, second = table.column_names
    reader = _reader(site, w)
    assert reader.read([first], [1]).equals(table.slice(1000, 1000).select([first]))
    assert reader.read([second, first], [0, 2]).equals(
        pa.concat_tables([table.slice(0, 1000), table.slice(2000)]).select([second, first]))
    member = f"{first}.list.element.pt"
    assert reader.read([member]).equals(project(table, [member]))
    assert decompressed and sum(decompressed) < table.nbytes  # never every column's buffers
    with pytest.raises(giod.NotFound, match="no column 'nope'"):
        reader.read(["nope"], [0])
    # a flipped bit in a buffer the read decompresses is caught; one in a column not read is not looked at
    data = Path(site.local_path(w.path)).read_bytes()
    block = parse_footer(data[-10 - int.from_bytes(data[-10:-6], "little"):-10])[0]
    body = int(block["offset"]) + int(block["meta"])
    msg = parse_message(data[int(block["offset"]):body])
    at = body + int(msg.buffers[1, 0] + msg.buffers[1, 1]) - 100
    _damage(site, w, lambda d: d.__setitem__(at, d[at] ^ 0x01))
    with pytest.raises(IntegrityError):
        _reader(site, w).read([first], [0])
    assert _reader(site, w).read([second], [0]).equals(table.slice(0, 1000).select([second]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.data())
def test_columns_from_a_memory_map_equal_columns_fetched_range_by_range(tmp_path: Path, data: st.DataObject) -> None:
    """A memory map reads every buffer's length prefix at once and shares the schema's node tree between
    batches; the ranges a remote read fetches give the same columns, checked the same way."""
    schema = data.draw(schemas())
    events = data.draw(events_for(schema, 8))
    if not events:
        return
    site = open_site("local", str(tmp_path / f"s{data.draw(st.integers(0, 1 << 30))}"))
    codec = data.draw(st.sampled_from(["zstd", "lz4"]))
    savings = data.draw(st.sampled_from([0.0, 0.9]))  # 0.9: most buffers stored raw inside compressed batches
    for container, collections in schema.containers.items():
        table = pa.Table.from_pylist(events, schema=schema.arrow_schema(container))
        written = _write(site, f"c/{container}.arrow", table, [len(events)], compression=codec, min_savings=savings)
        raw = Path(site.local_path(written.path)).read_bytes()
        block = parse_footer(raw[-10 - int.from_bytes(raw[-10:-6], "little"):-10])[0]
        start, body = int(block["offset"]), int(block["offset"]) + int(block["meta"])
        msg = parse_message(raw[start:body])
        if msg.table is None or not msg.compressed or not collections:
            continue
        arrow_schema = schema.arrow_schema(container)
        names = data.draw(st.lists(st.sampled_from(list(collections)), min_size=1, unique=True))
        mapped = pa.py_buffer(raw[body:body + msg.body_length])
        fetched = batchcolumns.read_columns(arrow_schema, msg, body, None,
                                            lambda ranges: [pa.py_buffer(raw[a:b]) for a, b in ranges], names, "t")
        for _ in range(2):  # the second time through the node tree kept for this schema
            got = batchcolumns.read_columns(arrow_schema, msg, body, mapped, lambda ranges: [], names, "t")
            assert got.equals(fetched) and got.equals(table.select(names))
        assert [n.buffers for n in layout(arrow_schema, len(msg.nodes), len(msg.buffers))] == [
            n.buffers for n in blocks._layout(arrow_schema, len(msg.nodes), len(msg.buffers))]
        with pytest.raises(IntegrityError, match="field nodes"):  # a count off by one is refused, kept tree or not
            layout(arrow_schema, len(msg.nodes) + 1, len(msg.buffers))
        # a flipped bit in a wanted buffer is caught on the fast path too
        wanted = batchcolumns.plan_columns(msg, arrow_schema, names, "t", every_head=True).wanted
        if wanted:
            b = wanted[-1]
            bad = bytearray(raw[body:body + msg.body_length])
            at = int(msg.buffers[b, 0] + msg.buffers[b, 1]) - 1
            bad[at] ^= 0x10
            with pytest.raises(IntegrityError, match="buffer"):
                batchcolumns.read_columns(arrow_schema, msg, body, pa.py_buffer(bytes(bad)), lambda r: [], names, "t")


def test_remote_reads_of_a_few_events_fetch_only_their_blocks(tmp_path: Path) -> None:
    from tests.server.conftest import serve

    for served in serve(tmp_path / "served"):
        ds = served.local.create_dataset("big", synthetic.schema())
        events = synthetic.events(4000, seed=12)
        with ds.writer(database_events=4000, cluster_events=4000) as w:
            w.append(events)
        rec = ds.databases()[0].container("raw.tracker")
        assert len(rec.cluster_entries) == 1

        def sent() -> int:
            req = urllib.request.Request(f"{served.url}/metrics", headers={"authorization": f"Bearer {served.admin}"})
            text = urllib.request.urlopen(req).read().decode()
            return int(next(line.split()[1] for line in text.splitlines() if line.startswith("giod_bytes_sent_total")))

        remote = served.remote()
        rds = remote.dataset("big")
        rds.select("event == 17").read(["ht"])  # the tags and the footers travel once
        before = sent()
        picked = rds.select("event == 3001").read(["hits"])
        assert picked.hits.e.to_list() == [events.hits.e[3001].to_list()]
        # raw.tracker's footer, the batch's metadata, then blocks of its offsets and members: not the batch
        assert sent() - before < rec.size / 10
        remote.close()
