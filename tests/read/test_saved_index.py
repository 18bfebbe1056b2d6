"""The dataset's merged tag index saved in the federation's directory (``giod.read.datasetindex``): the next
process's first selection reads it instead of every database's index, a commit after it merges only its own
databases, and a saved file that is damaged or crafted is left aside (the selection is what the events say),
never an error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.counting import counted

import giod
from giod.read import datasetindex
from giod.storage import checksum
from giod.testing import synthetic

FIELDS = ["hits", "run", "event", "njets", "ntracks", "ht", "lead_pt"]
EVENTS = synthetic.events(2_400, seed=21, hits=4, cells=0, tracks=0, jets=4)[FIELDS]
MORE = synthetic.events(400, seed=22, hits=4, cells=0, tracks=0, jets=4)[FIELDS]
DATABASE = 200  # events a database: 12 databases, past the few a selection asks alone


def _cut(events: Any, share: float) -> tuple[str, np.ndarray]:
    ht = ak.to_numpy(events["ht"])
    cut = float(np.sort(ht)[-int(share * len(ht)) - 1])
    return f"ht > {cut!r}", np.flatnonzero(ht > cut)


def _entries(ds: Any, expr: str) -> np.ndarray:
    return np.concatenate([s + db.first_entry for db, s in ds.select(expr).plan()] or [np.zeros(0, np.int64)])


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A federation whose merged index of ht was built and saved by a process's second selection on it."""
    root = tmp_path_factory.mktemp("saved") / "fed"
    with giod.open(root, create=True) as f:
        ds = f.create_dataset("sel", synthetic.schema())
        with ds.writer(database_events=DATABASE, cluster_events=100) as w:
            w.append(EVENTS)
        expr, _ = _cut(EVENTS, 0.01)
        len(ds.select(expr))  # the first selection on ht: each database's own index
        len(ds.select(expr))  # the next merges them, and saves the merged index
    assert datasetindex.saved_path(root, "sel", "ht").is_file()
    return root


@pytest.fixture
def copy(saved: Path, tmp_path: Path) -> Path:
    shutil.copytree(saved, tmp_path / "fed")
    return tmp_path / "fed"


def _runs(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """Calls that read one database's sorted tags (its index, or its tags when it has none)."""
    return [counted(monkeypatch, datasetindex, "_run_from_index"),
            counted(monkeypatch, datasetindex, "_run_from_tags")]


@pytest.mark.parametrize("share", [0.002, 0.05])
def test_a_new_process_reads_the_saved_index_not_every_database(copy: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 share: float) -> None:
    runs = _runs(monkeypatch)
    expr, want = _cut(EVENTS, share)
    with giod.open(copy) as f:
        assert np.array_equal(_entries(f.dataset("sel"), expr), want)  # the first selection of this store
    assert runs == [[0], [0]]


def test_a_commit_after_the_save_merges_only_its_own_databases(copy: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    with giod.open(copy) as f:
        with f.dataset("sel").writer(database_events=DATABASE, cluster_events=100) as w:
            w.append(MORE)
    runs = _runs(monkeypatch)
    both = ak.concatenate([EVENTS, MORE])
    expr, want = _cut(both, 0.01)
    with giod.open(copy) as f:
        assert np.array_equal(_entries(f.dataset("sel"), expr), want)
    assert runs[0][0] == len(MORE) // DATABASE  # each new database asked once (its index, else its tags)
    runs[0][0] = runs[1][0] = 0
    with giod.open(copy) as f:  # saved again with them: the next process reads no database's index
        assert np.array_equal(_entries(f.dataset("sel"), expr), want)
    assert runs == [[0], [0]]


def test_an_index_that_cannot_be_saved_is_not_an_error(tmp_path: Path) -> None:
    root = tmp_path / "fed"
    with giod.open(root, create=True) as f:
        ds = f.create_dataset("sel", synthetic.schema())
        with ds.writer(database_events=DATABASE, cluster_events=100) as w:
            w.append(EVENTS)
        (root / "indexes").write_text("a file where the folder would be")
        expr, want = _cut(EVENTS, 0.01)
        for _ in range(3):
            assert np.array_equal(_entries(ds, expr), want)


@pytest.mark.parametrize("dataset", ["..", ".", "a/../..", "x/y", "%2E%2E"])
def test_the_saved_index_of_any_name_lies_in_its_own_file_below_indexes(tmp_path: Path, dataset: str) -> None:
    path = datasetindex.saved_path(tmp_path, dataset, "ht")
    assert path.parent.parent == tmp_path / "indexes" and path.name == "ht.index"
    assert path.parent.name not in {".", ".."} and "/" not in path.parent.name
    others = {datasetindex.saved_path(tmp_path, d, "ht") for d in ["..", ".", "a/../..", "x/y", "%2E%2E"]}
    assert len(others) == 5  # no two names share a file


def test_an_interrupted_save_leaves_no_file_behind(copy: Path) -> None:
    saved = datasetindex.saved_path(copy, "sel", "ht")
    saved.unlink()

    def interrupted(src: Any, dst: Any) -> None:
        raise KeyboardInterrupt  # Ctrl-C as the written file is about to be renamed into place

    expr, want = _cut(EVENTS, 0.01)
    with giod.open(copy) as f:
        ds = f.dataset("sel")
        len(ds.select(expr))  # each database's own index
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(datasetindex.os, "replace", interrupted)
            with pytest.raises(KeyboardInterrupt):
                len(ds.select(expr))  # merges, and saves
    assert list(saved.parent.iterdir()) == []
    with giod.open(copy) as f:
        assert np.array_equal(_entries(f.dataset("sel"), expr), want)


def _parts(data: bytes) -> tuple[dict[str, Any], int, np.dtype[Any]]:
    size = len(datasetindex.MAGIC)
    length = int.from_bytes(data[size:size + 8], "little")
    head = json.loads(data[size + 16:size + 16 + length])
    return head, size + 16 + length, np.dtype(head["dtype"])


def _write(path: Path, head: dict[str, Any], values: np.ndarray, entries: np.ndarray, crc: bool = True) -> None:
    text = json.dumps(head).encode()
    body = values.tobytes() + entries.tobytes()
    total = checksum.extend(checksum.extend(0, text), body) + (0 if crc else 1)
    path.write_bytes(datasetindex.MAGIC + len(text).to_bytes(8, "little") + total.to_bytes(8, "little") + text + body)


def _crafted(kind: str, at: int, other: int, head: dict[str, Any], values: np.ndarray, entries: np.ndarray
             ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, bool]:
    """One damage the checks must catch, with consistent checksums unless it is the checksum itself."""
    head, values, entries = dict(head), values.copy(), entries.copy()
    n = len(values)
    i, j = at % n, other % n
    if kind == "entry outside":
        entries[i] = [-1, n, n + 10**9][other % 3]
    elif kind == "entry twice":
        entries[i] = entries[j if j != i else (i + 1) % n]
    elif kind == "out of order":
        a, b = sorted((i, j if j != i else (i + 1) % n))
        values[a], values[b] = max(values[a], values[b]) + 1, min(values[a], values[b])
    elif kind == "counts":
        key = ["n", "numeric", "valid"][other % 3]
        head[key] = [n + 1, n - 1, -1, 2 * n][at % 4]
    elif kind == "dtype":
        head["dtype"] = ["<U4", "|O", ">f8", "<c16", "not a type", 7][at % 6]
    elif kind == "parts":
        parts = head["parts"]
        head["parts"] = [[10**6, 0, "x", "crc32c:0"], *parts] if other % 2 else parts[1:]
    elif kind == "checksum":
        values[i] = values[i] + 1
        return head, values, entries, False
    return head, values, entries, True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["entry outside", "entry twice", "out of order", "counts", "dtype", "parts",
                             "checksum", "truncated", "longer", "bytes"]),
       at=st.integers(0, 10**6), other=st.integers(0, 10**6), share=st.sampled_from([0.002, 0.05]))
