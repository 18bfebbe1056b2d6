"""read_ahead: an import reads the next chunk in a thread while the writer takes this one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from giod.interchange import nanoaod
from giod.interchange.nanoaod import read_ahead

WAIT = 60.0  # a generous bound on a wait that a working read_ahead ends at once


def test_items_come_in_order_and_are_made_in_another_thread() -> None:
    made_in: list[str] = []

    def items() -> Iterator[int]:
        for i in range(5):
            made_in.append(threading.current_thread().name)
            yield i

    assert list(read_ahead(items())) == [0, 1, 2, 3, 4]
    assert made_in and threading.current_thread().name not in made_in
    assert list(read_ahead([])) == []


def test_the_next_item_is_made_while_the_caller_holds_this_one() -> None:
    making_second = threading.Event()

    def items() -> Iterator[str]:
        yield "first"
        making_second.set()
        yield "second"

    got = read_ahead(items())
    assert next(got) == "first"
    # the caller has not asked for the second item: only a thread of read_ahead's can be making it
    assert making_second.wait(WAIT), "the next item was not read ahead"
    assert list(got) == ["second"]


def test_an_error_of_the_reading_comes_at_the_item_it_would_have_given() -> None:
    def items() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("the file ends early")

    got = []
    with pytest.raises(ValueError, match="ends early"):
        for item in read_ahead(items()):
            got.append(item)
    assert got == [1, 2]


def test_a_caller_that_stops_early_closes_the_source_and_leaves_no_thread() -> None:
    closed = threading.Event()

    def items() -> Iterator[int]:
        try:
            yield from range(1_000)
        finally:
            closed.set()

    with pytest.raises(RuntimeError, match="the writer failed"):
        for _ in read_ahead(items()):
            raise RuntimeError("the writer failed")
    assert closed.is_set()
    assert not [t for t in threading.enumerate() if t.name.startswith("giod-read-ahead")]


def test_an_import_reads_through_read_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import giod
    from giod.interchange.export import write_root
    from giod.testing import synthetic

    src = tmp_path / "small.root"
    events = synthetic.events(50, seed=2)[["ht", "njets"]]
    schema = giod.Schema.from_yaml("schema_version: 1\nname: tags\ntags: {ht: float32, njets: int32}\n")
    write_root(src, events, schema)
    wrapped: list[int] = []

    def counting(items):  # the real read_ahead, counted
        wrapped.append(1)
        return read_ahead(items)

    monkeypatch.setattr(nanoaod, "read_ahead", counting)
    with giod.open(tmp_path / "fed", create=True) as fed:
        report = nanoaod.import_root(fed, src, "small", step_size=10)
        assert report.n_events == 50 and report.n_chunks == 5
        assert wrapped == [1]
        assert fed.dataset("small").read().njets.tolist() == events.njets.tolist()
