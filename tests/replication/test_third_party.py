"""Third-party copies between two giod servers: the destination's server fetches, checks, publishes.

The copying process only asks: it makes no request to the source's server,
and a copy damaged or cut short between the two servers is never published
nor registered.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import giod
from giod.errors import AuthError
from giod.replication import replicate, verify
from giod.storage.checksum import checksum_bytes
from giod.storage.remote import site_token_env
from giod.testing.netlab import Faults, LatencyProxy

from .conftest import Remote, all_paths, files_under, start_remote, states_at


@pytest.fixture
def fnal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    yield from start_remote(tmp_path, "fnal", monkeypatch)


def _at_caltech(home: giod.Federation, caltech: Remote, url: str | None = None) -> None:
    """Good copies of everything only at caltech (the origin's marked bad), fnal a site to copy to."""
    home.add_site("caltech", caltech.site_url, 20)
    assert replicate(home.catalog, home.site, "qcd", "caltech").ok
    home.catalog.set_replica_states([(c.id, "local", "bad") for db in home.catalog.databases("qcd")
                                     for c in db.containers])
    if url is not None:  # caltech reached through a proxy from now on (under another name: new connections)
        home.add_site("far", url, 20)
        home.catalog.set_replica_states([(c.id, s, "bad" if s == "caltech" else "good")
                                         for db in home.catalog.databases("qcd") for c in db.containers
                                         for s in ("caltech", "far")])


def _nothing_partial(home: giod.Federation, fnal: Remote) -> None:
    """fnal's final paths hold only right files, each registered good; every good replica is right."""
    states = states_at(home, "fnal")
    assert set(states.values()) <= {"good"}
    on_disk = {p: b for p, b in files_under(fnal.data).items() if ".tmp-" not in p}
    assert set(on_disk) == set(states)
    for p, data in on_disk.items():
        assert checksum_bytes(data) == home.catalog.checksum_of(p)


def test_copies_go_from_server_to_server(home, remote_site, fnal):
    _at_caltech(home, remote_site)
    home.add_site("fnal", fnal.site_url, 30)
    source = home.site("caltech")
    before = source.endpoint.requests
    r = replicate(home.catalog, home.site, "qcd", "fnal", streams=3)
    everything = all_paths(home)
    assert r.ok and r.copied == len(everything) and r.bytes == sum(
        c.size for db in home.catalog.databases("qcd") for c in db.containers)
    assert source.endpoint.requests == before  # not one request of the copying process went to the source
    assert files_under(fnal.data) == files_under(remote_site.data)  # no temporary file left either
    assert states_at(home, "fnal") == dict.fromkeys(everything, "good")
    assert verify(home.catalog, home.site, site="fnal").ok


def test_right_files_are_adopted_wrong_ones_replaced(home, remote_site, fnal):
    _at_caltech(home, remote_site)
    home.add_site("fnal", fnal.site_url, 30)
    origin = files_under(remote_site.data)
    right, wrong = sorted(origin)[:2]
    for p, data in ((right, origin[right]), (wrong, b"not the container file")):
        (fnal.data / p).parent.mkdir(parents=True, exist_ok=True)
        (fnal.data / p).write_bytes(data)
    r = replicate(home.catalog, home.site, "qcd", "fnal", streams=2)
    assert r.ok and (r.adopted, r.copied) == (1, len(origin) - 1)
    assert files_under(fnal.data) == origin
    _nothing_partial(home, fnal)


def test_a_copy_corrupted_between_the_servers_is_never_published(home, remote_site, fnal, monkeypatch):
    host, port = remote_site.url.split("//")[1].split(":")
    monkeypatch.setenv(site_token_env("far"), remote_site.token)
    with LatencyProxy(target=(host, int(port))) as proxy:
        _at_caltech(home, remote_site, f"http://127.0.0.1:{proxy.port}/files/local")
        home.add_site("fnal", fnal.site_url, 30)
        proxy.faults = Faults(flip_at=1500)  # the first answer on every new connection has a byte flipped
        r = replicate(home.catalog, home.site, "qcd", "fnal", streams=2, attempts=1)
        assert proxy.stats.flipped >= 1 and len(r.failed) >= 1 and not r.ok
        assert all("not published" in why for _, _, why in r.failed)
        _nothing_partial(home, fnal)

        proxy.faults = Faults(flip_at=1500, connections=1)  # at most one more damaged answer: retried
        before = proxy.stats.flipped
        r = replicate(home.catalog, home.site, "qcd", "fnal", streams=2)
        assert r.ok and r.attempts == r.planned + (proxy.stats.flipped - before)
    _nothing_partial(home, fnal)
    assert len(states_at(home, "fnal")) == len(all_paths(home))


def test_a_copy_cut_short_between_the_servers_is_never_published(home, remote_site, fnal, monkeypatch):
    host, port = remote_site.url.split("//")[1].split(":")
    monkeypatch.setenv(site_token_env("far"), remote_site.token)
    with LatencyProxy(target=(host, int(port))) as proxy:
        _at_caltech(home, remote_site, f"http://127.0.0.1:{proxy.port}/files/local")
        home.add_site("fnal", fnal.site_url, 30)
        proxy.faults = Faults(drop_after=6000)  # every new connection cut after 6 kB
        r = replicate(home.catalog, home.site, "qcd", "fnal", streams=2, attempts=1)
        assert proxy.stats.dropped >= 1 and len(r.failed) >= 1
        _nothing_partial(home, fnal)
        proxy.faults = Faults()
        assert replicate(home.catalog, home.site, "qcd", "fnal", streams=2).ok
    _nothing_partial(home, fnal)
    assert len(states_at(home, "fnal")) == len(all_paths(home))


def test_a_source_token_refused_is_said_once_and_nothing_is_left(home, remote_site, fnal, monkeypatch):
    _at_caltech(home, remote_site)
    monkeypatch.setenv(site_token_env("stale"), "giod_999999_" + "A" * 43)
    home.add_site("stale", remote_site.site_url, 20)  # the same server, reached with a token it does not know
    home.catalog.set_replica_states([(c.id, s, "good" if s == "stale" else "bad")
                                     for db in home.catalog.databases("qcd") for c in db.containers
                                     for s in ("caltech", "stale")])
    home.add_site("fnal", fnal.site_url, 30)
    with pytest.raises(AuthError, match="source refused the token"):
        replicate(home.catalog, home.site, "qcd", "fnal", streams=2)
    assert states_at(home, "fnal") == {} and files_under(fnal.data) == {}


def _post(url: str, token: str, headers: dict[str, str]) -> tuple[int, Any]:
    req = urllib.request.Request(url, method="POST", headers={"authorization": f"Bearer {token}", **headers})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, [json.loads(line) for line in r.read().splitlines()]
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_server_fetches_only_from_giod_sites(remote_site, fnal):
    target = f"{fnal.url}/files/local/qcd/x.parquet"
    base = {"x-giod-size": "10", "x-giod-checksum": "crc32c:00000000"}
    for source in ("file:///etc/passwd", f"{remote_site.url}/api/v1/federation", f"{remote_site.url}/files",
                   f"{remote_site.url}/files/local?x=1", "http://user:pw@127.0.0.1:1/files/local",
                   f"{remote_site.url}/files/%2e%2e", "gopher://127.0.0.1/files/local"):
        status, doc = _post(target, fnal.token, base | {"x-giod-source": source})
        assert status == 400 and doc["error"] == "DataError", source
    status, doc = _post(target, fnal.token, {"x-giod-source": remote_site.site_url, "x-giod-size": "x",
                                             "x-giod-checksum": "crc32c:00000000"})
    assert status == 400
    # a file the source does not have: the answer streams the error, nothing is published
    status, lines = _post(target, fnal.token, base | {"x-giod-source": remote_site.site_url,
                                                      "x-giod-source-authorization": f"Bearer {remote_site.token}"})
    assert status == 200 and lines[-1]["error"] == "NotFound" and files_under(fnal.data) == {}
