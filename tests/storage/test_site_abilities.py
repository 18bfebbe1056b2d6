"""Every site kind answers the abilities of ``Site``; a kind that lacks one does nothing."""

from __future__ import annotations

from giod.replication.transfer import file_checksum, place
from giod.storage.remote import RemoteSite
from giod.storage.site import LocalSite, Site, open_site


def _publish(site: Site, path: str, data: bytes) -> None:
    pending = site.create(path)
    pending.write(data)
    pending.publish()


def test_a_local_site_takes_the_abilities_as_no_ops(tmp_path):
    site = open_site("here", str(tmp_path / "a"))
    _publish(site, "ds/x.arrow", b"abc")
    site.prefetch([("ds/x.arrow", 3, None)])
    site.expect_size("ds/x.arrow", 99)  # a local site asks its file system, not the catalog
    assert site.size("ds/x.arrow") == 3
    site.forget("ds/x.arrow")
    site.release("ds/x.arrow")
    assert site.pull(open_site("there", str(tmp_path / "b")), "ds/x.arrow", 3, "crc") is None
    assert (site.networked, site.checks_uploads, site.replaces_on_publish) == (False, False, True)


def test_a_giod_server_site_declares_how_it_differs():
    assert RemoteSite.networked and RemoteSite.checks_uploads and not RemoteSite.replaces_on_publish
    for name in ("prefetch", "release", "expect_size", "forget", "pull"):
        assert getattr(RemoteSite, name) is not getattr(Site, name), name


def test_place_copies_between_local_sites_without_asking_their_kind(tmp_path):
    src, dst = LocalSite("a", str(tmp_path / "a")), LocalSite("b", str(tmp_path / "b"))
    _publish(src, "ds/x.arrow", b"payload")
    checksum, size = file_checksum(src, "ds/x.arrow")
    assert place(src, dst, "ds/x.arrow", size, checksum) == "copied"
    assert place(src, dst, "ds/x.arrow", size, checksum) == "adopted"
    assert dst.open("ds/x.arrow").read() == b"payload"


def test_each_kind_reports_its_own_health_and_whether_it_is_away(tmp_path):
    site = LocalSite("here", str(tmp_path / "new"))
    health = site.health()
    assert health.reachable and "not created yet" in health.detail and health.free_bytes
    assert site.away()  # nothing there to read from yet
    (tmp_path / "new").mkdir()
    assert not site.away() and site.health().detail == ""
    gone = LocalSite("gone", str(tmp_path / "no" / "such" / "dir"))
    assert not gone.health().reachable and gone.away()
    (tmp_path / "file").write_text("x")
    assert not LocalSite("f", str(tmp_path / "file")).health().reachable
    memory = open_site("mem", "memory://abilities-test")
    assert memory.health().reachable and not memory.away()
