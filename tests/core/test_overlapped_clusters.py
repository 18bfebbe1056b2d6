"""A writer's clusters written while the next events are appended: the same files, in order, errors not lost."""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import giod
from giod.errors import StorageError
from giod.storage.container import ContainerWriter
from giod.storage.formats.arrow.frame import parse_footer
from giod.testing import synthetic
from giod.write import writer as writer_module
from giod.write.clusters import ContainerBuffer


class _Lazy(Future):
    """A future whose function runs only when its result is asked for: whatever the add did meanwhile, the
    write happens as late as a thread could make it."""

    def __init__(self, fn: Any, *args: Any):
        super().__init__()
        self._call: tuple[Any, tuple[Any, ...]] | None = (fn, args)

    def result(self, timeout: float | None = None) -> Any:
        if self._call is not None:
            fn, args = self._call
            self._call = None
            try:
                self.set_result(fn(*args))
            except BaseException as exc:  # kept for result(), as an executor keeps it
                self.set_exception(exc)
        return super().result(timeout)


class _File:
    """A container writer that keeps each cluster it is given; ``fail_at``: that cluster raises."""

    def __init__(self, fail_at: int | None = None):
        self.clusters: list[tuple[list[int], bool]] = []
        self.fail_at = fail_at

    def write_cluster(self, table: pa.Table, *, last: bool = False) -> None:
        if len(self.clusters) == self.fail_at:
            raise StorageError("the disk is full")
        self.clusters.append((table.column("x").to_pylist(), last))


def _fill(buf: ContainerBuffer, sizes: list[int], submit: Any) -> None:
    at = 0
    for n in sizes:
        buf.add(pa.table({"x": np.arange(at, at + n, dtype=np.int64)}), submit)
        at += n
    buf.finish()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=12),
       st.one_of(st.none(), st.integers(min_value=1, max_value=25)), st.integers(min_value=8, max_value=400),
       st.sampled_from(["lazy", "threads"]))
def test_handed_on_clusters_are_the_clusters_written_at_once(sizes: list[int], per_cluster: int | None,
                                                             cluster_bytes: int, how: str) -> None:
    at_once = _File()
    _fill(ContainerBuffer(at_once, per_cluster, cluster_bytes), sizes, None)  # type: ignore[arg-type]
    handed = _File()
    if how == "lazy":
        _fill(ContainerBuffer(handed, per_cluster, cluster_bytes), sizes, _Lazy)  # type: ignore[arg-type]
    else:
        with ThreadPoolExecutor(2) as pool:
            _fill(ContainerBuffer(handed, per_cluster, cluster_bytes), sizes, pool.submit)  # type: ignore[arg-type]
    assert handed.clusters == at_once.clusters
    assert [x for c, _ in handed.clusters for x in c] == list(range(sum(sizes)))
    assert not any(last for _, last in handed.clusters[:-1])  # only the cluster finish() writes is the last


def test_an_error_of_a_handed_on_write_is_raised_by_what_comes_next() -> None:
    file = _File(fail_at=0)
    buf = ContainerBuffer(file, 10, 1 << 20)  # type: ignore[arg-type]
    buf.add(pa.table({"x": np.arange(10)}), _Lazy)  # cut and handed on: nothing is written yet
    buf.add(pa.table({"x": np.arange(5)}), _Lazy)  # no cut: no wait
    with pytest.raises(StorageError, match="disk is full"):
        buf.add(pa.table({"x": np.arange(5)}), _Lazy)  # the next cut waits for the first
    file.fail_at = None
    buf.add(pa.table({"x": np.arange(10)}), _Lazy)
    buf.settle()  # whatever became of the write, it is over
    assert buf._writing is None
    failing = ContainerBuffer(_File(fail_at=0), 10, 1 << 20)  # type: ignore[arg-type]
    failing.add(pa.table({"x": np.arange(10)}), _Lazy)
    with pytest.raises(StorageError, match="disk is full"):
        failing.finish()
    failing.add(pa.table({"x": np.arange(10)}), _Lazy)
    failing._writing.set_exception(StorageError("gone"))  # type: ignore[union-attr]
    failing.settle()  # does not raise: the file is given up next


