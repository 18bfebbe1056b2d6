"""Every container format passes the same suite (``conformance.FormatTests``): giod's Arrow files, raw and
compressed, its Parquet files, and a format of somebody else's, registered by a call or an entry point."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import giod
from giod.errors import ConfigError
from giod.storage.formats import FORMATS, SUFFIX, ContainerFormat, find_format, format_names, register_format, registry
from giod.storage.formats.parquet import thrift
from giod.testing import synthetic
from giod_bench import crafted
from tests.storage.conformance import FormatTests
from tests.storage.tinyformat import TINY, TinyFormat

ROOT = Path(__file__).resolve().parents[2]


class TestArrowRaw(FormatTests):
    container_format = "arrow"
    options = {"compression": "none"}

    def flip(self, data: bytearray) -> None:
        batch = crafted.batches(data)[1]
        offset, length = (int(x) for x in batch.msg.buffers[-1])  # the last member's values
        data[batch.body + offset + length // 2] ^= 0x10

    def crafted(self, data: bytearray, schema: pa.Schema) -> bytes:
        crafted.column_buffer(data, schema, 0, "jets", 1)[3] = 100_000_000  # a list offset past its values
        crafted.reseal(data)
        return bytes(data)


class TestArrowCompressed(TestArrowRaw):
    options = {"compression": "zstd", "min_savings": 0.0}  # the codec kept whatever it saves

    def crafted(self, data: bytearray, schema: pa.Schema) -> bytes:
        batch = crafted.batches(data)[0]
        assert batch.msg.codec == "zstd"
        buffer = crafted.buffer_of(data, batch, int(np.flatnonzero(batch.msg.buffers[:, 1] > 8)[-1]))
        buffer[:8] = np.frombuffer((1 << 40).to_bytes(8, "little"), dtype=np.uint8)  # claims a terabyte
        crafted.reseal(data)
        return bytes(data)


def _first_page(data: bytes | bytearray) -> tuple[object, int, int]:
    """The first column chunk's offset index (thrift struct, its offset and length) of a Parquet file."""
    n = int.from_bytes(data[-8:-4], "little")
    meta, _ = thrift.decode_struct(bytes(data[-8 - n:-8]))
    chunk = meta.value(4).items[0].value(1).items[0]
    return chunk, chunk.value(4), chunk.value(5)


class TestParquet(FormatTests):
    container_format = "parquet"
    crafted_reads = ("read_rows",)  # whole reads never look at the page index

    def flip(self, data: bytearray) -> None:
        _chunk, at, length = _first_page(data)
        page = thrift.decode_struct(bytes(data[at:at + length]))[0].value(1).items[0]
        data[page.value(1) + page.value(2) - 3] ^= 0xFF  # inside the first page's (checksummed) data

    def crafted(self, data: bytearray, schema: pa.Schema) -> bytes:
        _chunk, at, length = _first_page(data)  # the offset index: no checksum covers it
        data[at:at + length] = b"\x19\x1c\x16" + b"\xff" * (length - 3)
        return bytes(data)


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> TinyFormat:
    """The tiny format registered for one test (the registry as it was afterwards)."""
    monkeypatch.setattr(registry, "_LOADED", dict(registry._LOADED))
    register_format(TINY)
    return TINY


class TestSomebodyElsesFormat(FormatTests):
    container_format = "tiny"

    @pytest.fixture(autouse=True)
    def registered(self, tiny: TinyFormat) -> None:
        pass

    def flip(self, data: bytearray) -> None:
        data[len(data) - 100] ^= 0x01  # inside the last cluster's message

    def crafted(self, data: bytearray, schema: pa.Schema) -> bytes:
        head = 12 + int.from_bytes(data[8:12], "little")
        data[head + 8:head + 16] = (1 << 40).to_bytes(8, "little")  # the first cluster claims a terabyte
        return bytes(data)


