"""A dataset's totals kept per version (level 9) equal a count of its databases at every version.

Random histories of single commits, groups (``commit_databases``), later passes
that add or replace containers, and deleted databases; after each, the
summary at every version so far is compared with the listing at that version.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from catalog_samples import DATASET, SITE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select

from giod.catalog import Catalog, ContainerSpec, DatabaseCommit
from giod.catalog.tables import dataset_totals
from giod.errors import NotFound

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), st.integers(1, 50)),
        st.tuples(st.just("group"), st.lists(st.integers(1, 50), min_size=2, max_size=4)),
        st.tuples(st.just("pass"), st.integers(0, 5), st.booleans()),
        st.tuples(st.just("delete"), st.integers(0, 5)),
    ),
    min_size=1,
    max_size=8,
)


def _counted(catalog: Catalog, version: int) -> dict[str, int]:
    dbs = catalog.databases(DATASET, version)
    return {"n_events": sum(db.n_events for db in dbs), "n_databases": len(dbs), "bytes": sum(db.bytes for db in dbs)}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_totals_equal_the_count_at_every_version(
    ready: Catalog, make_commit: Callable[..., DatabaseCommit], ops: list[tuple]
) -> None:
    start = ready.version()
    schema_id = ready.dataset(DATASET).schema_id
    for k, op in enumerate(ops):
        live = ready.databases(DATASET)
        if op[0] == "commit":
            ready.commit_database(make_commit(op[1]))
        elif op[0] == "group":
            ready.commit_databases([make_commit(n) for n in op[1]])
        elif op[0] == "pass" and live:
            db = live[op[1] % len(live)]
            spec = ContainerSpec("reco" if op[2] else "tag", f"{DATASET}/p{k}/x.parquet", "crc32c:00000001",
                                 70 + k, (db.n_events,), schema_id)
            ready.add_containers(db.id, (spec,), SITE, replace=True)
        elif op[0] == "delete" and live:
            ready.delete_database(live[op[1] % len(live)].id)
    for v in range(start, ready.version() + 1):
        assert ready.dataset_summary(DATASET, v) == _counted(ready, v), v
    assert ready.dataset_summary(DATASET) == _counted(ready, ready.version())


def test_a_version_before_the_totals_is_counted(ready: Catalog, make_commit: Callable[..., DatabaseCommit]) -> None:
    """A catalog migrated to level 9 keeps totals from then on; earlier snapshots are counted."""
    first = ready.commit_database(make_commit(5)).version
    ready.commit_database(make_commit(7))
    with ready._engine.begin() as conn:  # as if the catalog had been migrated after the second commit
        conn.execute(delete(dataset_totals).where(dataset_totals.c.version < ready.version()))
    assert ready.dataset_summary(DATASET, first) == _counted(ready, first)
    assert ready.dataset_summary(DATASET)["n_events"] == 12


def test_streamed_listing_and_entry_lookup(ready: Catalog, make_commit: Callable[..., DatabaseCommit]) -> None:
    results = ready.commit_databases([make_commit(n) for n in (3, 1, 4, 1, 5, 9, 2)])
    ready.delete_database(results[2].database_id)
    pinned = ready.version()
    ready.commit_database(make_commit(6))  # after the pin: the pinned listing leaves it out
    listed = ready.databases(DATASET, pinned)
    assert list(ready.iter_databases(DATASET, pinned, chunk=2)) == listed
    assert [db.id for db in ready.iter_databases(DATASET, chunk=3)] == [db.id for db in ready.databases(DATASET)]
    rows = list(ready.database_rows(DATASET, pinned))
    assert all(type(value) is int for row in rows for value in (*row[:5],))  # PostgreSQL's sum() is numeric
    assert [(*row[:6], ",".join(sorted(row.containers.split(",")))) for row in rows] == [
        (db.id, db.first_entry, db.n_events, db.bytes, db.created_version, db.program,
         ",".join(sorted(c.name for c in db.containers))) for db in listed
    ]
    for db in listed:
        for entry in (db.first_entry, db.stop_entry - 1):
            assert ready.database_at(DATASET, entry, pinned) == db
    with pytest.raises(NotFound, match="no entry 4"):  # the deleted database's first entry
        ready.database_at(DATASET, 4, pinned)
    with pytest.raises(NotFound, match="no entry 25"):
        ready.database_at(DATASET, 25, pinned)
    assert ready.database_at(DATASET, 25).n_events == 6
    with pytest.raises(NotFound, match="no dataset named 'nope'"):
        next(ready.iter_databases("nope"))


def test_a_purged_dataset_takes_its_totals(ready: Catalog, make_commit: Callable[..., DatabaseCommit]) -> None:
    ready.commit_database(make_commit(3))
    gone = ready.dataset(DATASET).id
    ready.delete_dataset(DATASET)
    ready.purge_deleted(ready.version() + 1)
    with ready._engine.connect() as conn:
        left = conn.execute(select(dataset_totals).where(dataset_totals.c.dataset_id == gone)).all()
    assert left == []
