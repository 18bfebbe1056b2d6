"""Bytes on the wire: a remote read fetches the buffers of the columns it reads, and little else.

A real server on loopback; every range the server sends the client is
recorded at the client's endpoint and compared with the buffers the columns occupy in the files,
found here from each batch's metadata.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import awkward as ak
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod.storage.formats.arrow.blocks import layout, parse_message
from giod.storage.formats.arrow.frame import parse_footer, schema_of
from giod.testing import synthetic
from tests.server.conftest import Served, serve

CODECS = ("zstd", "lz4", "none")
#: what the client may fetch of a batch body beyond the buffers it reads: the padding between one
#: column's buffers (the IPC writer aligns each to 8 or 64 bytes)
PADDING = 64
Ranges = list[tuple[int, int]]


@pytest.fixture(scope="module")
def fed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for served in serve(tmp_path_factory.mktemp("wire") / "fed"):
        for codec in CODECS:
            ds = served.local.create_dataset(f"d_{codec}", synthetic.schema())
            with ds.writer(database_events=600, cluster_events=100, compression=codec) as w:
                w.append(synthetic.events(1200, seed=7))
        yield served


def _ranges(header: str) -> list[tuple[int, int]]:
    out = []
    for part in header.split("=", 1)[1].split(","):
        a, b = part.split("-")
        out.append((int(a), int(b) + 1))
    return out


def _answered(r) -> Ranges:  # type: ignore[no-untyped-def]
    """The file ranges a server's answer holds (one, or the parts of a multipart answer)."""
    kind = r.headers.get("content-type", "")
    if not kind.startswith("multipart/byteranges"):
        return _ranges("bytes=" + r.headers["content-range"].split()[1].split("/")[0])
    heads = [line for line in r.data.split(b"\r\n") if line.lower().startswith(b"content-range:")]
    return [r for h in heads for r in _ranges("bytes=" + h.decode().split()[2].split("/")[0])]


def _recorded(fed: Served, collections: list[str], dataset: str) -> tuple[ak.Array, dict[str, Ranges]]:
    """The remote read of ``collections``, and the file ranges the server sent it, by file (what it asked
    for, or what the server planned for it)."""
    remote = fed.remote()
    try:
        site = remote.site("local")
        endpoint = site.endpoint  # type: ignore[attr-defined]
        asked: dict[str, list[tuple[int, int]]] = {}
        send, stream = endpoint.request, endpoint.stream

        def note(method: str, path: str, r):  # type: ignore[no-untyped-def]
            if method == "GET" and r.status == 206 and path.startswith("/files/local/"):
                asked.setdefault(path.removeprefix("/files/local/").split("?")[0], []).extend(_answered(r))
            if method == "POST" and r.status == 200 and path == "/files/local":  # many files' heads at once
                n = int.from_bytes(r.data[:4], "big")
                for file in json.loads(r.data[4:4 + n])["files"]:
                    asked.setdefault(file["path"], []).extend((a, a + k) for a, k in file.get("parts", []))
            return r

        # answers read whole (request) and received into buffers (stream, under receive)
        endpoint.request = lambda method, path, **kw: note(method, path, send(method, path, **kw))
        endpoint.stream = lambda method, path, **kw: note(method, path, stream(method, path, **kw))
        got = remote.dataset(dataset).read(collections)
    finally:
        remote.close()
    return got, asked


def _needed(path: Path | str, names: list[str]) -> tuple[Ranges, Ranges, Ranges]:
    """The buffers of columns ``names`` in every batch of a file, the other buffers, and the metadata."""
    data = Path(path).read_bytes()
    n = int.from_bytes(data[-10:-6], "little")
    footer = data[len(data) - 10 - n:len(data) - 10]
    schema = schema_of(footer)
    wanted, others, metas = [], [], []
    for block in parse_footer(footer):
        start, meta = int(block["offset"]), int(block["meta"])
        metas.append((start, start + meta))
        msg = parse_message(data[start:start + meta])
        body = start + meta
        for root in layout(schema, len(msg.nodes), len(msg.buffers)):
            stack = [root]
            while stack:
                node = stack.pop()
                stack += node.children
                for b in node.buffers:
                    a, size = (int(x) for x in msg.buffers[b])
                    if size:
                        (wanted if root.name in names else others).append((body + a, body + a + size))
    return wanted, others, metas


def _overlap(ranges: list[tuple[int, int]], a: int, b: int) -> int:
    return sum(max(0, min(b, y) - max(a, x)) for x, y in ranges)


def _check_wire(fed: Served, codec: str, collections: list[str]) -> None:
    dataset = f"d_{codec}"
    got, asked = _recorded(fed, collections, dataset)
    want = fed.local.dataset(dataset).read(collections)
    assert ak.to_list(got) == ak.to_list(want)
    schema = fed.local.dataset(dataset).schema
    local = fed.local.site("local")
    containers = {schema.container_of(c) for c in collections}
    for db in fed.local.dataset(dataset).databases():
        for rec in db.containers:
            if rec.name not in containers:
                assert rec.path not in asked, f"{rec.name} was read for {collections}"
                continue
            ranges = asked[rec.path]
            names = [c for c in collections if schema.container_of(c) == rec.name]
            wanted, others, metas = _needed(local.local_path(rec.path), names)
            tail = (max(0, rec.size - (64 << 10)), rec.size)
            # every byte of the columns' buffers was asked for, none of it twice
            for a, b in wanted:
                assert _overlap(ranges, a, b) == b - a
            # of the other columns' buffers, at most their length prefixes (compressed buffers before the
            # wanted ones, for the checksum table) and what the tail already holds
            other = sum(_overlap(ranges, a, b) - _overlap([tail], a, b) for a, b in others)
            assert other <= 8 * len(others)
            total = sum(b - a for a, b in ranges)
            needed = sum(b - a for a, b in wanted)
            overhead = (tail[1] - tail[0]) + sum(b - a for a, b in metas) + 8 * len(others)
            assert total <= needed + overhead + PADDING * len(wanted)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("collections", [["hits"], ["jets"], ["tracks"], ["jets", "cells"]])
def test_a_remote_read_fetches_the_buffers_of_its_columns(fed: Served, codec: str, collections: list[str]) -> None:
    _check_wire(fed, codec, collections)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(codec=st.sampled_from(CODECS),
       collections=st.lists(st.sampled_from(["hits", "cells", "tracks", "jets"]), min_size=1, max_size=3,
                            unique=True))
@pytest.mark.slow  # generated projections over a server
def test_any_projection_reads_as_local_with_only_its_bytes(fed: Served, codec: str, collections: list[str]) -> None:
    _check_wire(fed, codec, collections)


def test_bytes_needed_are_few_of_a_shared_container(fed: Served) -> None:
    """Jets share their container with tracks: reading jets moves far less than the container."""
    _, asked = _recorded(fed, ["jets"], "d_zstd")
    reco = [rec for db in fed.local.dataset("d_zstd").databases() for rec in db.containers if rec.name == "reco"]
    moved = sum(b - a for rec in reco for a, b in asked[rec.path])
    assert moved < 0.6 * sum(rec.size for rec in reco)
    assert np.all([rec.path in asked for rec in reco])
