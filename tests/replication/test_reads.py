"""Reads pick the best replica: healthy, then nearest, then least loaded; fsck and gc know about copies."""

from __future__ import annotations

from pathlib import Path

from giod.catalog.records import SiteRecord
from giod.replication import ReadBalancer, replicate, verify
from giod.store.consistency import fsck, gc

from .conftest import all_paths, files_under, states_at


def test_balancer_orders_healthy_then_nearest_then_least_loaded():
    a, b, c = SiteRecord(1, "a", "/a", 0), SiteRecord(2, "b", "/b", 0), SiteRecord(3, "c", "/c", 5)
    bal = ReadBalancer()
    assert [s.name for s in bal.order([c, b, a])] == ["a", "b", "c"]
    bal.begin("a")
    assert [s.name for s in bal.order([a, b, c])] == ["b", "a", "c"]  # same distance: the idle one first
    bal.begin("b")
    bal.begin("b")
    assert [s.name for s in bal.order([a, b, c])] == ["a", "b", "c"]
    bal.end("a")
    bal.end("b")
    bal.end("b")
    assert bal.in_flight == {}
    bal.down("a")
    assert [s.name for s in bal.order([a, b, c])] == ["b", "c", "a"]  # a site found down goes last
    bal.up("a")
    assert not bal.is_down("a")


def test_reads_go_to_the_nearest_then_the_least_loaded_site(home, tmp_path: Path):
    home.add_site("twin", str(tmp_path / "twin"), 0)
    home.add_site("far", str(tmp_path / "far"), 9)
    for site in ("twin", "far"):
        assert replicate(home.catalog, home.site, "qcd", site).ok
    rec = home.catalog.databases("qcd")[0].container("tag")
    where = home.store.read_container(rec, lambda reader: reader.site.name)
    assert where == "local"  # distance 0, idle, first by name
    home.store.reads.begin("local")  # a read in flight there: the twin at the same distance takes the next
    assert home.store.read_container(rec, lambda reader: reader.site.name) == "twin"
    home.store.reads.end("local")
    inside = home.store.read_container(rec, lambda reader: dict(home.store.reads.in_flight))
    assert inside == {"local": 1} and home.store.reads.in_flight == {}  # counted while reading, not after


def test_fsck_reports_dark_copies_and_gone_files_gc_keeps_dark_copies(home, tmp_path: Path):
    home.add_site("backup", str(tmp_path / "backup"), 5)
    assert replicate(home.catalog, home.site, "qcd", "backup", containers=["tag"]).ok
    backup = tmp_path / "backup"
    tags = sorted(all_paths(home, containers={"tag"}))
    reco = sorted(all_paths(home, containers={"reco"}))
    origin = files_under(Path(home.root) / "data")
    # a copy the catalog does not list at backup; a stranger file; a temporary file; a replica's file gone
    (backup / reco[0]).parent.mkdir(parents=True, exist_ok=True)
    (backup / reco[0]).write_bytes(origin[reco[0]])
    (backup / "qcd" / "stranger.parquet").write_bytes(b"nobody registered me")
    (backup / "qcd" / ".x.parquet.tmp-0123").write_bytes(b"half")
    (backup / tags[0]).unlink()
    ids = {c.path: c.id for db in home.catalog.databases("qcd") for c in db.containers}
    home.catalog.mark_damaged(ids[tags[1]], "backup")  # marked bad, and its file goes too
    (backup / tags[1]).unlink()

    report = fsck(home.store)
    kinds = sorted((p.kind, p.site, p.path) for p in report.problems)
    assert kinds == sorted([
        ("dark", "backup", reco[0]),
        ("orphan", "backup", "qcd/stranger.parquet"),
        ("orphan", "backup", "qcd/.x.parquet.tmp-0123"),
        ("missing", "backup", tags[0]),
        ("missing", "backup", tags[1]),
    ])
    assert "replica marked bad" in next(p.detail for p in report.problems if p.path == tags[1])
    assert report.damaged
    removed = gc(home.store, grace_seconds=0)
    assert sorted(p for _, p in removed) == ["qcd/.x.parquet.tmp-0123", "qcd/stranger.parquet"]
    assert (backup / reco[0]).exists()  # a dark copy may be the last intact one: gc leaves it
    # fsck only reports; verify records the gone file, then replicate adopts the dark copy and puts the
    # gone files back
    assert states_at(home, "backup")[tags[0]] == "good"
    checked = verify(home.catalog, home.site, site="backup")
    assert sorted((f.kind, f.path, f.state) for f in checked.damaged) == [("missing", tags[0], "bad"),
                                                                          ("missing", tags[1], "bad")]
    r = replicate(home.catalog, home.site, "qcd", "backup", containers=["tag", "reco"])
    assert r.ok and r.adopted == 1 and r.copied == len(reco) - 1 + 2
    assert set(states_at(home, "backup").values()) == {"good"}
    assert not fsck(home.store).problems
