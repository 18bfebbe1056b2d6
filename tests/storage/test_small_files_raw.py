"""A file of one small cluster is written raw without a codec trial; every other file is judged as before
(``giod.storage.formats.arrow.writer.SMALL_FILE_BYTES``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from giod.storage.container import ContainerReader, ContainerWriter, WriteOptions
from giod.storage.formats.arrow import writer as arrowwriter
from giod.storage.site import open_site


def compressible(rows: int) -> pa.Table:
    """Numbers zstd packs to a sliver of their bytes."""
    return pa.table({"x": np.zeros(rows), "n": np.arange(rows, dtype=np.int64) % 3})


def write(tmp_path: Path, table: pa.Table, sizes: list[int], last: bool, **options: object
          ) -> tuple[str, int, pa.Table]:
    """The codec the file was written with, its size, and what it reads back."""
    site = open_site("local", str(tmp_path / "site"))
    w = ContainerWriter(site, f"d{len(list(tmp_path.rglob('*.arrow')))}/c.arrow", table.schema,
                        WriteOptions(container_format="arrow", compression="zstd", **options))
    at = 0
    for k, n in enumerate(sizes):
        w.write_cluster(table.slice(at, n), last=last and k == len(sizes) - 1)
        at += n
    codec = w._writer._file.compression  # the codec the file's buffers were written with
    out = w.close()
    back = ContainerReader(site, out.path, expected_size=out.size, format="arrow", clusters=out.cluster_entries,
                           checksums=out.cluster_checksums).read()
    return codec, out.size, back


@pytest.fixture
def trials(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows of every codec trial run."""
    seen: list[int] = []
    size = arrowwriter._ipc_size

    def counted(batch: pa.RecordBatch, options: object) -> int:
        seen.append(batch.num_rows)
        return size(batch, options)  # type: ignore[arg-type]

    monkeypatch.setattr(arrowwriter, "_ipc_size", counted)
    return seen


def test_one_small_cluster_is_written_raw_without_a_trial(tmp_path: Path, trials: list[int]) -> None:
    table = compressible(1000)  # 16 KB
    assert table.nbytes < arrowwriter.SMALL_FILE_BYTES
    codec, size, back = write(tmp_path, table, [1000], True)
    assert (codec, trials) == ("none", [])
    assert size > table.nbytes and back.equals(table)


@pytest.mark.parametrize("case", ["not known last", "two clusters", "large", "size first"])
def test_every_other_file_is_judged_as_before(tmp_path: Path, trials: list[int], case: str) -> None:
    rows = 20_000 if case == "large" else 1000
    table = compressible(rows)
    sizes = [500, 500] if case == "two clusters" else [rows]
    options = {"min_savings": 0.0} if case == "size first" else {}
    codec, size, back = write(tmp_path, table, sizes, case != "not known last", **options)
    assert codec == "zstd" and size < table.nbytes / 4 and back.equals(table)
    # the trial ran on the first cluster (size first: none, the codec is kept whatever it saves)
    assert trials == ([] if case == "size first" else [sizes[0], sizes[0]])
