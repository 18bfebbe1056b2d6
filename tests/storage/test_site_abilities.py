"""Abilities of ``Site`` beyond the conformance suite (``test_site_conformance.py``): how a giod server's
site differs, copies between sites, health and absence."""

from __future__ import annotations

from giod.replication.transfer import file_checksum, place
from giod.storage.remote import RemoteSite
from giod.storage.site import LocalSite, Site, open_site


def _publish(site: Site, path: str, data: bytes) -> None:
    pending = site.create(path)
    pending.write(data)
    pending.publish()


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
