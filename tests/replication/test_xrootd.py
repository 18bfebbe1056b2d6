"""``root://`` sites on real ``xrootd`` servers: added from the command line, replicated to and from,
verified by the server's own CRC-32C, and copied server to server (third-party copy)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.errors import NotFound
from giod.replication import replicate, verify
from giod.storage.checksum import checksum_bytes
from giod.storage.site import open_site
from giod.storage.xrootd import READV_RANGE, XRootDSite
from giod.storage.xrootd import TAIL as XROOTD_TAIL
from tests.conftest import xrootd_url

from .conftest import all_paths, expected_events, files_under, states_at

Server = tuple[Any, Path]


def _directory(pair: list[Server], index: int, url: str) -> Path:
    return pair[index][1] / url.rsplit("//", 1)[1]


def _place(root: Path, path: str, data: bytes) -> None:
    """A file put on a server's disk behind its back, which the server (another user) may replace."""
    target = root / path
    for d in reversed(target.relative_to(root).parents[:-1]):
        (root / d).mkdir(exist_ok=True)
        (root / d).chmod(0o777)
    target.write_bytes(data)
    target.chmod(0o666)


def _not_at_home(home: giod.Federation) -> None:
    """The origin's replicas marked bad, so that every read and copy goes to the other sites."""
    home.catalog.set_replica_states([(c.id, "local", "bad") for db in home.catalog.databases("qcd")
                                     for c in db.containers])


def test_site_add_replicate_verify_and_read_back(home: giod.Federation, xrootd_pair: list[Server]) -> None:
    url = xrootd_url(xrootd_pair[0])
    r = CliRunner().invoke(main, ["site", "add", "cern", url, "--distance", "20", "-f", str(home.root)])
    assert r.exit_code == 0, r.output
    bad = CliRunner().invoke(main, ["site", "add", "x", "root://", "-f", str(home.root)])
    assert bad.exit_code == 2 and len(bad.output.splitlines()) == 1 and "names no host" in bad.output
    site = home.site("cern")
    assert isinstance(site, XRootDSite) and site.health().reachable
    rep = replicate(home.catalog, home.site, "qcd", "cern", streams=3)
    everything = all_paths(home)
    assert rep.ok and rep.copied == len(everything)
    on_disk = files_under(_directory(xrootd_pair, 0, url))
    assert set(on_disk) == everything  # no temporary file left
    for p, data in on_disk.items():
        assert checksum_bytes(data) == home.catalog.checksum_of(p) == site.server_checksum(p)
    assert states_at(home, "cern") == dict.fromkeys(everything, "good")
    assert verify(home.catalog, home.site, site="cern").ok
    # read from there alone: the events come back
    _not_at_home(home)
    home.close()
    again = giod.open(home.root)
    got = again.dataset("qcd").read(["jets"])
    assert got.jets.pt.tolist() == expected_events().jets.pt.tolist()
    again.close()