def test_a_registered_format_is_written_and_read_end_to_end(tmp_path: Path, tiny: TinyFormat) -> None:
    assert "tiny" in FORMATS and SUFFIX["tiny"] == ".tiny" and format_names()[:2] == ["arrow", "parquet"]
    fed = giod.open(tmp_path / "fed", create=True)
    events = synthetic.events(300, seed=2)
    ds = fed.create_dataset("qcd", synthetic.schema(), container_format="tiny")
    with ds.writer(database_events=150, cluster_events=40) as w:
        w.append(events)
    containers = [c for db in ds.databases() for c in db.containers if c.name != "tag-index"]  # always Arrow
    assert {c.format for c in containers} == {"tiny"} and all(c.path.endswith(".tiny") for c in containers)
    got = ds.read(["jets", "hits"])
    assert got.jets.pt.to_list() == events.jets.pt.to_list() and got.hits.x.to_list() == events.hits.x.to_list()
    assert ds.select("event == 7").read(["jets"]).jets.pt.to_list() == [events.jets.pt[7].to_list()]
    other = fed.create_dataset("mixed", synthetic.schema())
    with other.writer(container_format="tiny") as w:  # a writer's setting, the dataset fixing none
        w.append(events[:10])
    assert other.read(["tracks"]).tracks.pt.to_list() == events.tracks.pt[:10].to_list()
    fed.close()


def test_a_format_from_an_entry_point_reads_in_a_process_that_never_registered_it(tmp_path: Path,
                                                                                   tiny: TinyFormat) -> None:
    fed = giod.open(tmp_path / "fed", create=True)
    events = synthetic.events(60, seed=4)
    ds = fed.create_dataset("qcd", synthetic.schema(), container_format="tiny")
    with ds.writer() as w:
        w.append(events)
    fed.close()
    dist = tmp_path / "eps" / "giod_tiny-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: giod-tiny\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[giod.formats]\ntiny = tests.storage.tinyformat:TINY\n")
    code = ("import giod, sys\n"
            "from giod.storage.formats import registry\n"
            "assert 'tiny' not in registry._LOADED\n"
            f"print(giod.open({str(tmp_path / 'fed')!r}).dataset('qcd').read(['jets']).jets.pt.to_list())\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}:{tmp_path / 'eps'}"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(events.jets.pt.to_list())
    without = {**env, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}  # uninstalled: a clear error, not a crash
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=without)
    assert done.returncode == 1 and "IntegrityError" in done.stderr and "unknown format 'tiny'" in done.stderr


def test_names_and_suffixes_are_checked_when_a_format_is_registered(tiny: TinyFormat) -> None:
    class Named(TinyFormat):
        def __init__(self, name: str, suffix: str):
            self.name, self.suffix = name, suffix

    for name, suffix in (("arrow", ".arw"), ("mine", ".parquet"), ("tiny2", ".tiny"), ("../x", ".x"),
                         ("ok", "x"), ("ok", "./x"), ("", ".e")):
        with pytest.raises(ConfigError):
            register_format(Named(name, suffix))
    with pytest.raises(ConfigError):
        register_format("parquet")  # type: ignore[arg-type]
    assert register_format(tiny) is tiny and find_format("tiny") is tiny  # again: the same one, no error
    assert find_format("nope") is None and find_format("../../etc") is None and "nope" not in FORMATS
    assert isinstance(find_format("parquet"), ContainerFormat)


def test_a_writer_option_names_a_format_nobody_registered(tmp_path: Path) -> None:
    fed = giod.open(tmp_path / "fed", create=True)
    ds = fed.create_dataset("qcd", synthetic.schema())
    with pytest.raises(ConfigError, match="container_format must be one of arrow, parquet"):
        ds.writer(container_format="tiny")
    with pytest.raises(ConfigError):
        fed.create_dataset("lake", synthetic.schema(), container_format="tiny")
    fed.close()


@pytest.fixture(autouse=True)
def _no_leftover_registration() -> Iterator[None]:
    yield
    assert "tiny" not in registry._LOADED  # each test's registration went with it


def test_files_found_on_a_site_are_read_in_the_format_their_suffix_names(tmp_path: Path, tiny: TinyFormat) -> None:
    """fsck and recover ask the registry, so the footer of a registered format's file is found, as Arrow's is."""
    from giod.store.consistency import commit_metadata, fsck

    assert registry.format_of_path("qcd/x/reco.tiny") is tiny
    assert registry.format_of_path("qcd/x/reco.parquet") is find_format("parquet")
    assert registry.format_of_path("qcd/x/reco.txt") is None
    fed = giod.open(tmp_path / "fed", create=True)
    ds = fed.create_dataset("qcd", synthetic.schema(), container_format="tiny")
    with ds.writer() as w:
        w.append(synthetic.events(20, seed=4))
    for c in ds.databases()[0].containers:
        record = commit_metadata(fed.site(), c.path)
        assert record is not None and record["dataset"] == "qcd", c.path
    assert not fsck(fed.store).problems
    fed.close()
