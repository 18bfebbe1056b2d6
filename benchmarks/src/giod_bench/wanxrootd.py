"""The giod client reading its own container files from an XRootD server (``root://`` site), for ``giod bench wan``.

The same Arrow container files the giod server serves are exported by an
``xrootd`` (read-only, the site's directory as its root). A copy of the
federation's catalog registers that server as a site holding every file
(adopted after the server's CRC-32C of each matched the catalog's) and marks
the local copies bad, so ``ds.read([collection])`` goes through the whole
store — replica choice, the container reader's column ranges, block checksums
— over ``root://``: vectored reads (``kXR_readv``) in place of giod's
multi-range HTTP requests. The giod server is not involved, so the row says
what giod's client would get if its server handed the data plane to XRootD.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from giod_bench.wanpeers import _Data, _Read

__all__ = ["GIOD_XROOTD", "GIOD_XROOTD_DIRECT", "GiodOverXRootD", "giod_over_xrootd"]

GIOD_XROOTD = "giod client over XRootD (same files)"
GIOD_XROOTD_DIRECT = "giod client over XRootD, straight at xrootd (no proxy)"


class GiodOverXRootD:
    """Reads of the collection by the giod client from an ``xrootd`` serving the site's directory."""

    def __init__(self, data: _Data, work: Path, address: tuple[str, int]):
        self.data = data
        self.address = address
        self.home = work / "xrootd-home"
        self.home.mkdir()
        # a copy of the catalog, so that marking the local copies bad touches nothing the giod server reads
        with sqlite3.connect(data.fed_path / "catalog.sqlite") as src, \
                sqlite3.connect(self.home / "catalog.sqlite") as dst:
            src.backup(dst)
        self._sites: dict[tuple[str, int], str] = {}

    def _site_at(self, address: tuple[str, int]) -> str:
        """The name of the site at ``address`` (registered on first use), the only one with good copies."""
        import giod
        from giod.errors import GiodError
        from giod.replication import replicate
        from giod_bench.wanpeers import COLLECTION, DATASET

        name = self._sites.get(address)
        fed = giod.open(self.home)
        try:
            container = fed.dataset(DATASET).schema.container_of(COLLECTION)
            if name is None:
                name = self._sites[address] = f"xrd{len(self._sites)}"
                fed.add_site(name, f"root://{address[0]}:{address[1]}//", 1)
                report = replicate(fed.catalog, fed.site, DATASET, name, containers=[container])
                if not report.ok or report.adopted != len(self.data.files):
                    raise GiodError(f"the XRootD server does not hold the container files: {report.failed[:3]}")
            others = [s.name for s in fed.catalog.sites() if s.name != name]
            fed.catalog.set_replica_states([(c.id, s, "bad") for db in fed.catalog.databases(DATASET)
                                            for c in db.containers for s in others]
                                           + [(db.container(container).id, name, "good")  # type: ignore[union-attr]
                                              for db in fed.catalog.databases(DATASET)])
        finally:
            fed.close()
        return name

    def read(self, address: tuple[str, int]) -> _Read:
        """The collection read by a fresh client through ``address`` (the server or a proxy in front of it)."""
        import giod
        from giod_bench.wanpeers import COLLECTION, DATASET, _check_rows, _Read

        name = self._site_at(address)
        start = time.perf_counter()
        fed = giod.open(self.home)
        try:
            ds = fed.dataset(DATASET).pinned()
            ds.databases()
            opened = time.perf_counter() - start
            events = ds.read([COLLECTION])
            seconds = time.perf_counter() - start
            _check_rows(len(events), self.data.n_events, GIOD_XROOTD)
            site: Any = fed.site(name)
            wire = site.received
            detail = {"files": site.opened, "readv_requests": site.vector_reads}
        finally:
            fed.close()
        return _Read(seconds, open_s=opened, wire=wire, detail=detail)


@contextmanager
def giod_over_xrootd(data: _Data, work: Path, notes: list[str]) -> Iterator[GiodOverXRootD | None]:
    """An ``xrootd`` serving the site's container files, and the reader through it; None (with a note) without
    XRootD here."""
    from giod.errors import GiodError
    from giod.storage.xrootd import available
    from giod_bench import xrootd

    reason = xrootd.missing() or available()
    if reason is not None:
        notes.append(f"{GIOD_XROOTD} left out: {reason}")
        yield None
        return
    server = xrootd.XRootDServer(data.site_root)
    try:
        server.start()
    except GiodError as exc:
        notes.append(f"{GIOD_XROOTD} left out: the XRootD server did not start ({exc})")
        yield None
        return
    try:
        yield GiodOverXRootD(data, work, server.address)
    finally:
        server.stop()
