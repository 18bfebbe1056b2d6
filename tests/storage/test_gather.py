"""Gathered reads: the buffers of many Arrow containers received straight into their joined arrays.

A property of the storage layer (random tables cut into files and clusters, through a site whose bytes come
from the files as written: the joined table is the concatenation, or the layout is declined), what a damaged
byte does to it (an IntegrityError, never another error or a wrong table), and the whole path through a real
server on loopback (the read equals the local one, gathered, with no byte asked twice).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from unittest import mock

import awkward as ak
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod.errors import GiodError, IntegrityError
from giod.federation import Federation
from giod.storage.container import ContainerReader, ContainerWriter, WriteOptions, gather
from giod.storage.formats.arrow import gather as gathering
from giod.storage.formats.arrow import reader as arrow_reader
from giod.storage.site import open_site
from giod.testing import synthetic
from tests.schema.strategies import events_for, schemas
from tests.server.conftest import serve

_names = itertools.count()

PLAIN = pa.list_(pa.struct([("x", pa.float32()), ("n", pa.int16()), ("layer", pa.uint8()),
                            ("idx", pa.list_(pa.int32()))]))


def _files(tables: list[pa.Table], clusters: list[list[int]], flip: tuple[int, int] | None = None,
           tail: int | None = None, attempts: tuple[bool, ...] = (True,)):
    """The tables written as Arrow containers on a site that receives ranges into given memory (the bytes as
    written; ``flip``: (file, byte) changed on the way, in the attempts marked True: each attempt fills the
    views again and tells ``landed`` from the start, as a retried request does); ``tail``: the bytes each
    reader reads first (the reader's own 64 KiB holds these small files whole)."""
    site = open_site("memory", f"memory://gather-{next(_names)}")
    written = []
    for k, (table, sizes) in enumerate(zip(tables, clusters, strict=True)):
        w = ContainerWriter(site, f"d{k}/c.arrow", table.schema, WriteOptions(container_format="arrow",
                                                                                  compression="none"))
        at = 0
        for n in sizes:
            w.write_cluster(table.slice(at, n))
            at += n
        written.append(w.close())
    data = {w.path: bytearray(site.open(w.path).read()) for w in written}
    asked: list[tuple[str, int, int]] = []

    def receive_into(path: str, start: int, stop: int, views: list[memoryview], landed=None) -> None:
        asked.append((path, start, stop))
        for changed in attempts:
            got = bytearray(data[path][start:stop])
            if changed and flip is not None and path == written[flip[0]].path and start <= flip[1] < stop:
                got[flip[1] - start] ^= 0x40
            at = 0
            for i, v in enumerate(views):
                np.frombuffer(v, dtype=np.uint8)[:] = np.frombuffer(got, dtype=np.uint8)[at:at + len(v)]
                at += len(v)
                if landed is not None:  # in two stretches, as a socket hands them over
                    for a, b in ((0, len(v) // 2), (len(v) // 2, len(v))):
                        if b > a:
                            landed(i, a, b)

    site.receive_into = receive_into  # type: ignore[attr-defined]
    with mock.patch.object(arrow_reader, "TAIL", tail or arrow_reader.TAIL):
        readers = [ContainerReader(site, w.path, expected_size=w.size, format="arrow", clusters=w.cluster_entries,
                                   checksums=w.cluster_checksums) for w in written]
    return readers, written, asked


@st.composite
def _plain_tables(draw: st.DrawFn) -> tuple[list[pa.Table], list[list[int]]]:
    tables, clusters = [], []
    for _ in range(draw(st.integers(1, 4))):
        rows = draw(st.integers(0, 12))
        events = []
        for _ in range(rows):
            objs = draw(st.lists(st.tuples(st.floats(width=32, allow_nan=False), st.integers(-2**15, 2**15 - 1),
                                           st.integers(0, 255), st.lists(st.integers(-5, 5), max_size=3)),
                                 max_size=4))
            events.append([{"x": x, "n": n, "layer": u, "idx": i} for x, n, u, i in objs])
        tables.append(pa.table({"hits": pa.array(events, type=PLAIN)}))
        cuts = sorted(draw(st.lists(st.integers(0, rows), max_size=2)))
        clusters.append([b - a for a, b in zip([0, *cuts], [*cuts, rows], strict=True) if b > a] or [rows])
    return tables, clusters


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_plain_tables(), st.integers(8, 4096), st.sampled_from([10, None]))
def test_a_gather_joins_the_files_as_a_concatenation_would(case, max_request: int, tail: int | None) -> None:
    tables, clusters = case
    readers, _, asked = _files(tables, clusters, tail=tail)
    planned = gather("arrow", [r.layout() for r in readers], ["hits"], tables[0].schema)
    assert planned is not None  # numbers, lists and structs of them, no nulls, no codec
    got = planned.run(3, max_request)
    assert got.column("hits").num_chunks == 1  # joined, not chunked
    assert got.equals(pa.concat_tables(tables))
    assert all(b - a <= max(max_request, 8) for _, a, b in asked)
    # nothing received twice, and nothing of the tail each reader opened its file with
    spans = sorted((p, a, b) for p, a, b in asked)
    assert all(p != q or b <= c for (p, _, b), (q, c, _) in itertools.pairwise(spans))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_plain_tables(), st.data())
def test_a_byte_changed_on_the_way_is_an_integrity_error(case, data: st.DataObject) -> None:
    tables, clusters = case
    readers, written, _ = _files(tables, clusters)
    k = data.draw(st.integers(0, len(tables) - 1))
    flip = (k, data.draw(st.integers(0, written[k].size - 1)))
    # the byte changed in the last attempt counts; one changed in an attempt given up counts for nothing
    attempts = data.draw(st.sampled_from([(True,), (False, True), (True, False)]))
    readers, written, asked = _files(tables, clusters, flip, tail=data.draw(st.sampled_from([10, None])),
                                     attempts=attempts)
    planned = gather("arrow", [r.layout() for r in readers], ["hits"], tables[0].schema)
    assert planned is not None
    try:
        got = planned.run(2, 1 << 20)
    except IntegrityError:
        assert attempts[-1]  # never for bytes that arrived right in the end
        return
    if not attempts[-1]:
        assert got.equals(pa.concat_tables(tables))
        return
    # the changed byte was never received (padding, metadata or the tail the reader held), so never used
    assert got.equals(pa.concat_tables(tables))
    assert not any(p == written[k].path and a <= flip[1] < b for p, a, b in asked) or \
        _is_padding(readers[k], flip[1])


def _is_padding(reader: ContainerReader, at: int) -> bool:
    """Whether byte ``at`` of the file lies in no buffer of any batch (received, but in no array)."""
    layout = reader.layout()
    for b in layout.batches:
        for a, n in b.msg.buffers.tolist():
            if b.body + a <= at < b.body + a + n:
                return False
    return True


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.filter_too_much])
@given(st.data())
def test_any_schema_is_gathered_exactly_or_declined(data: st.DataObject) -> None:
    schema = data.draw(schemas())
    container = data.draw(st.sampled_from(sorted(schema.containers)))
    arrow = schema.arrow_schema(container)
    tables = [pa.Table.from_pylist(data.draw(events_for(schema, 5)), schema=arrow) for _ in range(2)]
    readers, _, _ = _files(tables, [[t.num_rows] if t.num_rows else [] for t in tables])
    try:
        planned = gather("arrow", [r.layout() for r in readers], arrow.names, arrow)
        got = None if planned is None else planned.run(2, 1 << 20)
    except GiodError as exc:  # a list whose offsets start late is valid Arrow, read the ordinary way
        assert isinstance(exc, IntegrityError)
        return
    if got is not None:
        assert got.equals(pa.concat_tables(tables))


