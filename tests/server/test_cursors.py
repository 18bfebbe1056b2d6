"""Exchange cursors through a real server on loopback: each belongs to its destination dataset.

The attack of issue 24: a write token for ``qcd`` moved another copy's cursor
(keys are predictable) to 10^15, and that copy then copied nothing, for ever.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import giod
from giod.exchange import copy_dataset
from giod.exchange.copy import federation_name
from giod.testing import synthetic
from tests.server.conftest import Served, serve
from tests.server.test_security import call

KEY = "x00000000000000aa"


@dataclass
class World:
    served: Served
    source: giod.Federation  # a federation copied from, into the served one


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    source = giod.open(tmp_path / "daq", create=True)
    ds = source.create_dataset("raw", synthetic.schema())
    with ds.writer(database_events=20, cluster_events=20) as w:
        w.append(synthetic.events(40, seed=1))
    for served in serve(tmp_path / "fed"):
        served.local.create_dataset("qcd", synthetic.schema())
        yield World(served, source)
    source.close()


def _put(w: World, token: str, dataset: str, version: int, source: str = "daq", key: str = KEY) -> tuple[int, dict]:
    a = call(w.served.url, "PUT", f"/api/v1/exchange-cursors/{key}", token,
             body=json.dumps({"source": source, "dataset": dataset, "version": version}).encode())
    return a.status, json.loads(a.body)


def _get(w: World, token: str, dataset: str, key: str = KEY) -> tuple[int, dict]:
    a = call(w.served.url, "GET", f"/api/v1/exchange-cursors/{key}?dataset={dataset}", token)
    return a.status, json.loads(a.body)


def test_a_write_token_cannot_move_another_dataset_s_cursor(world: World) -> None:
    w = world
    theirs = w.served.token("write", "raw")
    attacker = w.served.token("write", "qcd")
    assert _put(w, theirs, "raw", 5) == (200, {"version": 5})
    # the same (predictable) key, under the dataset the attacker may write: its own cursor, not theirs
    assert _put(w, attacker, "qcd", 10**15) == (200, {"version": 10**15})
    assert _get(w, theirs, "raw") == (200, {"version": 5})
    # naming their dataset: as unknown to the attacker as a dataset that does not exist
    status, body = _put(w, attacker, "raw", 10**15)
    assert (status, body["error"]) == (404, "NotFound") and body == _put(w, attacker, "nothere", 1)[1] | {
        "message": body["message"]}
    assert _get(w, attacker, "raw")[0] == 404
    assert _get(w, theirs, "raw") == (200, {"version": 5})
    assert w.served.local.catalog.exchange_cursor(KEY, "raw") == 5


def test_reading_a_cursor_needs_write_access_to_its_dataset(world: World) -> None:
    w = world
    assert _put(w, w.served.token("write", "raw"), "raw", 3)[0] == 200
    assert _get(w, w.served.token("read", "raw"), "raw")[0] == 403
    assert _get(w, w.served.token("read"), "raw")[0] == 403
    assert _get(w, w.served.token("write"), "raw") == (200, {"version": 3})
    assert call(w.served.url, "GET", f"/api/v1/exchange-cursors/{KEY}", w.served.admin).status == 400  # no dataset


def test_a_cursor_moves_forward_only_and_not_past_a_source_s_known_version(world: World) -> None:
    w = world
    writer = w.served.token("write", "raw")
    assert _put(w, writer, "raw", 7) == (200, {"version": 7})
    assert _put(w, writer, "raw", 2) == (200, {"version": 7})  # never back
    # a copy from this very federation: its version is known here
    me = federation_name(w.served.local)
    now = w.served.local.version
    status, body = _put(w, writer, "raw", now + 1, source=me, key="x00000000000000bb")
    assert (status, body["error"]) == (400, "DataError") and "in the future" in body["message"]
    assert _put(w, writer, "raw", now, source=me, key="x00000000000000bb") == (200, {"version": now})
    # a spoiled cursor is forgotten; forgetting needs write access to its dataset as well
    assert call(w.served.url, "DELETE", f"/api/v1/exchange-cursors/{KEY}?dataset=raw",
                w.served.token("write", "qcd")).status == 404
    a = call(w.served.url, "DELETE", f"/api/v1/exchange-cursors/{KEY}?dataset=raw", writer)
    assert (a.status, json.loads(a.body)) == (200, {"forgotten": True})
    assert _get(w, writer, "raw") == (200, {"version": None})


def test_a_copy_into_a_server_needs_write_access_to_its_destination_only(world: World) -> None:
    """``giod copy … --as`` through a server with a token for the destination dataset alone."""
    w = world
    dst = giod.open(w.served.url, token=w.served.token("write", "skim"))
    try:
        report = copy_dataset(w.source, dst, "raw", as_name="skim")
        assert report.copied == 2 and report.until == w.source.version
        again = copy_dataset(w.source, dst, "raw", as_name="skim")
        assert again.copied == 0 and again.planned == 0  # the cursor, kept under "skim", spared the listing
        assert len(w.served.local.dataset("skim").read(["ht"])) == 40
    finally:
        dst.close()
