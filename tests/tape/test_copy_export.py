"""A copy (``giod copy``) and an export (``giod export``) of a dataset on tape: one planned request, each
cartridge mounted once, the same bytes as from disk."""

from __future__ import annotations

from pathlib import Path

import awkward as ak
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.exchange import copy_dataset
from giod.storage.tape import NearlineSite, TapeLibrary
from giod.tier import move_to_nearline


def _to_tape(fed: giod.Federation) -> TapeLibrary:
    move_to_nearline(fed.store, "qcd", "archive")
    site = fed.store.site("archive")
    assert isinstance(site, NearlineSite)
    lib = site.library
    for path in lib.paths():  # on tape only, the drives empty: as long after the move
        lib.evict(path)
    lib.unload()
    return lib


def _cartridges(lib: TapeLibrary) -> int:
    return len({f.cartridge for f in lib.files().values()})


def test_a_copy_from_tape_mounts_each_cartridge_once_and_copies_the_tape_bytes(fed, tmp_path):
    lib = _to_tape(fed)
    before = lib.counters()
    dst = giod.open(tmp_path / "dst", create=True)
    report = copy_dataset(fed, dst, "qcd")
    after = lib.counters()
    assert report.copied == 16 and report.files_copied == len(lib.paths())
    assert after["mounts"] - before["mounts"] == _cartridges(lib) == 4
    assert lib.requests() == []  # the copy's pins ended with it
    local = dst.store.site("local")
    for db in dst.catalog.databases("qcd"):
        for c in db.containers:
            with local.open(c.path) as fh:
                assert fh.read() == (lib.tape / c.path).read_bytes()
    dst.close()


def test_a_skim_from_tape_stages_tags_and_data_in_one_request(fed, tmp_path):
    expected = fed["qcd"].select("njets >= 3").read(["jets", "ht"])
    lib = _to_tape(fed)
    dst = giod.open(tmp_path / "dst", create=True)
    before = lib.counters()["mounts"]
    report = copy_dataset(fed, dst, "qcd", select="njets >= 3", as_name="skim")
    assert report.events == len(expected) > 0
    assert lib.counters()["mounts"] - before == _cartridges(lib)
    assert ak.to_list(dst["skim"].read(["jets", "ht"])) == ak.to_list(expected)
    dst.close()


def test_an_export_from_tape_mounts_each_cartridge_once_and_writes_the_same_file(fed, tmp_path):
    def export(out: Path, where: str | None = None) -> bytes:
        args = ["export", "qcd", "--format", "parquet", "-o", str(out), "-f", str(fed.root)]
        r = CliRunner().invoke(main, args + (["--where", where] if where else []))
        assert r.exit_code == 0, r.output
        return out.read_bytes()

    from_disk = export(tmp_path / "disk.parquet")
    selected = export(tmp_path / "disk-sel.parquet", "njets >= 2")
    lib = _to_tape(fed)
    before = lib.counters()["mounts"]
    assert export(tmp_path / "tape.parquet") == from_disk
    assert lib.counters()["mounts"] - before == _cartridges(lib) == 4
    for path in lib.paths():
        lib.evict(path)
    lib.unload()
    assert export(tmp_path / "tape-sel.parquet", "njets >= 2") == selected  # tags and data in one request
    assert lib.counters()["mounts"] - before == 2 * _cartridges(lib)
