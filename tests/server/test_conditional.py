"""Files of a real server on loopback asked conditionally (If-None-Match, If-Range), and the bound on
the cache of their ETags."""

from __future__ import annotations

from pathlib import Path

from giod.server import cache as server_cache
from tests.server.test_http_semantics import Site, call, site  # noqa: F401 - site is a fixture

# --------------------------------------------------------------------------- conditional requests


def test_if_none_match_with_the_current_etag_is_304(site: Site) -> None:
    target = f"/files/local/{site.file}"
    whole = call(site.url, "GET", target, site.admin)
    assert whole.status == 200 and whole.headers["etag"] == f'"{site.checksum}"'
    for method in ("GET", "HEAD"):
        for value in (whole.headers["etag"], f'"other", {whole.headers["etag"]}', "W/" + whole.headers["etag"], "*"):
            a = call(site.url, method, target, site.admin, headers={"If-None-Match": value})
            assert a.status == 304, (method, value)
            assert a.body == b"" and a.headers["etag"] == whole.headers["etag"]
        # another ETag: the file as usual
        a = call(site.url, method, target, site.admin, headers={"If-None-Match": '"crc32c:00000000"'})
        assert a.status == 200
    # a range asked with the current ETag: still nothing to send
    a = call(site.url, "GET", target, site.admin, headers={"If-None-Match": whole.headers["etag"],
                                                             "Range": "bytes=0-9"})
    assert a.status == 304


def test_if_range_gives_the_range_only_while_the_file_is_the_same(site: Site) -> None:
    target = f"/files/local/{site.file}"
    whole = call(site.url, "GET", target, site.admin).body
    etag = f'"{site.checksum}"'
    a = call(site.url, "GET", target, site.admin, headers={"Range": "bytes=4-13", "If-Range": etag})
    assert (a.status, a.body) == (206, whole[4:14])
    for stale in ('"crc32c:00000000"', "W/" + etag, "Wed, 21 Oct 2015 07:28:00 GMT"):
        a = call(site.url, "GET", target, site.admin, headers={"Range": "bytes=4-13", "If-Range": stale})
        assert (a.status, a.body) == (200, whole), stale
        assert "content-range" not in a.headers
    # several ranges, matching: multipart as usual
    a = call(site.url, "GET", target, site.admin, headers={"Range": "bytes=0-3,-4", "If-Range": etag})
    assert a.status == 206 and a.headers["content-type"].startswith("multipart/byteranges")


# --------------------------------------------------------------------------- the ETag cache


def test_the_etag_cache_stays_within_its_bounds(site: Site) -> None:
    st = site.app.state.giod
    saved = st.etags
    bounded = server_cache.ETagCache
    st.etags = cache = bounded(max_entries=8, capacity=8 * (bounded.OVERHEAD + 120))
    root = Path(site.fed.site("local").root)
    try:
        (root / "qcd" / "many").mkdir(exist_ok=True)
        for i in range(40):
            name = f"qcd/many/{'n' * (i % 3) * 30}{i}.bin"
            (root / name).write_bytes(b"x" * i)
            a = call(site.url, "HEAD", f"/files/local/{name}", site.admin)
            assert a.status == 200 and a.headers["etag"] == f'"size{i}-mtime{(root / name).stat().st_mtime_ns}"'
            assert len(cache) <= 8 and cache.held <= cache.capacity
        assert len(cache) == 8  # used, and full
        # a file whose ETag was evicted is answered the same
        a = call(site.url, "HEAD", f"/files/local/{site.file}", site.admin)
        assert a.headers["etag"] == f'"{site.checksum}"'
        assert len(cache) <= 8 and cache.held <= cache.capacity
    finally:
        st.etags = saved
