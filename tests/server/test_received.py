"""Answers received straight into buffers: exact bytes, a body cut short asked again, a flipped byte caught.

A remote read's ranges are received into Arrow buffers of their own (``Endpoint.receive``), not read
as ``bytes`` and joined; every byte is still checked as before. A real server on loopback (giod's own,
and a scripted one that cuts its answers short).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import awkward as ak
import numpy as np
import pytest

from giod.errors import IntegrityError, StorageError
from giod.storage.formats.arrow.blocks import parse_message
from giod.storage.formats.arrow.frame import parse_footer
from giod.storage.http import RETRIES, Endpoint
from giod.testing import synthetic
from tests.conftest import scripted_server
from tests.server.conftest import Served

BODY = bytes(range(256)) * 4096  # 1 MB


class Cutting(BaseHTTPRequestHandler):
    """Answers a range of BODY; the first ``cuts`` answers stop half way and drop the connection."""

    protocol_version = "HTTP/1.1"
    cuts = 0
    seen = 0

    def do_GET(self) -> None:
        a, b = (int(x) for x in self.headers["range"].split("=", 1)[1].split("-"))
        data = BODY[a:b + 1]
        Cutting.seen += 1
        self.send_response(206)
        self.send_header("content-range", f"bytes {a}-{b}/{len(BODY)}")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if Cutting.seen <= Cutting.cuts:
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def cutting() -> Iterator[str]:
    Cutting.cuts, Cutting.seen = 0, 0
    with scripted_server(Cutting) as url:
        yield url


def test_a_range_is_received_whole_into_a_buffer(cutting: str) -> None:
    ep = Endpoint(cutting)
    status, data = ep.receive("/f", 700_001, headers={"range": "bytes=12345-712345"})
    assert status == 206 and isinstance(data, memoryview) and data.readonly
    assert data.tobytes() == BODY[12345:712346]
    assert ep.received == 700_001 and Cutting.seen == 1
    ep.close()


def test_a_body_cut_short_is_asked_again(cutting: str) -> None:
    Cutting.cuts = RETRIES - 1
    ep = Endpoint(cutting)
    status, data = ep.receive("/f", len(BODY), headers={"range": f"bytes=0-{len(BODY) - 1}"})
    assert bytes(data) == BODY and Cutting.seen == RETRIES
    ep.close()


def test_a_body_always_cut_short_is_an_error_never_short_bytes(cutting: str) -> None:
    Cutting.cuts = RETRIES
    ep = Endpoint(cutting)
    with pytest.raises(StorageError, match="cut short"):
        ep.receive("/f", len(BODY), headers={"range": f"bytes=0-{len(BODY) - 1}"})
    assert Cutting.seen == RETRIES
    ep.close()


def test_a_flipped_byte_in_a_whole_file_read_is_caught(served: Served) -> None:
    ds = served.local.create_dataset("qcd", synthetic.schema())
    with ds.writer(database_events=400, cluster_events=100) as w:
        w.append(synthetic.events(800, seed=3))
    remote = served.remote()
    try:  # untouched, the remote read (whole files, received into buffers) equals the local one
        assert ak.to_list(remote.dataset("qcd").read(["hits"])) == ak.to_list(ds.read(["hits"]))
    finally:
        remote.close()
    site = served.local.site("local")
    rec = next(r for r in ds.databases()[1].containers if r.name == ds.schema.container_of("hits"))
    path = Path(str(site.local_path(rec.path)))
    data = bytearray(path.read_bytes())
    n = int.from_bytes(data[-10:-6], "little")
    block = parse_footer(bytes(data[-10 - n:-10]))[2]
    at, meta = int(block["offset"]), int(block["meta"])
    offset, size = (int(x) for x in parse_message(bytes(data[at:at + meta])).buffers[np.argmax(
        parse_message(bytes(data[at:at + meta])).buffers[:, 1])])
    data[at + meta + offset + size // 2] ^= 0x10  # in the largest buffer of the third batch
    path.write_bytes(bytes(data))
    remote = served.remote()
    try:
        with pytest.raises(IntegrityError, match="CRC-32C"):
            remote.dataset("qcd").read(["hits"])
    finally:
        remote.close()
