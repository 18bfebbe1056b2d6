"""A remote client reading a dataset that is on its server's tape: one bulk request through the Tape REST API,
polled until every file is on disk, then the read; and the seed system's way, one file at a time, which the
server answers "later" (503, Retry-After) while it stages the file, instead of holding the request past the
client's timeout.

The server is ``giod serve`` in a child process over a federation whose dataset sits on a simulated tape
library running on a real clock (scaled), with the drives empty.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import awkward as ak
import pytest
import urllib3

import giod
from giod.server.app import ServerThread, create_app
from giod.storage import http
from giod.storage.tape.site import ON_DEMAND
from giod.testing import synthetic
from giod.tier import move_to_nearline
from giod.tier.remote import nearline_names
from tests.replication.conftest import ServeProcess
from tests.tape.conftest import PER_DATABASE, expected_events, tape_url

COLUMNS = ["jets", "ht"]
SELECTION = "njets >= 2"
TIMEOUT_S = 2.0  # the client's read timeout in the timeout test


def _serve(fed: giod.Federation, tmp_path: Path, scale: float) -> Iterator[tuple[str, str, object, list]]:
    whole = ak.to_list(fed["qcd"].select(SELECTION).read(COLUMNS))  # the same read on disk
    # 4 drives for the 4 cartridges of the write pool: a bulk request mounts them all at once
    fed.add_site("vault", tape_url(tmp_path / "vault", time_scale=scale, drives=4), distance=10)
    move_to_nearline(fed.store, "qcd", "vault")
    lib = fed.store.site("vault").library
    for p in lib.paths():
        lib.evict(p)
    lib.unload()  # as long after the move: every read needs a mount
    token = fed.catalog.create_token("read", note="remote staging")[1]
    fed.close()
    server = ServeProcess(tmp_path / "home")
    try:
        yield server.start(), token, lib, whole
    finally:
        server.stop()


@pytest.fixture
def vault(fed, tmp_path):
    # a 30 s mount takes 30 ms: the client polls while the drives work
    yield from _serve(fed, tmp_path, 1e-3)


@pytest.fixture
def slow_vault(fed, tmp_path):
    # a 30 s mount and a 3 s locate take 6.6 s, longer than the client's three tries of 2 s
    yield from _serve(fed, tmp_path, 0.2)


def test_a_remote_read_stages_its_tape_files_in_one_request_then_reads(vault):
    url, token, lib, whole = vault
    client = giod.open(url, token=token)
    try:
        # told by the opening (no request of its own), and by the Tape REST discovery alike
        assert client.store.catalog.nearline_sites == {"archive", "vault"}
        assert nearline_names(client.store.site("vault")) == {"archive", "vault"}
        before = lib.counters()  # type: ignore[attr-defined]
        sel = client["qcd"].select(SELECTION)
        got = sel.read(COLUMNS)
        assert ak.to_list(got) == whole
        assert sel.staging is not None and len(sel.staging.remote) == 1  # one request at the server
        progress = sel.staging.progress()
        assert progress.on_disk == progress.total == sel.staging.remote[0].files > 0
        c = lib.counters()  # type: ignore[attr-defined]
        assert c["mounts"] - before["mounts"] == 4  # 4 cartridges, each mounted once
        assert c["staged_files"] - before["staged_files"] == progress.total  # none staged again, on demand
        assert sel.staging.release() == progress.total
    finally:
        client.close()
    assert lib.requests() == []  # type: ignore[attr-defined]


def test_a_server_without_tape_stages_nothing(tmp_path):
    home = giod.open(tmp_path / "disk", create=True)
    ds = home.create_dataset("qcd", synthetic.schema())
    with ds.writer(database_events=PER_DATABASE) as w:
        w.append(expected_events())
    token = home.catalog.create_token("read")[1]
    whole = ak.to_list(home["qcd"].select(SELECTION).read(COLUMNS))
    home.close()
    with ServerThread(create_app(str(tmp_path / "disk"))) as url:
        client = giod.open(url, token=token)
        try:
            sel = client["qcd"].select(SELECTION)
            assert ak.to_list(sel.read(COLUMNS)) == whole
            assert sel.staging is not None and sel.staging.empty
            assert client.store.catalog.nearline_sites == frozenset()
            assert nearline_names(client.store.site("local")) == frozenset()
        finally:
            client.close()


def _timeouts(caplog: pytest.LogCaptureFixture) -> int:
    """The client's requests that the server did not answer within the read timeout (each try counts)."""
    return sum("Read timed out" in r.getMessage() for r in caplog.records)


