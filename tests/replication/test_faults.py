"""Faults with real servers on loopback: corruption, transfers damaged in flight, servers killed, sites gone.

Every fault here is real: bytes flipped in files on disk, a TCP proxy that
flips or cuts the server's stream, a ``giod serve`` child process killed with
SIGKILL, a site directory renamed away, a server that stops answering.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import awkward as ak
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.read import clusters
from giod.replication import replicate, replicator_pass, verify
from giod.storage.checksum import checksum_bytes
from giod.storage.formats.arrow import parse_footer
from giod.storage.formats.arrow.blocks import layout, parse_message
from giod.storage.formats.parquet import thrift
from giod.storage.remote import site_token_env
from giod.store.consistency import fsck, gc
from giod.testing.netlab import Faults, LatencyProxy

from .conftest import ServeProcess, all_paths, files_under, states_at


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _in_page(path: Path, column: str, rng: random.Random) -> int:
    """An offset inside the data (not the header) of the first page of ``column`` in the first cluster;
    in an Arrow container, inside a buffer of ``column``'s collection in the first record batch (a reader
    of the collection checks every buffer of it it reads)."""
    if path.suffix == ".arrow":
        raw = path.read_bytes()
        n = int.from_bytes(raw[-10:-6], "little")
        first = parse_footer(raw[-10 - n:-10])[0]
        body = int(first["offset"] + first["meta"])
        msg = parse_message(raw[int(first["offset"]):body])
        roots = {r.name: r for r in layout(pa.ipc.open_file(path).schema, len(msg.nodes), len(msg.buffers))}

        def buffers(node):
            return [*node.buffers, *(b for c in node.children for b in buffers(c))]

        spans = [msg.buffers[b] for b in buffers(roots[column.split(".")[0]]) if msg.buffers[b, 1]]
        offset, length = spans[rng.randrange(len(spans))]
        return body + int(offset) + rng.randrange(int(length))
    meta = pq.ParquetFile(path).metadata
    rg = meta.row_group(0)
    chunk = next(rg.column(j) for j in range(rg.num_columns) if rg.column(j).path_in_schema.startswith(column))
    raw = path.read_bytes()
    header, length = thrift.decode_struct(raw[chunk.data_page_offset:chunk.data_page_offset + 4096])
    start = chunk.data_page_offset + length
    return start + rng.randrange(int(header.value(3)))  # field 3: compressed_page_size


def _container(fed: giod.Federation, db_index: int, name: str):
    return fed.catalog.databases("qcd")[db_index].container(name)


def _with_caltech(home: giod.Federation, remote) -> None:
    home.add_site("caltech", remote.site_url, 20)
    assert replicate(home.catalog, home.site, "qcd", "caltech", streams=4).ok


def test_flipped_bytes_anywhere_are_all_caught_by_verify_and_repaired(home, remote_site):
    """Six files, three per site, one byte flipped at a random place in each: verify finds all six."""
    _with_caltech(home, remote_site)
    local_dir = Path(home.root) / "data"
    origin = files_under(local_dir)
    paths = sorted(all_paths(home))
    rng = random.Random(2024)
    picked = rng.sample(paths, 6)
    injected = set()
    for i, p in enumerate(picked):
        site, root = ("local", local_dir) if i < 3 else ("caltech", remote_site.data)
        _flip(root / p, rng.randrange(len(origin[p])))
        injected.add((site, p))

    r = CliRunner().invoke(main, ["verify", "--sample", "0.25", "--seed", "3", "-f", str(home.root)])
    assert r.exit_code in (0, 1) and "checked 10 replicas" in r.output and "skipped 30" in r.output
    r = CliRunner().invoke(main, ["verify", "-f", str(home.root)])
    assert r.exit_code == 1
    found = {(line.split(":")[1].strip(), line.split(":")[2]) for line in r.output.splitlines()
             if line.startswith("corrupt:")}
    assert found == injected  # 100 % of the injected corruptions, nothing else
    assert "6 damaged (0 lost)" in r.output
    for site, p in injected:
        assert states_at(home, site)[p] == "bad"

    report = replicator_pass(home.catalog, home.site)
    assert report.ok and report.repairs == 6 and report.transfers.copied == 6
    assert files_under(local_dir) == origin
    assert {p: b for p, b in files_under(remote_site.data).items()} == origin
    again = verify(home.catalog, home.site)
    assert again.ok and again.checked == 2 * len(paths) and not again.damaged


def test_corruption_found_while_reading_is_survived_marked_and_repaired(home, remote_site):
    """Pages damaged at the nearest site: every read gets the right data from the other site."""
    ds = home.dataset("qcd")
    baseline_event = ds.event(0, ["jets"])
    baseline_sel = ds.select("ht > 150").read(["ht", "njets"])
    baseline = ds.read(["hits", "cells"])
    _with_caltech(home, remote_site)
    local_dir = Path(home.root) / "data"
    origin = files_under(local_dir)
    rng = random.Random(5)
    damaged = {
        _container(home, 0, "reco").path: "jets.list.element.pt",  # read by one event, page by page
        _container(home, 1, "tag").path: "ht",  # read by the selection
        _container(home, 2, "raw.tracker").path: "hits.list.element.x",  # read whole
        _container(home, 3, "raw.calo").path: "cells.list.element.e",
    }
    for p, column in damaged.items():
        _flip(local_dir / p, _in_page(local_dir / p, column, rng))
        assert checksum_bytes((local_dir / p).read_bytes()) != home.catalog.checksum_of(p)
    clusters.forget()  # the clusters the baseline kept were checked then: a new process reads the files

    assert ak.to_list(ds.event(0, ["jets"]).jets) == ak.to_list(baseline_event.jets)
    sel = ds.select("ht > 150").read(["ht", "njets"])
    assert ak.array_equal(sel.ht, baseline_sel.ht) and ak.array_equal(sel.njets, baseline_sel.njets)
    got = ds.read(["hits", "cells"])
    assert ak.array_equal(got.hits.x, baseline.hits.x) and ak.array_equal(got.cells.e, baseline.cells.e)
    # caught: every damaged copy is marked bad (a good one remains), nothing else is
    assert {p for p, s in states_at(home, "local").items() if s != "good"} == set(damaged)
    assert all(s == "bad" for p, s in states_at(home, "local").items() if p in damaged)
    assert set(states_at(home, "caltech").values()) == {"good"}

    report = replicator_pass(home.catalog, home.site)
    assert report.ok and report.repairs == 4
    assert files_under(local_dir) == origin
    assert set(states_at(home, "local").values()) == {"good"}


def test_a_last_copy_found_damaged_is_lost_and_reported(home):
    ds = home.dataset("qcd")
    c = _container(home, 0, "raw.tracker")
    path = Path(home.root) / "data" / c.path
    _flip(path, _in_page(path, "hits.list.element.x", random.Random(1)))
    with pytest.raises(giod.IntegrityError):
        ds.read(["hits"])
    assert states_at(home, "local")[c.path] == "lost"
    r = CliRunner().invoke(main, ["verify", "-f", str(home.root)])
    assert r.exit_code == 1 and "1 damaged (1 lost)" in r.output
    report = replicator_pass(home.catalog, home.site)
    assert report.repairs == 0 and not report.newly_lost  # known lost already; nothing to copy from
    assert path.exists()  # a last copy, even damaged, is never deleted
    assert ds.read(["cells"]) is not None  # other containers still read


def _far_only(home: giod.Federation, far_url: str, tmp_path: Path) -> None:
    """The dataset's good copies only at the remote site ``far`` (the origin's copies marked bad)."""
    home.add_site("far", far_url, 20)
    assert replicate(home.catalog, home.site, "qcd", "far").ok
    home.catalog.set_replica_states([(c.id, "local", "bad") for db in home.catalog.databases("qcd")
                                     for c in db.containers])
    home.add_site("mirror", str(tmp_path / "mirror"), 5)


def _never_partial(home: giod.Federation, mirror: Path) -> None:
    """Every file at the mirror's final paths is right and registered; every registered copy is right."""
    states = states_at(home, "mirror")
    assert set(states.values()) <= {"good"}  # no replica left 'copying' or half-registered
    on_disk = files_under(mirror)
    assert {p for p in on_disk if ".tmp-" not in p} == set(states)
    for p in states:
        assert checksum_bytes(on_disk[p]) == home.catalog.checksum_of(p)


