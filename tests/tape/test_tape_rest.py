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
    # time scale 0: the library's clock stands still until the test moves it (advance), so a poll made
    # before that sees the files staging however slow the machine is, and one made after sees them staged
    fed.add_site("vault", tape_url(tmp_path / "vault"), distance=10)
    move_to_nearline(fed.store, "qcd", "vault")
    lib = fed.store.site("vault").library
    for p in lib.paths():
        lib.evict(p)
    lib.unload()  # the drives empty, as long after the move: a stage mounts
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
    assert {f["state"] for f in first["files"]} == {"STARTED"} and not any(f["onDisk"] for f in first["files"])
    eta = first["estimatedSeconds"]
    assert eta >= lib.settings.mount_s  # the drives were empty: at least a mount before the first file
    assert client.poll(rid)["files"] == first["files"]  # the clock stands: nothing arrives by itself
    lib.advance(lib.now() + eta)  # the test lets the library's time reach the last file's arrival
    done = client.wait(rid, interval=0.01)
    assert done["estimatedSeconds"] == 0 and "completedAt" in done
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