def test_a_read_of_a_file_on_tape_is_answered_later_not_held(slow_vault, monkeypatch, caplog):
    url, token, lib, whole = slow_vault
    # the same client both ways, with a read timeout far shorter than a mount (its default is 60 s)
    monkeypatch.setitem(http._ENDPOINTS, url, http.Endpoint(url, token, timeout=TIMEOUT_S))
    client = giod.open(url, token=token)
    try:
        # the seed system's way, a read of a file on tape that asked for nothing ahead: the server starts its
        # staging and answers at once, 503 with Retry-After, instead of holding the request for a mount and a
        # locate (6.6 s here, the RPC timeout of GIOD on HPSS); the client asks again when told, and reads it
        paths = lib.paths()  # type: ignore[attr-defined]
        first = paths[0]
        want = (Path(lib.tape) / first).read_bytes()  # type: ignore[attr-defined]
        raw = urllib3.PoolManager(retries=False, timeout=TIMEOUT_S)
        auth = {"authorization": f"Bearer {token}"}
        answers = [raw.request("GET", f"{url}/files/vault/{p}", headers=auth) for p in paths]
        assert {a.status for a in answers} == {503}  # each at once: no thread waits for a drive
        for a in answers:
            assert 1 <= int(a.headers["retry-after"]) <= http.STAGING_RETRY_MAX_S
            assert 0 < float(a.headers[http.STAGING_HEADER]) <= http.STAGING_RETRY_MAX_S
            assert a.json()["error"] == "Staging"
        staging = lib.request(ON_DEMAND)  # type: ignore[attr-defined]
        assert {f.path for f in staging.files} == set(paths)  # one request holds every file asked for
        again = raw.request("HEAD", f"{url}/files/vault/{first}", headers=auth)
        assert again.status in (200, 503)  # asked again: staged by now, or still staging, never held
        mounts = lib.counters()["mounts"]  # type: ignore[attr-defined]
        assert client.store.site("vault").open(first).read() == want  # waits as told, then reads
        assert lib.counters()["mounts"] == mounts  # type: ignore[attr-defined]  # not staged a second time
        assert _timeouts(caplog) == 0
        sel = client["qcd"].select(SELECTION)
        assert ak.to_list(sel.read(COLUMNS)) == whole  # the bulk request: polled, then read
        assert sel.staging is not None and len(sel.staging.remote) == 1
        assert _timeouts(caplog) == 0
    finally:
        client.close()


def test_a_remote_read_takes_the_staged_databases_first_while_the_rest_arrive(fed, tmp_path):
    # every event, no tag cut: a cut over 8 databases or more reads every database's tag index at once, merged
    # a clock that never moves on its own (time scale 0): the test moves it, one arrival at a time
    fed.add_site("vault", tape_url(tmp_path / "vault", time_scale=0, drives=1), distance=10)
    move_to_nearline(fed.store, "qcd", "vault")
    lib = fed.store.site("vault").library
    for p in lib.paths():
        lib.evict(p)
    lib.unload()
    early = fed.catalog.databases("qcd")[-4:]  # staged at the server before the client asks
    lib.wait([c.path for db in early for c in db.containers])
    token = fed.catalog.create_token("read", note="remote arrival")[1]
    root = str(fed.root)
    fed.close()
    with ServerThread(create_app(root)) as url:
        client = giod.open(url, token=token)
        try:
            sel = client["qcd"].select()
            plan = sel.stage(COLUMNS)  # one request, answered at once: nothing waits for the rest
            assert len(plan.remote) == 1
            first = plan.progress()
            assert 0 < first.on_disk < first.total
            waits: list[tuple[int, int]] = []

            def arrive(progress: object) -> None:  # what was read before each wait; then the next file lands
                waits.append((progress.on_disk, client.store.reads.served["vault"]))  # type: ignore[attr-defined]
                lib.advance(min(f.ready for f in lib.files().values() if f.state == "staging"))

            plan.waiting = arrive
            got = ak.to_list(sel.read(COLUMNS))
            assert waits, "the rest of the files had to arrive while the read went on"
            # the databases on disk were read before the first wait for the others
            assert waits[0][0] == first.on_disk and waits[0][1] >= len(early)
            assert [w[0] for w in waits] == sorted({w[0] for w in waits})  # each wait after a new arrival
            done = plan.progress()
            assert done.on_disk == done.total
            order = list(plan.arriving(client["qcd"].databases(), lambda db: db))  # all on disk: kept as given
            assert [db.id for db in order] == [db.id for db in client["qcd"].databases()]
        finally:
            client.close()
    with giod.open(root) as again:
        assert got == ak.to_list(again["qcd"].select().read(COLUMNS))  # the same events as at home