def test_a_file_damaged_at_the_server_is_found_without_reading_it_here(home: giod.Federation,
                                                                       xrootd_pair: list[Server]) -> None:
    url = xrootd_url(xrootd_pair[0])
    home.add_site("cern", url, 20)
    assert replicate(home.catalog, home.site, "qcd", "cern").ok
    victim = sorted(all_paths(home))[0]
    on_disk = _directory(xrootd_pair, 0, url) / victim
    data = bytearray(on_disk.read_bytes())
    data[len(data) // 2] ^= 0x10
    on_disk.write_bytes(bytes(data))
    later = on_disk.stat().st_mtime + 5  # the server recomputes a checksum when the file's time changed
    os.utime(on_disk, (later, later))
    site = home.site("cern")
    opened = site.opened
    report = verify(home.catalog, home.site, site="cern")
    assert not report.ok and [b.path for b in report.damaged] == [victim]
    assert site.opened == opened  # not one file was read through this process
    # replicating again replaces the damaged copy with a verified one
    assert replicate(home.catalog, home.site, "qcd", "cern").ok
    assert checksum_bytes(on_disk.read_bytes()) == home.catalog.checksum_of(victim)


def test_copies_go_server_to_server_and_to_a_local_disk(home: giod.Federation, xrootd_pair: list[Server],
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a third-party copy that fails is tried again, never carried through here unnoticed: it fails with its reason
    monkeypatch.setenv("GIOD_THIRD_PARTY_FALLBACK", "false")
    cern, fnal = xrootd_url(xrootd_pair[0]), xrootd_url(xrootd_pair[1])
    home.add_site("cern", cern, 20)
    home.add_site("fnal", fnal, 30)
    tags = ["tag"]  # four files keep the test short
    assert replicate(home.catalog, home.site, "qcd", "cern", containers=tags).ok
    _not_at_home(home)
    source = home.site("cern")
    opened = source.opened
    origin = files_under(_directory(xrootd_pair, 0, cern))
    # one file already right at the destination is adopted, one wrong one replaced
    right, wrong = sorted(origin)[:2]
    for p, data in ((right, origin[right]), (wrong, b"not the container file")):
        _place(_directory(xrootd_pair, 1, fnal), p, data)
    rep = replicate(home.catalog, home.site, "qcd", "fnal", containers=tags, streams=3)
    assert rep.ok and (rep.adopted, rep.copied) == (1, len(origin) - 1), rep.failed
    destination = home.site("fnal")
    assert isinstance(destination, XRootDSite) and destination.through_here == 0
    assert source.opened == opened  # third-party: no byte passed through here
    assert files_under(_directory(xrootd_pair, 1, fnal)) == origin
    assert states_at(home, "fnal") == dict.fromkeys(origin, "good")
    # and from the XRootD server to a local disk, read through here and checked
    home.add_site("disk", str(tmp_path / "disk"), 5)
    assert replicate(home.catalog, home.site, "qcd", "disk", containers=tags).ok
    assert source.opened > opened
    assert files_under(tmp_path / "disk") == origin


def test_a_copy_that_cannot_go_server_to_server_is_said_counted_or_refused(
        home: giod.Federation, xrootd_pair: list[Server], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A destination server without third-party copies: the bytes go through here with a warning giving the
    servers' reason, counted on the site; with the fallback refused the copy fails with that reason instead."""
    import logging
    import shutil
    import tempfile

    from giod_bench.xrootd import XRootDServer

    cern = xrootd_url(xrootd_pair[0])
    home.add_site("cern", cern, 20)
    tags = ["tag"]
    assert replicate(home.catalog, home.site, "qcd", "cern", containers=tags).ok
    _not_at_home(home)
    source = home.site("cern")
    origin = files_under(_directory(xrootd_pair, 0, cern))
    served = Path(tempfile.mkdtemp(prefix="giod-xrootd-site-"))
    served.chmod(0o777)
    try:
        with XRootDServer(served, writable=True, third_party=False) as plain:
            urls = [xrootd_url((plain, served)) for _ in range(2)]
            home.add_site("plain", urls[0], 30)
            opened = source.opened
            with caplog.at_level(logging.WARNING, logger="giod.storage"):
                rep = replicate(home.catalog, home.site, "qcd", "plain", containers=tags, streams=2)
            assert rep.ok and rep.copied == len(origin), rep.failed
            plain_site = home.site("plain")
            assert isinstance(plain_site, XRootDSite)
            assert plain_site.through_here == len(origin) and plain_site.third_party_failures == 2 * len(origin)
            assert source.opened - opened == len(origin)  # each file read through here
            said = [r.getMessage() for r in caplog.records if "goes through this process" in r.getMessage()]
            assert len(said) == len(origin) and all("tpc not supported" in m for m in said), said
            assert files_under(served / urls[0].rsplit("//", 1)[1]) == origin

            monkeypatch.setenv("GIOD_THIRD_PARTY_FALLBACK", "false")
            home.add_site("strict", urls[1], 40)
            opened = source.opened
            rep = replicate(home.catalog, home.site, "qcd", "strict", containers=tags, streams=2, attempts=1)
            assert not rep.ok and len(rep.failed) == len(origin)
            assert all("refused (setting third_party_fallback)" in why and "tpc not supported" in why
                       for _, _, why in rep.failed), rep.failed
            strict = home.site("strict")
            assert isinstance(strict, XRootDSite) and strict.through_here == 0 and source.opened == opened
            assert files_under(served / urls[1].rsplit("//", 1)[1]) == {} and states_at(home, "strict") == {}
    finally:
        shutil.rmtree(served, ignore_errors=True)


def test_vectored_and_sequential_reads(xrootd_pair: list[Server]) -> None:
    site = open_site("t", xrootd_url(xrootd_pair[0]))
    assert isinstance(site, XRootDSite)
    data = np.random.default_rng(3).integers(0, 256, 3 * READV_RANGE + 12_345, dtype=np.uint8).tobytes()
    pending = site.create("ds/db/f.arrow")
    for at in range(0, len(data), 100_000):
        pending.write(memoryview(data)[at:at + 100_000])
    pending.publish()
    ranges = [(0, 10), (5, 5), (17, 2 * READV_RANGE + 3), (len(data) - 7, len(data))]
    ranges += [(i * 1000, i * 1000 + 300) for i in range(2000)]  # more ranges than one request takes
    with site.open("ds/db/f.arrow") as fh:
        assert fh.read_many(ranges) == [data[a:b] for a, b in ranges]
        fh.seek(11)
        got = [fh.read(3 << 20) for _ in range(4)]  # reads ahead: the pieces are cut where the reader asks
        assert b"".join(got) == data[11:] and got[-1] == b""
        fh.seek(len(data) - 5)
        assert fh.read(100) == data[-5:]
    with pytest.raises(NotFound):
        site.server_checksum("ds/db/none.arrow")


def test_announced_files_are_opened_and_their_tails_read_ahead(xrootd_pair: list[Server]) -> None:
    site = open_site("t", xrootd_url(xrootd_pair[0]))
    assert isinstance(site, XRootDSite)
    files = {f"ds/db{i}/reco.arrow": os.urandom(200_000 + i) for i in range(3)}
    for path, data in files.items():
        pending = site.create(path)
        pending.write(data)
        pending.publish()
    site.prefetch([(p, len(d), ["jets"]) for p, d in files.items()] + [("ds/none/x.arrow", 10, None)])
    for path, data in files.items():
        received = site.received
        with site.open(path) as fh:
            fh.seek(len(data) - 1000)
            assert fh.read(1000) == data[-1000:]  # from the tail read with the opening
            after_tail = site.received
            assert after_tail - received == XROOTD_TAIL
            ranges = [(len(data) - 50, len(data) - 10), (0, 100)]
            assert fh.read_many(ranges) == [data[a:b] for a, b in ranges]
            assert site.received - after_tail == 100  # only the range outside the tail travelled
    with pytest.raises(NotFound):
        site.open("ds/none/x.arrow")
    site.prefetch([("ds/db0/reco.arrow", len(files["ds/db0/reco.arrow"]), None)])
    site.release("ds/db0/reco.arrow")  # closed unread
    with site.open("ds/db0/reco.arrow") as fh:
        assert fh.read() == files["ds/db0/reco.arrow"]


def test_handles_dropped_with_requests_in_flight_are_held_until_answered(xrootd_pair: list[Server]) -> None:
    """A site collected with files announced, a reader dropped with reads ahead, a file released while it
    opens: the client answers on its own threads, so every handle is held until its answer came."""
    import gc

    from giod.storage import xrootd

    url = xrootd_url(xrootd_pair[0])
    site = open_site("t", url)
    assert isinstance(site, XRootDSite)
    files = {f"held/db{i}/reco.arrow": os.urandom(3 << 20) for i in range(8)}
    for path, data in files.items():
        pending = site.create(path)
        pending.write(data)
        pending.publish()
    for _ in range(5):
        site = open_site("t", url)
        assert isinstance(site, XRootDSite)
        site.prefetch([(p, len(d), None) for p, d in files.items()])
        site.release(next(iter(files)))  # released while its opening is in flight
        fh = site.open(sorted(files)[1])
        assert fh.read(10) == files[sorted(files)[1]][:10]  # and the reads ahead of it left in flight
        del fh, site
        gc.collect()
    with xrootd._in_flight_lock:
        held = list(xrootd._in_flight)
    assert held, "the dropped handles' requests were not held"
    for _handle, waiter in held:
        waiter.wait()  # every request held gets its answer, and the process is still here to see it
    again = open_site("t", url)
    with again.open(sorted(files)[2]) as fh:
        assert fh.read() == files[sorted(files)[2]]