def test_a_damaged_or_crafted_saved_index_is_left_aside(saved: Path, tmp_path_factory: pytest.TempPathFactory,
                                                        kind: str, at: int, other: int, share: float) -> None:
    root = tmp_path_factory.mktemp("crafted") / "fed"
    shutil.copytree(saved, root)
    path = datasetindex.saved_path(root, "sel", "ht")
    data = path.read_bytes()
    head, body, dtype = _parts(data)
    n = head["n"]
    values = np.frombuffer(data, dtype=dtype, count=n, offset=body)
    entries = np.frombuffer(data, dtype="<i8", count=n, offset=body + n * dtype.itemsize)
    if kind == "truncated":
        path.write_bytes(data[: at % len(data)])
    elif kind == "longer":
        path.write_bytes(data + b"\0" * (1 + other % 64))
    elif kind == "bytes":
        changed = bytearray(data)
        changed[at % len(data)] ^= 1 + other % 255
        path.write_bytes(bytes(changed))
    else:
        head, values, entries, crc = _crafted(kind, at, other, head, values, entries)
        _write(path, head, values, entries, crc)
    expr, want = _cut(EVENTS, share)
    found: list[object] = []
    real = datasetindex._parsed

    def parsed(*args: Any) -> Any:
        found.append(real(*args))
        return found[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(datasetindex, "_parsed", parsed)
        with giod.open(root) as f:
            assert np.array_equal(_entries(f.dataset("sel"), expr), want)
    assert found == [None] * len(found)  # read (if the file was whole enough to be read) and refused


def test_gc_removes_the_saved_index_of_a_deleted_dataset_and_nothing_else(copy: Path, tmp_path: Path) -> None:
    """`giod gc` removes `indexes/<dataset>` of a dataset the catalog no longer holds, once past the grace;
    a live dataset's folder (a quoted name) and a link to elsewhere stay."""
    from click.testing import CliRunner

    from giod.cli import main

    with giod.open(copy) as f:
        f.create_dataset("kept.one", synthetic.schema())
        f.catalog.delete_dataset("sel")
    live = datasetindex.saved_path(copy, "kept.one", "ht")
    live.parent.mkdir(parents=True)
    live.write_bytes(b"not read here")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "ht.index").write_bytes(b"someone else's")
    (copy / "indexes" / "gone").symlink_to(outside, target_is_directory=True)
    folder = datasetindex.saved_path(copy, "sel", "ht").parent

    def gc(*args: str) -> Any:
        r = CliRunner().invoke(main, ["gc", *args, "-f", str(copy)], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        return r.output

    assert "saved tag index" not in gc("--grace", "3600") and folder.is_dir()  # written just now
    assert "would remove the saved tag index of deleted dataset sel" in gc("--grace", "0", "--dry-run")
    assert folder.is_dir()
    assert "removed the saved tag index of deleted dataset sel" in gc("--grace", "0")
    assert not folder.exists() and live.is_file() and (outside / "ht.index").is_file()
    assert "saved tag index" not in gc("--grace", "0")