def test_a_dense_remote_read_is_gathered_and_equals_the_local_one(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[int] = []
    run = gathering.Gather.run

    def counted(self, streams: int, max_request: int) -> pa.Table:
        runs.append(len(self.files))
        return run(self, streams, max_request)

    monkeypatch.setattr(gathering.Gather, "run", counted)
    for served in serve(tmp_path / "fed"):
        ds = served.local.create_dataset("raw", synthetic.schema())
        with ds.writer(database_events=300, cluster_events=100, compression="none") as w:
            w.append(synthetic.events(900, seed=4))
        want = ds.read(["hits", "jets"])
        remote = served.remote()
        near(remote)
        got = remote.dataset("raw").read(["hits", "jets"])
        assert runs == [3, 3]  # both containers, three files each, gathered
        assert ak.array_equal(got, want)
        # the bytes of the containers read, their footers and metadata, and nothing twice
        site = remote.site("local")
        stored = sum(db.container(c).size for db in ds.databases() for c in ("raw.tracker", "reco"))
        assert site.endpoint.received <= stored * 1.1  # type: ignore[attr-defined]
        remote.close()


def near(remote: Federation) -> None:
    """Its site timed as near as loopback is: a loaded machine's client and server, in one process, may take
    longer than the gather's bound (``GATHER_RTT``) to answer even a small request."""
    site = remote.site("local")
    remote.dataset("raw").databases()
    assert site.endpoint.round_trip is not None  # type: ignore[attr-defined]  # timed by the open
    site.endpoint.round_trip = 0.0  # type: ignore[attr-defined]


def _raw(served, events: int):  # type: ignore[no-untyped-def]
    """A dataset of databases of 300 uncompressed events, one cluster each, on the served federation."""
    ds = served.local.create_dataset("raw", synthetic.schema())
    with ds.writer(database_events=300, cluster_events=300, compression="none") as w:
        w.append(synthetic.events(events, seed=4))
    return ds


def test_a_damaged_file_under_a_gathered_read_is_never_used(tmp_path: Path) -> None:
    for served in serve(tmp_path / "fed"):
        ds = _raw(served, 900)
        rec = ds.databases()[1].container("raw.tracker")
        path = Path(served.local.site("local").local_path(rec.path))
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01  # inside the hits' values: their checksum fails
        path.write_bytes(bytes(data))
        remote = served.remote()
        near(remote)
        with pytest.raises(IntegrityError):
            remote.dataset("raw").read(["hits"])
        remote.close()


def test_a_far_site_is_not_gathered(tmp_path: Path) -> None:
    from giod.storage.remote import GATHER_RTT

    for served in serve(tmp_path / "fed"):
        ds = _raw(served, 600)
        remote = served.remote()
        site = remote.site("local")
        remote.dataset("raw").databases()
        assert site.endpoint.round_trip is not None  # type: ignore[attr-defined]  # timed by the open
        site.endpoint.round_trip = GATHER_RTT / 2  # type: ignore[attr-defined]  # (a loaded machine's may be more)
        assert site.gathers  # type: ignore[attr-defined]
        site.endpoint.round_trip = GATHER_RTT * 2  # type: ignore[attr-defined]
        assert not site.gathers  # type: ignore[attr-defined]
        assert ak.array_equal(remote.dataset("raw").read(["hits"]), ds.read(["hits"]))
        remote.close()


def test_round_trips_are_timed_without_the_servers_own_time() -> None:
    from giod.storage.http import _network_time

    class Answer:
        def __init__(self, told: str | None):
            self.headers = {} if told is None else {"x-giod-took": told}

    assert _network_time(Answer("0.25"), 0.3) == pytest.approx(0.05)
    for told in (None, "nan", "-1", "2", "soon"):
        assert _network_time(Answer(told), 0.3) is None
    assert np.isfinite(_network_time(Answer("0"), 0.3))


def test_a_tail_shorter_than_its_buffers_is_an_integrity_error() -> None:
    from dataclasses import replace

    table = pa.table({"hits": pa.array([[{"x": 1.0, "n": 2, "layer": 3, "idx": [1]}]] * 50, type=PLAIN)})
    readers, _, _ = _files([table, table], [[50], [50]])
    layouts = [r.layout() for r in readers]
    # a reader whose tail holds the last buffers, but hands over fewer bytes than asked
    short = [replace(f, held=0, read_held=lambda a, b: b"\0" * (b - a - 1)) for f in layouts]
    planned = gather("arrow", short, ["hits"], table.schema)
    assert planned is not None
    with pytest.raises(IntegrityError, match="past the end"):
        planned.run(2, 1 << 20)
