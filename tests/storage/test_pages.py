"""Page-level reads give what pyarrow gives, reading only the pages that hold the rows."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from giod.errors import DataError, IntegrityError, NotFound, StorageError
from giod.storage.formats.parquet import read_rows, thrift
from tests.storage import parquet_samples as samples

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


class CountingFile(io.BytesIO):
    """An in-memory file that counts the bytes it hands out."""

    def __init__(self, data: bytes):
        super().__init__(data)
        self.bytes_read = 0

    def read(self, n: int | None = -1) -> bytes:
        out = super().read(n)
        self.bytes_read += len(out)
        return out

    def readinto(self, b: Any) -> int:
        n = super().readinto(b)
        self.bytes_read += n
        return n


def expected(data: bytes, columns: list[str] | None, rows: np.ndarray) -> pa.Table:
    return pq.ParquetFile(io.BytesIO(data)).read(columns=columns).take(pa.array(rows, type=pa.int64()))


def assert_same(got: pa.Table, want: pa.Table) -> None:
    assert got.schema == want.schema
    assert got.num_rows == want.num_rows
    assert got.equals(want), (got.to_pylist()[:3], want.to_pylist()[:3])


COLUMN_CHOICES = [
    None, ["jets"], ["ht", "event"], ["jets.list.element.pt"], ["met", "jets"],
    ["jets.list.element.cov", "pass", "jets.list.element.pt"], ["met.terms", "ids"],
    ["jets.list.element.hits", "layer"],
]


@st.composite
def files(draw: Any) -> tuple[bytes, int]:
    n = draw(st.integers(1, 300))
    t = samples.table(n, draw(st.integers(0, 2**32 - 1)), nulls=draw(st.sampled_from([0.0, 0.0, 0.15])),
                      mean=draw(st.sampled_from([0.5, 3.0, 8.0])))
    options = dict(
        data_page_size=draw(st.integers(64, 4096)),
        write_batch_size=draw(st.integers(1, 64)),
        row_group_size=draw(st.integers(1, n)),
        use_dictionary=draw(st.booleans()),
        data_page_version=draw(st.sampled_from(["1.0", "2.0"])),
        compression=draw(st.sampled_from(["zstd", "none", "snappy"])),
        write_page_checksum=draw(st.booleans()),
    )
    return samples.write(t, **options), n


@st.composite
def selections(draw: Any, n: int) -> np.ndarray:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["few", "dense", "sorted", "unsorted"]))
    if kind == "few":
        return np.sort(rng.choice(n, min(n, draw(st.integers(1, 3))), replace=False))
    if kind == "dense":
        return np.sort(rng.choice(n, max(1, int(n * draw(st.floats(0.05, 1.0)))), replace=False))
    if kind == "sorted":
        return np.flatnonzero(rng.random(n) < draw(st.floats(0.0, 0.3)))
    return rng.integers(0, n, draw(st.integers(0, 20)))  # any order, repeats


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_equals_pyarrow_take(data: st.DataObject) -> None:
    content, n = data.draw(files())
    rows = data.draw(selections(n))
    columns = data.draw(st.sampled_from(COLUMN_CHOICES))
    try:
        want = expected(content, columns, rows)
    except pa.ArrowInvalid:  # rarely, pyarrow 26 cannot read back its own v2 pages of bools in list<struct>
        reject()
    assert_same(read_rows(io.BytesIO(content), columns, rows), want)


def test_path_source_and_metadata_give_the_same(tmp_path: Path) -> None:
    t = samples.table(500, 3, nulls=0.1)
    path = tmp_path / "f.parquet"
    path.write_bytes(samples.write(t, data_page_size=256, write_batch_size=8, row_group_size=120))
    rows = np.array([0, 7, 119, 120, 121, 333, 499])
    want = expected(path.read_bytes(), None, rows)
    assert_same(read_rows(str(path), None, rows), want)
    assert_same(read_rows(path, None, rows), want)
    metadata = pq.ParquetFile(path).metadata
    counting = CountingFile(path.read_bytes())
    assert_same(read_rows(counting, None, rows, metadata=metadata), want)
    size = len(path.read_bytes())
    # with the metadata at hand the footer is not read again
    tail = size - 8 - int.from_bytes(path.read_bytes()[-8:-4], "little")
    plain = CountingFile(path.read_bytes())
    read_rows(plain, None, rows)
    assert counting.bytes_read <= plain.bytes_read - (size - tail)


def test_reads_a_small_fraction_for_one_row() -> None:
    t = samples.table(40_000, 11, mean=6.0)
    content = samples.write(t, data_page_size=2048, write_batch_size=64, row_group_size=10_000, use_dictionary=False)
    assert pq.ParquetFile(io.BytesIO(content)).metadata.num_row_groups == 4
    counting = CountingFile(content)
    rows = np.array([12_345])
    assert_same(read_rows(counting, None, rows), expected(content, None, rows))
    # the last 64 kB (footer, page indexes) + one 2 kB page per leaf column, of 4.5 MB
    assert counting.bytes_read < 0.025 * len(content), (counting.bytes_read, len(content))


def test_dense_selections_read_whole_row_groups() -> None:
    content = samples.write(samples.table(12_000, 12), data_page_size=512, write_batch_size=16, row_group_size=4000,
                            use_dictionary=False)
    rows = np.arange(4000, 12_000, 2)  # half the rows of two row groups: every page holds some
    counting = CountingFile(content)
    assert_same(read_rows(counting, ["jets", "ht"], rows), expected(content, ["jets", "ht"], rows))
    md = pq.ParquetFile(io.BytesIO(content)).metadata
    chunks = sum(md.row_group(g).column(c).total_compressed_size for g in (1, 2) for c in range(md.num_columns)
                 if md.row_group(g).column(c).path_in_schema.split(".")[0] in ("jets", "ht"))
    assert counting.bytes_read >= chunks  # pyarrow read the two row groups whole
    assert not counting.closed  # and left the caller's file open
    sparse = CountingFile(content)
    assert_same(read_rows(sparse, ["jets", "ht"], rows[::500]), expected(content, ["jets", "ht"], rows[::500]))
    assert sparse.bytes_read < chunks / 2


def test_dictionary_page_found_without_its_offset() -> None:
    """Some writers leave dictionary_page_offset out and point data_page_offset at the dictionary page."""
    content = samples.write(samples.table(600, 13), data_page_size=256, row_group_size=200, use_dictionary=True)
    n = int.from_bytes(content[-8:-4], "little")
    md, _ = thrift.decode_struct(content[-8 - n:-8])
    moved = 0
    for rg in md.value(4).items:
        for cc in rg.value(1).items:
            meta = cc.value(3)
            if meta.value(11) is not None:
                meta.put(9, thrift.I64, meta.pop(11)[1])
                moved += 1
    assert moved > 10
    footer = thrift.encode_struct(md)
    edited = content[:-8 - n] + footer + len(footer).to_bytes(4, "little") + b"PAR1"
    rows = np.array([5, 250, 599])
    assert_same(read_rows(io.BytesIO(edited), None, rows), expected(content, None, rows))


def test_columns_order_duplicates_and_empty() -> None:
    content = samples.write(samples.table(200, 5), data_page_size=128, row_group_size=64)
    rows = np.array([3, 64, 150])
    for columns in (["pass", "jets.list.element.tight", "jets.list.element.pt"], ["ht", "ht"], ["jets", "jets.list"]):
        assert_same(read_rows(io.BytesIO(content), columns, rows), expected(content, columns, rows))
    none = read_rows(io.BytesIO(content), [], rows)
    assert none.num_columns == 0 and none.num_rows == 3
    empty = read_rows(io.BytesIO(content), ["ht"], np.zeros(0, dtype=np.int64))
    assert_same(empty, expected(content, ["ht"], np.zeros(0, dtype=np.int64)))


def test_map_columns() -> None:
    rng = np.random.default_rng(2)
    n = 400
    off = np.r_[0, np.cumsum(rng.poisson(2, n))].astype(np.int32)
    keys = pa.array([f"k{i % 7}" for i in range(off[-1])])
    m = pa.MapArray.from_arrays(pa.array(off), keys, pa.array(rng.normal(size=off[-1])))
    content = samples.write(pa.table({"m": m, "x": np.arange(n)}), data_page_size=100, write_batch_size=4,
                            row_group_size=150)
    rows = np.sort(rng.choice(n, 30, replace=False))
    assert_same(read_rows(io.BytesIO(content), None, rows), expected(content, None, rows))


def _first_levels(content: bytes) -> list[tuple[int, int]]:
    """(num_values, first repetition level) of every data page of the repeated leaves.

    Reads uncompressed v1 pages (levels after a 4-byte length) or v2 pages
    (levels first, never compressed); levels are RLE/bit-packed hybrid runs.
    """
    md, _ = thrift.decode_struct(content[-8 - int.from_bytes(content[-8:-4], "little"):-8])
    out = []
    for rg in md.value(4).items:
        for cc in rg.value(1).items:
            width = int(cc.value(3).value(3).items.count(b"list")).bit_length()  # bits of the max level
            if width == 0:
                continue
            oi, _ = thrift.decode_struct(content[cc.value(4):cc.value(4) + cc.value(5)])
            for loc in oi.value(1).items:
                header, hlen = thrift.decode_struct(content[loc.value(1):loc.value(1) + loc.value(2)])
                body = content[loc.value(1) + hlen:]
                v2 = header.value(8)
                levels = body if v2 is not None else body[4:]
                run, p = thrift.read_varint(levels, 0)
                first = levels[p] & ((1 << width) - 1)  # a bit-packed run's first value, or an RLE run's value
                out.append(((v2 or header.value(5)).value(1), first))
    return out


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_pyarrow_starts_pages_at_rows(version: str) -> None:
    """What read_rows relies on: with a page index, every page starts a new row (repetition level 0)."""
    t = samples.table(3000, 9, mean=6.0)
    content = samples.write(t.select(["jets", "ids"]), data_page_size=64, write_batch_size=7, row_group_size=1000,
                            compression="none", use_dictionary=False, data_page_version=version)
    pages = _first_levels(content)
    assert len(pages) > 300
    assert all(level == 0 for nv, level in pages if nv), pages[:20]


def test_threads_share_the_cached_layout(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "f.parquet"
    path.write_bytes(samples.write(samples.table(2000, 21), data_page_size=300, row_group_size=500))
    content = path.read_bytes()
    selections = [np.sort(np.random.default_rng(i).choice(2000, 40, replace=False)) for i in range(8)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda rows: read_rows(path, None, rows), selections))
    for rows, got in zip(selections, results, strict=True):
        assert_same(got, expected(content, None, rows))


def test_unsorted_and_repeated_rows() -> None:
    content = samples.write(samples.table(300, 4), data_page_size=200, row_group_size=100)
    rows = np.array([250, 3, 3, 299, 0, 101, 250])
    assert_same(read_rows(io.BytesIO(content), ["jets", "ht"], rows), expected(content, ["jets", "ht"], rows))


def test_bad_rows_and_columns() -> None:
    content = samples.write(samples.table(50, 4), data_page_size=200)
    with pytest.raises(NotFound, match="outside"):
        read_rows(io.BytesIO(content), None, np.array([50]))
    with pytest.raises(NotFound, match="outside"):
        read_rows(io.BytesIO(content), None, np.array([-1, 3]))
    with pytest.raises(NotFound, match="no column 'nope'"):
        read_rows(io.BytesIO(content), ["nope"], np.array([1]))
    with pytest.raises(DataError):
        read_rows(io.BytesIO(content), None, np.array([1.5]))


def test_no_page_index_is_a_storage_error() -> None:
    content = samples.write(samples.table(50, 4), write_page_index=False)
    with pytest.raises(StorageError, match="no page index") as info:
        read_rows(io.BytesIO(content), None, np.array([1]))
    assert not isinstance(info.value, IntegrityError)


def test_missing_file_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="cannot open"):
        read_rows(tmp_path / "absent.parquet", None, np.array([0]))


def _corrupt_cases(content: bytes) -> dict[str, bytes]:
    footer_len = int.from_bytes(content[-8:-4], "little")
    md, _ = thrift.decode_struct(content[-8 - footer_len:-8])
    cc = md.value(4).items[0].value(1).items[0]
    page = thrift.decode_struct(content[cc.value(4):cc.value(4) + cc.value(5)])[0].value(1).items[0]
    flipped = bytearray(content)
    flipped[page.value(1) + page.value(2) - 3] ^= 0xFF  # inside the first page's (checksummed) data
    bad_index = bytearray(content)
    bad_index[cc.value(4):cc.value(4) + cc.value(5)] = b"\x19\x1c\x16" + b"\xff" * (cc.value(5) - 3)
    return {
        "truncated": content[:-100],
        "tiny": content[:10],
        "no magic": content[:-4] + b"XXXX",
        "footer length too big": content[:-8] + (len(content) * 2).to_bytes(4, "little") + b"PAR1",
        "garbage footer": content[:-8 - footer_len] + bytes([0xFF]) * footer_len + content[-8:],
        "flipped page byte": bytes(flipped),
        "garbage offset index": bytes(bad_index),
    }


@pytest.mark.parametrize("case", ["truncated", "tiny", "no magic", "footer length too big", "garbage footer",
                                  "flipped page byte", "garbage offset index"])
def test_corrupt_files_are_integrity_errors(case: str) -> None:
    t = samples.table(400, 8)
    content = samples.write(t, data_page_size=512, row_group_size=400, compression="none", write_page_checksum=True)
    bad = _corrupt_cases(content)[case]
    with pytest.raises(IntegrityError):
        read_rows(io.BytesIO(bad), None, np.arange(0, 400, 7))


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(0, 10**6), junk=st.binary(min_size=1, max_size=8))
def test_damage_raises_only_giod_errors(cut: int, junk: bytes) -> None:
    content = samples.write(samples.table(120, 1), data_page_size=300, row_group_size=50)
    at = cut % len(content)
    damaged = content[:at] + junk + content[at + len(junk):]
    try:
        got = read_rows(io.BytesIO(damaged), None, np.arange(0, 120, 5))
    except (IntegrityError, StorageError, NotFound):
        return
    # damage that the file format cannot see (say, in a float's value) still reads; shape is kept
    assert got.num_rows == 24


def test_giod_containers(tmp_path: Path) -> None:
    import giod
    from giod.storage.container import WriteOptions
    from giod.testing import synthetic

    fed = giod.open(tmp_path, create=True)
    ds = fed.create_dataset("s", synthetic.schema())
    with ds.writer(cluster_events=700, options=WriteOptions(container_format="parquet", data_page_size=2048)) as w:
        w.append(synthetic.events(2000, seed=3))
    files = sorted((tmp_path / "data" / "s").glob("*/*.parquet"))
    assert len(files) == 4
    rows = np.sort(np.random.default_rng(0).choice(2000, 25, replace=False))
    for f in files:
        content = f.read_bytes()
        assert_same(read_rows(f, None, rows), expected(content, None, rows))


def test_cms_open_data(tmp_path: Path) -> None:
    """Real NanoAOD jets and muons, jagged as they come, read back page by page."""
    path = DATA / "nanoAOD_2015_CMS_Open_Data_ttbar.root"
    if not path.is_file():
        reason = f"CMS open-data file {path.name} not found in {DATA.resolve()}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the file is required)")
        pytest.skip(reason)
    import awkward as ak
    import uproot

    with uproot.open(path) as f:
        arrays = f["Events"].arrays(["Jet_pt", "Jet_eta", "Jet_btagCSVV2", "Muon_pt", "Muon_charge", "MET_pt"])
    jets = ak.zip({"pt": arrays.Jet_pt, "eta": arrays.Jet_eta, "btag": arrays.Jet_btagCSVV2})
    muons = ak.zip({"pt": arrays.Muon_pt, "charge": arrays.Muon_charge})
    table = ak.to_arrow_table(ak.zip({"jets": jets, "muons": muons, "met": arrays.MET_pt}, depth_limit=1),
                              extensionarray=False)
    content = samples.write(table, data_page_size=1024, row_group_size=max(1, len(table) // 3))
    rows = np.sort(np.random.default_rng(1).choice(len(table), max(1, len(table) // 50), replace=False))
    for columns in (None, ["jets.list.element.pt", "met"]):
        assert_same(read_rows(io.BytesIO(content), columns, rows), expected(content, columns, rows))