def test_transfer_corrupted_in_flight_is_never_registered_and_retried(home, remote_site, tmp_path, monkeypatch):
    host, port = remote_site.url.rsplit(":", 1)[0].split("//")[1], int(remote_site.url.rsplit(":", 1)[1])
    with LatencyProxy(target=(host, port)) as proxy:
        monkeypatch.setenv(site_token_env("far"), remote_site.token)
        _far_only(home, f"http://127.0.0.1:{proxy.port}/files/local", tmp_path)
        total = len(all_paths(home))
        proxy.faults = Faults(flip_at=1500)  # the first answer on every new connection has a byte flipped
        fed = giod.open(home.root)  # (a new federation object makes new connections)
        r = replicate(fed.catalog, fed.site, "qcd", "mirror", streams=1, attempts=1)
        assert proxy.stats.flipped >= 1 and len(r.failed) >= 1 and not r.ok
        assert all("not published" in why for _, _, why in r.failed)
        _never_partial(home, tmp_path / "mirror")
        assert len(states_at(home, "mirror")) == total - len(r.failed)

        proxy.faults = Faults(flip_at=1500, connections=1)  # one more damaged answer: retried within the run
        before = proxy.stats.flipped
        fed = giod.open(home.root)
        r = replicate(fed.catalog, fed.site, "qcd", "mirror", streams=1)
        assert r.ok and proxy.stats.flipped == before + 1 and r.attempts == r.planned + 1
    _never_partial(home, tmp_path / "mirror")
    assert len(states_at(home, "mirror")) == total
    assert verify(home.catalog, home.site, site="mirror").ok


