"""Federations that feed each other: a DAQ federation with a growing dataset ``raw``, and its followers.

``daq`` is an embedded federation; ``commit(fed, n)`` commits ``n`` more
databases of synthetic events into its ``raw`` (each a commit of its own, as
a DAQ writer makes them). ``wait_for(fed, predicate)`` waits on ``fed``'s own
change feed until ``predicate()`` holds: tests wait for what they expect, not
for a fixed time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import giod
from giod.exchange import open_feed
from giod.read import tagindex
from giod.testing import synthetic

PER_DATABASE = 40
DEADLINE = 60.0  # seconds a test waits for what it expects before it fails


@pytest.fixture(autouse=True)
def _small_databases_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The databases here hold 40 events, less than a block of the tag index, which would leave them
    without one (``tagindex.worth_writing``): blocks of 8 positions give each its index, a file these tests
    follow through copies and rules."""
    monkeypatch.setattr(tagindex, "BLOCK", 8)


def commit(fed: giod.Federation, databases: int, *, seed: int = 0, dataset: str = "raw") -> None:
    ds = fed.dataset(dataset)
    with ds.writer(database_events=PER_DATABASE, cluster_events=20, program="daq", program_version="1.0") as w:
        w.append(synthetic.events(PER_DATABASE * databases, seed=seed))


def make_daq(path: Path, databases: int = 3) -> giod.Federation:
    fed = giod.open(path, create=True)
    fed.create_dataset("raw", synthetic.schema())
    commit(fed, databases, seed=1)
    return fed


@pytest.fixture
def daq(tmp_path: Path) -> Iterator[giod.Federation]:
    fed = make_daq(tmp_path / "daq")
    yield fed
    fed.close()


@pytest.fixture
def reco(tmp_path: Path) -> Iterator[giod.Federation]:
    fed = giod.open(tmp_path / "reco", create=True)
    yield fed
    fed.close()


def wait_for(fed: giod.Federation, predicate: Callable[[], bool], what: str) -> None:
    """Wait on ``fed``'s change feed until ``predicate()`` holds; fail after ``DEADLINE`` seconds."""
    feed = open_feed(fed)
    try:
        deadline = time.monotonic() + DEADLINE
        seen = -1
        while not predicate():
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {what}"
            seen = feed.wait(seen, left)
    finally:
        feed.close()


def in_thread(target: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, errors
