"""The catalog reads a writer makes on every commit (``sites``, the newest version) are kept on a SQLite
file while no connection commits to it, and read again as soon as one does (``Transactions._kept``)."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from catalog_samples import SITE
from sqlalchemy import event

from giod.catalog import Catalog


@contextmanager
def counted(catalog: Catalog) -> Iterator[list[str]]:
    """The SQL statements run through ``catalog``'s engine while the block runs."""
    seen: list[str] = []

    def note(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    engine = catalog._engine  # what the test counts
    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


def fresh(url: str) -> tuple[list[Any], list[Any]]:
    """``sites()`` and ``versions(1)`` as a catalog opened now reads them through its engine, nothing kept."""
    with Catalog.open(url) as other:
        other._watch = None  # every read a statement through SQLAlchemy, as on PostgreSQL
        return other.sites(), other.versions(1)


def test_kept_reads_follow_every_commit(ready: Catalog) -> None:
    url = ready.url
    with Catalog.open(url) as other:
        for step in range(6):
            assert (ready.sites(), ready.versions(1)) == fresh(url)
            assert ready.versions(1) == ready.versions(2)[:1]  # limit 1 kept, limit 2 read
            writer = ready if step % 2 else other  # this connection's commits and another's alike
            writer.add_site(f"s{step}", f"file:///srv/s{step}", distance=step)
            assert (ready.sites(), ready.versions(1)) == fresh(url)
            assert ready.sites()[-1].name == f"s{step}"  # the farthest is the newest
        other.remove_site("s5")
        assert "s5" not in [s.name for s in ready.sites()]
        assert ready.versions(1)[0].version == other.versions(1)[0].version
    got = ready.sites()
    got.clear()  # a caller's list is its own
    assert ready.sites()[0].name == SITE


def test_an_unchanged_sqlite_file_is_not_read_again(ready: Catalog) -> None:
    if ready.dialect != "sqlite":
        pytest.skip("kept on SQLite files only: PostgreSQL reads every time")
    watch = ready._watch  # the SQLite file's own connection, which reads the rows kept
    raw: list[str] = []
    rows = watch.rows

    def counted_rows(sql: str) -> Any:
        raw.append(sql)
        return rows(sql)

    watch.rows = counted_rows  # type: ignore[method-assign]
    ready.sites(), ready.versions(1)
    raw.clear()
    with counted(ready) as seen:
        for _ in range(5):
            ready.sites(), ready.versions(1)
    assert seen == [] and raw == []
    with Catalog.open(ready.url) as other:
        other.add_site("late", "file:///srv/late", 0)
    with counted(ready) as seen:
        assert "late" in [s.name for s in ready.sites()]
        assert ready.versions(1) == fresh(ready.url)[1]
    assert seen == [] and len(raw) == 2  # each read once more, on the watch's connection


def test_postgresql_reads_every_time(ready: Catalog) -> None:
    if ready.dialect == "sqlite":
        pytest.skip("PostgreSQL only")
    with counted(ready) as seen:
        ready.sites(), ready.versions(1), ready.sites(), ready.versions(1)
    assert len([s for s in seen if s.startswith("SELECT")]) == 4


def _child(url: str, out: Any) -> None:
    with Catalog.open(url) as cat:
        cat.add_site("from-child", "file:///srv/child", 0)
    out.put("done")


def test_a_forked_child_reads_its_own(ready: Catalog) -> None:
    if ready.dialect != "sqlite":
        pytest.skip("kept on SQLite files only")
    before = ready.sites()
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    p = ctx.Process(target=_child, args=(ready.url, out))
    p.start()
    assert out.get(timeout=60) == "done"
    p.join(60)
    names = [s.name for s in ready.sites()]
    assert sorted(names) == sorted([s.name for s in before] + ["from-child"])
    assert ready.versions(1) == fresh(ready.url)[1]