def test_transfer_truncated_in_flight_is_never_registered_and_retried(home, remote_site, tmp_path, monkeypatch):
    host, port = remote_site.url.rsplit(":", 1)[0].split("//")[1], int(remote_site.url.rsplit(":", 1)[1])
    with LatencyProxy(target=(host, port)) as proxy:
        monkeypatch.setenv(site_token_env("far"), remote_site.token)
        _far_only(home, f"http://127.0.0.1:{proxy.port}/files/local", tmp_path)
        proxy.faults = Faults(drop_after=6000)  # every new connection cut after 6 kB
        fed = giod.open(home.root)
        r = replicate(fed.catalog, fed.site, "qcd", "mirror", streams=2, attempts=2)
        assert proxy.stats.dropped >= 1 and len(r.failed) >= 1
        _never_partial(home, tmp_path / "mirror")
        proxy.faults = Faults(drop_after=6000, connections=2)  # two cut connections, then a healthy network
        fed = giod.open(home.root)
        r = replicate(fed.catalog, fed.site, "qcd", "mirror", streams=2)
        assert r.ok
    _never_partial(home, tmp_path / "mirror")
    assert len(states_at(home, "mirror")) == len(all_paths(home))


@pytest.mark.slow  # a server killed and restarted
def test_destination_server_killed_mid_replication_then_restarted(home, tmp_path, monkeypatch):
    root = tmp_path / "server-dest"
    dest = giod.open(root, create=True)
    token = dest.catalog.create_token("admin")[1]
    dest.close()
    monkeypatch.setenv(site_token_env("dest"), token)
    server = ServeProcess(root)
    url = server.start()
    try:
        with LatencyProxy(target=("127.0.0.1", server.port), bandwidth=400e3) as proxy:  # uploads take ~1 s
            home.add_site("dest", f"http://127.0.0.1:{proxy.port}/files/local", 20)
            total = sum(c.size for db in home.catalog.databases("qcd") for c in db.containers)
            result: list = []
            worker = threading.Thread(target=lambda: result.append(
                replicate(home.catalog, home.site, "qcd", "dest", streams=2, attempts=2)))
            worker.start()
            deadline = time.monotonic() + 60
            while proxy.stats.bytes_up < total // 3 and worker.is_alive() and time.monotonic() < deadline:
                time.sleep(0.005)  # watching the upload's progress; the kill itself needs no timing
            server.kill()
            worker.join(timeout=120)
            first = result[0]
            assert first.failed and not first.ok and first.copied < len(all_paths(home))
            states = states_at(home, "dest")
            assert set(states.values()) <= {"good"} and len(states) == first.copied  # nothing half-registered

            server.start()  # same directory, same port
            assert server.port == int(url.rsplit(":", 1)[1])
            second = replicate(home.catalog, home.site, "qcd", "dest", streams=2)
            assert second.ok and second.already == first.copied
            assert second.copied + second.adopted == len(all_paths(home)) - first.copied
            on_server = files_under(root / "data")
            origin = files_under(Path(home.root) / "data")
            assert {p: b for p, b in on_server.items() if ".tmp-" not in p} == origin  # no duplicate, no partial
            assert set(states_at(home, "dest").values()) == {"good"}
            # what the killed upload left on the server is an orphan: fsck names it, gc removes it
            orphans = {p.path for p in fsck(home.store).by_kind("orphan")}
            assert orphans == {p for p in on_server if ".tmp-" in p}
            gc(home.store, grace_seconds=0)
            assert not fsck(home.store).problems
    finally:
        server.stop()


