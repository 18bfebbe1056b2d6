"""write_root reads ahead: the next chunk is taken apart in a thread while uproot writes this one,
and the tree is made from the schema before the first chunk is there."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import awkward as ak
import pytest
import uproot

import giod
from giod.errors import DataError
from giod.interchange import write_root
from giod.testing import synthetic

WAIT = 60.0  # a generous bound on a wait that a working export ends at once
SCHEMA = "schema_version: 1\nname: tags\ntags: {ht: float32, njets: int32}\n"


def _events(n: int, seed: int) -> ak.Array:
    return synthetic.events(n, seed=seed)[["ht", "njets"]]


def test_chunks_are_read_in_another_thread_and_written_in_order(tmp_path: Path) -> None:
    parts = [_events(30, seed) for seed in range(4)]
    made_in: list[str] = []

    def chunks() -> Iterator[ak.Array]:
        for part in parts:
            made_in.append(threading.current_thread().name)
            yield part

    out = tmp_path / "out.root"
    write_root(out, chunks(), giod.Schema.from_yaml(SCHEMA))
    assert made_in and threading.current_thread().name not in made_in
    with uproot.open(out) as f:
        got = f["Events"].arrays(["ht", "njets"], library="np")
    assert got["njets"].tolist() == ak.concatenate(parts).njets.tolist()
    assert got["ht"].tolist() == ak.concatenate(parts).ht.tolist()


def test_the_tree_is_made_while_the_first_chunk_is_read(tmp_path: Path) -> None:
    # the first chunk comes only once the caller has made the tree: without reading ahead, or with the
    # tree made from the first chunk, the caller would wait for the chunk and the chunk for the tree
    made = threading.Event()
    real = uproot.writing.writable.WritableDirectory.mktree

    def mktree(self, *args, **kwargs):  # uproot's own, with a note that it ran
        tree = real(self, *args, **kwargs)
        made.set()
        return tree

    def chunks() -> Iterator[ak.Array]:
        assert made.wait(WAIT), "the tree was not made before the first chunk"
        yield _events(20, 1)

    out = tmp_path / "out.root"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(uproot.writing.writable.WritableDirectory, "mktree", mktree)
        write_root(out, chunks(), giod.Schema.from_yaml(SCHEMA))
    with uproot.open(out) as f:
        assert f["Events"].num_entries == 20


def test_a_bad_chunk_read_ahead_fails_the_export_and_leaves_nothing(tmp_path: Path) -> None:
    def chunks() -> Iterator[ak.Array]:
        yield _events(10, 1)
        yield ak.Array([{"ht": 1.5}])  # njets missing

    out = tmp_path / "out.root"
    with pytest.raises(DataError, match="njets"):
        write_root(out, chunks(), giod.Schema.from_yaml(SCHEMA))
    assert list(tmp_path.iterdir()) == []
    assert not [t for t in threading.enumerate() if t.name.startswith("giod-read-ahead")]