def _batches(fed: giod.Federation, ds: Any) -> dict[str, tuple[Any, ...]]:
    """Each container's record batches, byte for byte, and what the catalog holds of them."""
    site = fed.site()
    out = {}
    for c in ds.databases()[0].containers:
        data = Path(site.local_path(c.path)).read_bytes()
        n = int.from_bytes(data[-10:-6], "little")
        digest = hashlib.sha256()
        for b in parse_footer(data[len(data) - 10 - n:len(data) - 10]):
            digest.update(data[int(b["offset"]):int(b["offset"]) + int(b["meta"]) + int(b["body"])])
        out[c.name] = (c.cluster_entries, c.cluster_checksums[:-1], digest.hexdigest())
    return out


@pytest.mark.parametrize("settings_", [{}, {"min_savings": 0.0}, {"cluster_events": 150}])
def test_a_database_written_overlapped_is_the_one_written_in_step(tmp_path: Path, monkeypatch,
                                                                   settings_: dict[str, Any]) -> None:
    events = synthetic.events(2400, seed=3)
    fed = giod.open(tmp_path / "fed", create=True)
    written, reads = {}, {}
    for name, parallel in (("in_step", 1 << 62), ("overlapped", 0)):
        monkeypatch.setattr(writer_module, "PARALLEL_BYTES", parallel)
        ds = fed.create_dataset(name, synthetic.schema())
        with ds.writer(cluster_bytes=200_000, **settings_) as w:
            for at in range(0, len(events), 300):
                w.append(events[at:at + 300])
        written[name] = _batches(fed, ds)
        reads[name] = ds.read()
        assert len(reads[name]) == len(events)
    assert written["overlapped"] == written["in_step"]
    assert ak.array_equal(reads["overlapped"], reads["in_step"])
    assert all(len(v[0]) > 2 for k, v in written["in_step"].items() if k not in ("tag", "tag-index"))  # clusters


def test_a_failed_overlapped_write_commits_nothing_and_leaves_no_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(writer_module, "PARALLEL_BYTES", 0)
    real = ContainerWriter.write_cluster
    seen: list[str] = []

    def failing(self: ContainerWriter, table: pa.Table, *, last: bool = False) -> None:
        if self.path.endswith("reco.arrow"):
            seen.append(self.path)
            if len(seen) == 2:
                raise StorageError("the disk is full")
        real(self, table, last=last)

    monkeypatch.setattr(ContainerWriter, "write_cluster", failing)
    fed = giod.open(tmp_path / "fed", create=True)
    ds = fed.create_dataset("daq", synthetic.schema())
    events = synthetic.events(2000, seed=5)
    with pytest.raises(StorageError, match="disk is full"), ds.writer(cluster_bytes=100_000) as w:
        for at in range(0, len(events), 200):
            w.append(events[at:at + 200])
    assert len(seen) == 2
    assert len(fed.dataset("daq")) == 0
    site = Path(fed.site().local_path("daq"))
    assert not [p for p in site.rglob("*") if p.is_file()]


def test_a_failed_commit_gives_a_file_up_only_once_its_thread_is_done_with_it(tmp_path: Path, monkeypatch) -> None:
    """One container's close fails while another's is still running: that one is aborted after, not during."""
    real_close, real_abort = ContainerWriter.close, ContainerWriter.abort
    failed, aborted = threading.Event(), threading.Event()
    order: list[str] = []

    def close(self: ContainerWriter, folders: Any = None) -> Any:
        if self.path.endswith("raw.calo.arrow"):
            failed.set()
            raise StorageError("the disk is full")
        if self.path.endswith("reco.arrow"):
            failed.wait(30)
            aborted.wait(2)  # an abort now would come while this file is still being closed (the
            # results are collected in the containers' order: raw.calo's error first)
            out = real_close(self, folders)
            order.append("closed")
            return out
        return real_close(self, folders)

    def abort(self: ContainerWriter) -> None:
        if self.path.endswith("reco.arrow"):
            order.append("aborted")
            aborted.set()
        real_abort(self)

    monkeypatch.setattr(ContainerWriter, "close", close)
    monkeypatch.setattr(ContainerWriter, "abort", abort)
    fed = giod.open(tmp_path / "fed", create=True)
    ds = fed.create_dataset("daq", synthetic.schema())
    with pytest.raises(StorageError, match="disk is full"), ds.writer() as w:
        w.append(synthetic.events(500, seed=6))
    assert order[:2] == ["closed", "aborted"]
    assert len(fed.dataset("daq")) == 0  # the files that reached their names are gc's, as after any failed commit