def test_a_site_that_disappears_while_a_reader_iterates(home, remote_site, tmp_path, monkeypatch, caplog):
    """Two outages: the nearest server stops answering, then the local directory vanishes."""
    ds = home.dataset("qcd")
    baseline = ds.read(["hits", "jets", "ht"])
    host, port = remote_site.url.rsplit(":", 1)[0].split("//")[1], int(remote_site.url.rsplit(":", 1)[1])
    with LatencyProxy(target=(host, port), bandwidth=300e3) as proxy:
        monkeypatch.setenv(site_token_env("near"), remote_site.token)
        home.add_site("near", f"http://127.0.0.1:{proxy.port}/files/local", 1)
        assert replicate(home.catalog, home.site, "qcd", "near").ok
        home.add_site("far", str(tmp_path / "far"), 5)
        assert replicate(home.catalog, home.site, "qcd", "far").ok
        home.catalog.set_replica_states([(c.id, "local", "bad") for db in home.catalog.databases("qcd")
                                         for c in db.containers])
        chunks = []
        for chunk in ds.iterate(["hits", "jets", "ht"], step_size=30):
            chunks.append(chunk)
            if len(chunks) == 1:
                assert proxy.stats.bytes_down > 0
                proxy.stop()  # the nearest site goes away in the middle of the iteration
    got = ak.concatenate(chunks)
    assert ak.array_equal(got.hits.x, baseline.hits.x) and ak.array_equal(got.jets.pt, baseline.jets.pt)
    assert home.store.reads.is_down("near")
    assert set(states_at(home, "near").values()) == {"good"}  # an outage is not damage

    # now the local site vanishes (an unmounted disk) while reading from it
    home.catalog.set_replica_states([(c.id, "local", "good") for db in home.catalog.databases("qcd")
                                     for c in db.containers])
    home.catalog.set_replica_states([(c.id, "near", "bad") for db in home.catalog.databases("qcd")
                                     for c in db.containers])  # (its server is gone for good)
    fresh = giod.open(home.root)
    data = Path(home.root) / "data"
    chunks = []
    for chunk in fresh.dataset("qcd").iterate(["hits", "jets", "ht"], step_size=30):
        chunks.append(chunk)
        if len(chunks) == 1:
            data.rename(data.with_name("data-unmounted"))
    got = ak.concatenate(chunks)
    assert ak.array_equal(got.hits.x, baseline.hits.x) and ak.array_equal(got.ht, baseline.ht)
    assert fresh.store.reads.is_down("local")
    assert set(states_at(fresh, "local").values()) == {"good"}
    fresh.close()
