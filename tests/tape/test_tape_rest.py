"""The WLCG Tape REST API served by giod serve in front of a nearline site, and its client, on loopback."""

from __future__ import annotations

import pytest

from giod.errors import AuthError, ConfigError, NotFound
from giod.server.app import ServerThread, create_app
from giod.storage.tape.rest import TapeRestClient
from giod.tier import move_to_nearline
from tests.tape.conftest import tape_url


@pytest.fixture
def served(fed, tmp_path):
    # a clock that runs with real time (a 30 s mount takes 0.3 s), since nobody waits in the server's process
    fed.add_site("vault", tape_url(tmp_path / "vault", time_scale=1e-2), distance=10)
    move_to_nearline(fed.store, "qcd", "vault")
    lib = fed.store.site("vault").library
    for p in lib.paths():
        lib.evict(p)
    lib.unload()  # the drives empty, as long after the move: a stage mounts (0.3 s)
    token = fed.catalog.create_token("read", note="tape rest")[1]
    with ServerThread(create_app(str(fed.root))) as url:
        yield url, token, lib, None


def test_bulk_stage_poll_release_and_archiveinfo(served):
    url, token, lib, _ = served
    client = TapeRestClient.discover(url, token)
    assert client.endpoint == f"{url}/api/v1/tape"
    paths = [f"/vault/{p}" for p in lib.paths()[:6]]
    info = client.archiveinfo(paths)
    assert [i["locality"] for i in info] == ["TAPE"] * 6
    rid = client.stage(paths, lifetime_s=3600)
    first = client.poll(rid)
    assert "STARTED" in {f["state"] for f in first["files"]} and first["estimatedSeconds"] > 0
    done = client.wait(rid, interval=0.01)
    assert all(f["onDisk"] and f["state"] == "COMPLETED" for f in done["files"])
    assert [i["locality"] for i in client.archiveinfo(paths)] == ["DISK_AND_TAPE"] * 6
    assert all(lib.file(p.split("/", 2)[2]).pinned_until is not None for p in paths)
    import urllib3

    text = urllib3.request("GET", f"{url}/metrics", headers={"authorization": f"Bearer {token}"}).data.decode()
    assert 'giod_tape_files{site="vault",state="staged"} 6' in text and 'giod_tape_mounts_total{site="vault"}' in text
    written = int(text.split('giod_tape_written_bytes_total{site="vault"} ')[1].split()[0])
    assert 'giod_tape_queued_files{site="vault"} 0' in text and written == sum(lib.files()[p].size for p in lib.paths())
    assert client.release(rid, paths[:2]) == 2
    assert client.delete(rid) == 4
    with pytest.raises(NotFound):
        client.poll(rid)


def test_bad_requests_are_refused_with_4xx(served):
    url, token, lib, _ = served
    client = TapeRestClient.discover(url, token)
    with pytest.raises(ConfigError):
        client.stage(["/local/qcd/x"])  # a disk site: nothing to stage
    with pytest.raises(NotFound):
        client.stage(["/nowhere/qcd/x"])
    with pytest.raises(NotFound):
        client.stage(["/vault/qcd/no-such-file"])
    with pytest.raises(ConfigError):
        client.stage(["/vault/../etc/passwd"])
    with pytest.raises(AuthError):
        TapeRestClient.discover(url, None).stage([f"/vault/{lib.paths()[0]}"])
    assert lib.requests() == []  # nothing refused was requested
