"""The behaviour every container format and every site kind must have, as test classes to subclass.

As zarr's ``StoreTests`` are subclassed per store, :class:`FormatTests` is
subclassed per container format (and per way of writing one: Arrow raw and
compressed) in ``test_format_conformance.py``, and :class:`SiteTests` per site
kind in ``test_site_conformance.py``. A subclass says how its format damages
or crafts a file, or how its site is made; the tests are the same for all.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pytest

from giod.errors import GiodError, IntegrityError, NotFound, StorageError
from giod.replication.transfer import file_checksum
from giod.storage.container import COMMIT_KEY, SUFFIX, ContainerReader, ContainerWriter, WriteOptions
from giod.storage.formats import Described, WrittenContainer, find_format
from giod.storage.site import LocalSite, Site, SiteHealth, is_temporary, open_site

N_EVENTS = 300
CLUSTERS = (120, 100, 80)


class FormatTests:
    """What a container format does, written and read through the store's front (``giod.storage.container``)."""

    container_format: ClassVar[str]
    options: ClassVar[dict[str, Any]] = {}
    #: the read paths :meth:`crafted` damages (a Parquet footer's page index serves only reads of some rows)
    crafted_reads: ClassVar[tuple[str, ...]] = ("read", "read_rows")

    # ---------------------------------------------------------------- what a subclass says

    def flip(self, data: bytearray) -> None:
        """Flip one bit of ``data`` (a whole file) inside the values a whole read decodes."""
        raise NotImplementedError

    def crafted(self, data: bytearray, schema: pa.Schema) -> bytes:
        """``data`` with a structure that makes no sense, every checksum the file holds agreeing."""
        raise NotImplementedError

    # ---------------------------------------------------------------- helpers

    @pytest.fixture
    def site(self, tmp_path: Path) -> Site:
        return LocalSite("local", str(tmp_path / "site"))

    def write(self, site: Site, table: pa.Table, sizes: tuple[int, ...] = CLUSTERS, name: str = "reco",
              metadata: dict[str, str] | None = None) -> WrittenContainer:
        path = f"ds/db1/{name}{SUFFIX[self.container_format]}"
        w = ContainerWriter(site, path, table.schema,
                            WriteOptions(container_format=self.container_format, **self.options), metadata)
        at = 0
        for n in sizes:
            w.write_cluster(table.slice(at, n))
            at += n
        return w.close()

    def reader(self, site: Site, written: WrittenContainer, **figures: Any) -> ContainerReader:
        kw: dict[str, Any] = dict(expected_size=written.size, clusters=written.cluster_entries or None,
                                  checksums=written.cluster_checksums or None)
        return ContainerReader(site, written.path, format=written.format, **{**kw, **figures})

    def damaged(self, site: Site, written: WrittenContainer, change: Any) -> None:
        path = Path(str(site.local_path(written.path)))
        data = bytearray(path.read_bytes())
        path.write_bytes(change(data) or data)

    # ---------------------------------------------------------------- the tests

    def test_what_is_written_is_what_the_catalog_registers(self, site: Site, reco: pa.Table) -> None:
        w = self.write(site, reco)
        assert w.format == self.container_format == find_format(w.format).name  # type: ignore[union-attr]
        assert w.path.endswith(SUFFIX[self.container_format]) and sum(w.cluster_entries) == reco.num_rows
        assert (w.checksum, w.size) == file_checksum(site, w.path)
        assert not any(is_temporary(f.path) for f in site.walk())
        described = find_format(w.format).describe(Path(str(site.local_path(w.path))).read_bytes())  # type: ignore[union-attr]
        assert (described.cluster_entries, described.cluster_checksums) == (w.cluster_entries, w.cluster_checksums)

    def test_reads_whole(self, site: Site, reco: pa.Table) -> None:
        w = self.write(site, reco)
        r = self.reader(site, w)
        got = r.read()
        assert got.equals(reco.cast(got.schema)) and r.num_row_groups == len(w.cluster_entries)
        r.close()

    def test_reads_some_columns_and_members(self, site: Site, reco: pa.Table) -> None:
        r = self.reader(site, self.write(site, reco))
        assert r.read(["tracks"]).column("tracks").to_pylist() == reco.column("tracks").to_pylist()
        pts = r.read(["jets.list.element.pt"]).column("jets").to_pylist()
        assert pts == [[{"pt": j["pt"]} for j in ev] for ev in reco.column("jets").to_pylist()]
        with pytest.raises(GiodError):
            r.read(["no_such_collection"])

    def test_reads_some_clusters(self, site: Site, reco: pa.Table) -> None:
        w = self.write(site, reco)
        r = self.reader(site, w)
        starts = np.concatenate([[0], np.cumsum(w.cluster_entries)])
        last = len(w.cluster_entries) - 1
        got = r.read(["jets"], [last])
        assert got.column("jets").to_pylist() == reco.column("jets").to_pylist()[starts[last]:]

    def test_reads_some_rows(self, site: Site, reco: pa.Table) -> None:
        r = self.reader(site, self.write(site, reco))
        rows = np.array([0, 7, 119, 120, 250, N_EVENTS - 1])
        assert r.read_rows(["jets", "tracks"], rows).to_pylist() == reco.take(rows).select(
            ["jets", "tracks"]).to_pylist()
        assert r.read_rows(None, np.array([], dtype=np.int64)).num_rows == 0

    def test_reads_through_a_giod_server(self, giod_server: tuple[str, Path], reco: pa.Table) -> None:
        url, directory = giod_server
        w = self.write(LocalSite("local", str(directory)), reco, name=f"reco-{self.container_format}-{id(self)}")
        remote = open_site("local", f"{url}/files/local")
        assert remote.networked
        r = self.reader(remote, w)
        assert r.read().column("jets").to_pylist() == reco.column("jets").to_pylist()
        rows = np.array([3, 200])
        assert r.read_rows(["tracks"], rows).to_pylist() == reco.take(rows).select(["tracks"]).to_pylist()
        r.close()

    def test_the_footer_keeps_the_writers_entries(self, site: Site, reco: pa.Table) -> None:
        w = self.write(site, reco, metadata={COMMIT_KEY: '{"dataset": "qcd"}'})
        with site.open(w.path) as fh:
            kv = find_format(w.format).footer_metadata(fh)  # type: ignore[union-attr]
        assert kv[COMMIT_KEY.encode()] == b'{"dataset": "qcd"}'
        assert self.reader(site, w).read(["tracks"]).num_rows == reco.num_rows

    def test_an_empty_container(self, site: Site, reco: pa.Table) -> None:
        w = self.write(site, reco.slice(0, 0), sizes=(0,))
        assert w.cluster_entries == () and w.size == site.size(w.path)
        r = self.reader(site, w)
        assert r.read().num_rows == 0 and r.num_row_groups == 0
        assert r.read(["jets"]).schema.names == ["jets"]

    def test_a_flipped_bit_is_caught(self, site: Site, reco: pa.Table) -> None:
        w = self.write(site, reco)
        self.damaged(site, w, self.flip)
        with pytest.raises(IntegrityError):
            self.reader(site, w).read()

    def test_a_crafted_structure_is_refused(self, site: Site, reco: pa.Table) -> None:
        w = self.write(site, reco)
        data = bytearray(Path(str(site.local_path(w.path))).read_bytes())
        bad = self.crafted(data, reco.schema)
        Path(str(site.local_path(w.path))).write_bytes(bad)
        # the catalog's figures are the crafted file's own, where it still tells them: whoever wrote it made
        # every checksum agree
        try:
            figures = find_format(w.format).describe(bad)  # type: ignore[union-attr]
        except IntegrityError:
            figures = Described(w.cluster_entries, w.cluster_checksums)
        reads = {"read": lambda r: r.read(["jets"]), "read_rows": lambda r: r.read_rows(["jets"], np.array([2, 3]))}
        for name in self.crafted_reads:
            with pytest.raises(IntegrityError):
                reads[name](self.reader(site, w, expected_size=len(bad), clusters=figures.cluster_entries or None,
                                        checksums=figures.cluster_checksums or None))

    def test_a_truncated_or_missing_file(self, site: Site, reco: pa.Table) -> None:
        w = self.write(site, reco)
        self.damaged(site, w, lambda d: d[: len(d) // 2])
        with pytest.raises(IntegrityError, match="truncated or replaced"):
            self.reader(site, w)
        with pytest.raises(IntegrityError):  # nor without the catalog's size
            self.reader(site, w, expected_size=None).read()
        site.remove(w.path)
        with pytest.raises(NotFound):
            self.reader(site, w)

    def test_a_format_the_registry_does_not_know(self, site: Site, reco: pa.Table) -> None:
        w = self.write(site, reco)
        with pytest.raises(IntegrityError, match="unknown format"):
            ContainerReader(site, w.path, format=self.container_format + "-x")
        with pytest.raises(StorageError, match="unknown container format"):
            ContainerWriter(site, "ds/x.bin", reco.schema, WriteOptions(container_format="x" + self.container_format))


class SiteTests:
    """What a site kind does: files written out of sight and published whole, read, listed, removed, and the
    abilities of :class:`~giod.storage.site.Site` (a kind that lacks one answers it as a no-op)."""

    networked: ClassVar[bool] = False
    checks_uploads: ClassVar[bool] = False
    replaces_on_publish: ClassVar[bool] = True
    #: whether the kind names the local file of a path (then reads map it)
    local: ClassVar[bool] = False

    @pytest.fixture
    def site(self, tmp_path: Path) -> Site:
        raise NotImplementedError

    def publish(self, site: Site, path: str, data: bytes) -> None:
        pending = site.create(path)
        pending.write(data[: len(data) // 2])
        pending.write(memoryview(data)[len(data) // 2:])
        pending.publish()

    def test_declares_its_abilities(self, site: Site) -> None:
        assert (site.networked, site.checks_uploads, site.replaces_on_publish) == (
            self.networked, self.checks_uploads, self.replaces_on_publish)
        health = site.health()
        assert isinstance(health, SiteHealth) and health.reachable, health
        assert not site.away()

    def test_a_file_appears_only_when_published(self, site: Site) -> None:
        pending = site.create("ds/db/a.arrow")
        pending.write(b"x" * 1000)
        with pytest.raises(NotFound):
            site.size("ds/db/a.arrow")
        pending.publish()
        assert site.size("ds/db/a.arrow") == 1000
        assert [f.path for f in site.walk() if not is_temporary(f.path)] == ["ds/db/a.arrow"]

    def test_reads_back_what_was_written(self, site: Site) -> None:
        data = os.urandom(300_000)
        self.publish(site, "ds/db/b.parquet", data)
        with site.open("ds/db/b.parquet") as fh:
            assert fh.read() == data
        with site.open("ds/db/b.parquet") as fh:
            fh.seek(123_456)
            assert fh.read(10) == data[123_456:123_466]
        assert (site.local_path("ds/db/b.parquet") is not None) == self.local
        files = {f.path: f.size for f in site.walk()}
        assert files == {"ds/db/b.parquet": len(data)}

    def test_a_discarded_file_leaves_nothing(self, site: Site) -> None:
        pending = site.create("ds/db/c.arrow")
        pending.write(b"abc")
        pending.discard()
        pending.discard()  # twice is fine
        assert [f.path for f in site.walk()] == []
        with pytest.raises(NotFound):
            site.open("ds/db/c.arrow")

    def test_publishing_again_replaces_the_file(self, site: Site) -> None:
        self.publish(site, "ds/db/d.arrow", b"old bytes")
        if not self.replaces_on_publish:
            site.remove("ds/db/d.arrow")  # as callers do for such kinds
        self.publish(site, "ds/db/d.arrow", b"new")
        with site.open("ds/db/d.arrow") as fh:
            assert fh.read() == b"new"

    def test_removes(self, site: Site) -> None:
        self.publish(site, "ds/db/e.arrow", b"e")
        assert [f.path for f in site.walk()] == ["ds/db/e.arrow"]  # listed before: no listing kept after
        site.remove("ds/db/e.arrow")
        site.remove("ds/db/e.arrow")  # a missing file is no error
        with pytest.raises(NotFound):
            site.size("ds/db/e.arrow")
        assert [f.path for f in site.walk()] == []

    def test_missing_files_are_not_found(self, site: Site) -> None:
        for call in (site.open, site.size):
            with pytest.raises(NotFound):
                call("ds/none/such.arrow")

    def test_refuses_paths_that_leave_its_root(self, site: Site) -> None:
        for path in ("../x", "/etc/passwd", "ds/../../x", "a\\b", "", "ds//x"):
            with pytest.raises(StorageError):
                site.create(path)
            with pytest.raises((StorageError, NotFound)):
                site.open(path)

    def test_the_abilities_can_be_called_on_every_kind(self, site: Site, tmp_path: Path) -> None:
        self.publish(site, "ds/db/f.arrow", b"0123456789")
        site.expect_size("ds/db/f.arrow", 10)
        site.prefetch([("ds/db/f.arrow", 10, None)])
        with site.open("ds/db/f.arrow") as fh:
            assert fh.read() == b"0123456789"
        site.release("ds/db/f.arrow")
        site.forget("ds/db/f.arrow")
        assert site.size("ds/db/f.arrow") == 10
        other = LocalSite("elsewhere", str(tmp_path / "elsewhere"))
        self.publish(other, "ds/db/g.arrow", b"g")
        checksum, size = file_checksum(other, "ds/db/g.arrow")
        outcome = site.pull(other, "ds/db/g.arrow", size, checksum)
        assert outcome in (None, "copied", "adopted")

    def test_holds_containers_the_store_reads(self, site: Site, reco: pa.Table) -> None:
        path = "ds/db/reco.arrow"
        w = ContainerWriter(site, path, reco.schema, WriteOptions(compression="none"))
        w.write_cluster(reco)
        written = w.close()
        r = ContainerReader(site, path, expected_size=written.size, format="arrow",
                            clusters=written.cluster_entries, checksums=written.cluster_checksums)
        assert r.read_rows(["jets"], np.array([5, 6])).to_pylist() == reco.take([5, 6]).select(["jets"]).to_pylist()
        assert (written.checksum, written.size) == file_checksum(site, path)
