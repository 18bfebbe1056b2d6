"""The listing's whole records kept beside the summaries (level 17, ``giod.catalog.kept``).

A record's text is what the listing reads instead of the containers' and
statistics' rows: it must give the same record at every version (the
summaries' histories check that against the rows on both catalogs), follow a
pass that only restates statistics, and be checked when read: a text that is
not as written is a ``CatalogError`` at the read of a record's containers,
bytes or statistics, never another exception and never a wrong record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from catalog_samples import DATASET, SITE, seed, specs
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select, text, update

from giod.catalog import Catalog, DatabaseCommit, migrations
from giod.catalog.kept import _dumps, _float, _text, container_ids, parse_record, record_text, sites_of
from giod.catalog.tables import database_summaries, meta
from giod.errors import CatalogError

_names = st.text(min_size=1, max_size=6)
_ints = st.lists(st.integers(0, 2**40), max_size=3)
_floats = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False))
_containers = st.lists(
    st.fixed_dictionaries({
        "name": _names, "path": st.text(max_size=10), "checksum": st.text(max_size=10),
        "size": st.integers(0, 2**62), "cluster_entries": _ints.map(json.dumps), "schema_id": st.integers(1, 99),
        "program": st.text(max_size=5), "program_version": st.text(max_size=5),
        "parameters": st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=3), max_size=2).map(
            json.dumps),
        "format": st.sampled_from(["arrow", "parquet"]), "cluster_checksums": _ints.map(json.dumps),
        "created_version": st.none() | st.integers(1, 10**9), "created": st.none() | st.floats(0, 2e9),
        "id": st.integers(1, 2**40),
    }),
    max_size=4, unique_by=(lambda c: c["name"], lambda c: c["id"]),
)
_stats = st.lists(st.fixed_dictionaries({"field": _names, "min": _floats, "max": _floats}), max_size=4,
                  unique_by=lambda s: s["field"])


@given(held=_containers, stats=_stats, sites=st.lists(st.integers(1, 9), max_size=3, unique=True))
def test_a_record_reads_back_as_written(held: list[dict[str, Any]], stats: list[dict[str, Any]],
                                        sites: list[int]) -> None:
    ids = container_ids((c["id"], c["name"]) for c in held)
    copies = sites_of([(",".join(f"{c['id']}:{s}" for c in held for s in sites) or None,)])
    got = parse_record(record_text(held, stats), ids, 42, 7, 1.25, copies)
    by_id = sorted(held, key=lambda c: c["id"])
    assert [c.id for c in got["containers"]] == [c["id"] for c in by_id]
    for c, want in zip(got["containers"], by_id, strict=True):
        assert (c.name, c.path, c.checksum, c.size, c.schema_id, c.program, c.program_version, c.format) == (
            want["name"], want["path"], want["checksum"], want["size"], want["schema_id"], want["program"],
            want["program_version"], want["format"])
        assert c.cluster_entries == tuple(json.loads(want["cluster_entries"]))
        assert c.cluster_checksums == tuple(json.loads(want["cluster_checksums"]))
        assert c.parameters == json.loads(want["parameters"])
        assert c.created_version == (7 if want["created_version"] is None else want["created_version"])
        assert c.created == (1.25 if want["created"] is None else want["created"])
        assert c.site_ids == tuple(sorted(sites)) and c.database_id == 42
    assert got["bytes"] == sum(c["size"] for c in held)
    assert got["tag_stats"] == {s["field"]: (-math.inf if s["min"] is None else s["min"],
                                             math.inf if s["max"] is None else s["max"]) for s in stats}


_SOUND = record_text([{"name": "raw", "path": "d/raw.arrow", "checksum": "crc32c:0", "size": 5,
                       "cluster_entries": "[3]", "schema_id": 1, "program": "p", "program_version": "1",
                       "parameters": "{}", "format": "arrow", "cluster_checksums": "[1, 2]"}],
                     [{"field": "ht", "min": 1.0, "max": 2.0}])


def _json_values() -> st.SearchStrategy[Any]:
    leaves = st.none() | st.booleans() | st.integers(-5, 2**63) | st.floats(allow_nan=False) | st.text(max_size=4)
    return st.recursive(leaves, lambda kids: st.lists(kids, max_size=14) | st.dictionaries(
        st.text(max_size=2), kids, max_size=2), max_leaves=40)


@given(text_=st.one_of(
    st.text(max_size=40),
    _json_values().map(json.dumps),
    # the sound record with one of its characters changed, or cut short
    st.tuples(st.integers(0, len(_SOUND) - 1), st.characters()).map(lambda e: _SOUND[:e[0]] + e[1] + _SOUND[e[0] + 1:]),
    st.integers(0, len(_SOUND)).map(lambda k: _SOUND[:k]),
), ids=st.sampled_from(["1", "", "x", "1,2", None, "99999999999999999999"]))
def test_a_record_not_as_written_is_a_catalog_error(text_: str, ids: str | None) -> None:
    try:
        got = parse_record(text_, ids, 1, 1, 0.0, {})
    except CatalogError as error:
        assert "malformed catalog row" in str(error)
        return
    # what parses is a record of sound fields
    for c in got["containers"]:
        assert type(c.name) is str and type(c.size) is int and c.size >= 0 and type(c.parameters) is dict
        assert all(type(x) is int for x in c.cluster_entries + c.cluster_checksums)
    assert all(type(lo) is float and type(hi) is float for lo, hi in got["tag_stats"].values())


def test_good_copies_that_are_not_ids_are_a_catalog_error() -> None:
    assert sites_of([("1:2,1:1,3:4",), (None,)]) == {1: (1, 2), 3: (4,)}
    with pytest.raises(CatalogError, match="malformed catalog row"):
        sites_of([("1:x",)])


def test_a_corrupt_record_is_a_catalog_error_when_read(ready: Catalog,
                                                       make_commit: Callable[..., DatabaseCommit]) -> None:
    ready.commit_database(make_commit(4))
    good = ready.commit_database(make_commit(5)).database_id
    m = database_summaries
    with ready._engine.begin() as conn:
        conn.execute(update(m).where(m.c.database_id != good).values(record='[[["raw"]],[]]'))
    first, second = ready.iter_databases(DATASET)
    assert first.n_events == 4 and first.program == "giod.tests"  # its own columns are sound
    for _ in range(2):  # and it stays an error at every read
        for name in ("containers", "bytes", "tag_stats"):
            with pytest.raises(CatalogError, match="malformed catalog row: the listing record of database"):
                getattr(first, name)
    assert second == ready.databases(DATASET)[1]  # the other database of its chunk is read as it was written
    assert ready.databases(DATASET)[0].n_events == 4  # and the rows themselves are untouched


def test_a_pass_of_statistics_alone_keeps_a_new_record(ready: Catalog,
                                                       make_commit: Callable[..., DatabaseCommit]) -> None:
    db = ready.commit_database(make_commit(4, tag_stats={"ht": (0.0, 1.0)})).database_id
    before = ready.version()
    after = ready.add_containers(db, (), SITE, tag_stats={"ht": (5.0, 6.0), "njets": (1.0, 2.0)})
    (old,) = ready.iter_databases(DATASET, before)
    (new,) = ready.iter_databases(DATASET, after)
    assert old.tag_stats == {"ht": (0.0, 1.0)}
    assert new.tag_stats == {"ht": (5.0, 6.0), "njets": (1.0, 2.0)}
    assert new.containers == old.containers and new.bytes == old.bytes
    assert [tuple(r) for r in ready.database_rows(DATASET, before)] == [
        tuple(r) for r in ready.database_rows(DATASET, after)]  # the line is the same


def test_a_replicated_container_lists_its_new_site(ready: Catalog,
                                                   make_commit: Callable[..., DatabaseCommit]) -> None:
    """The sites of the good copies are not kept in the record: a listing sees a copy made after it."""
    db = ready.commit_database(make_commit(4)).database_id
    other = ready.add_site("far", "file:///srv/far", 1).id
    (listed,) = ready.iter_databases(DATASET)
    ready.set_replica_state(listed.containers[0].id, "far", "good")
    ((c, *_),) = [d.containers for d in ready.iter_databases(DATASET)]
    assert set(c.site_ids) == {ready.site(SITE).id, other}
    assert list(ready.iter_databases(DATASET)) == ready.databases(DATASET)
    assert db == listed.id


def test_a_level_16_catalog_with_data_is_migrated(catalog_url: str) -> None:
    with Catalog.open(catalog_url, create=True) as catalog:
        schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
        catalog.create_dataset(DATASET, schema_id)
        catalog.add_site(SITE, "file:///srv/giod", 0)
        ids = [catalog.commit_database(DatabaseCommit(DATASET, 4, SITE, specs(f"w{i}", 4, schema_id),
                                                      tag_stats={"ht": (i, i + 1.0)}, parents=(1,) if i else ()))
               .database_id for i in range(4)]
        catalog.add_containers(ids[1], specs("x", 4, schema_id, ("reco",)), SITE, tag_stats={"njets": (0, 3)})
        catalog.add_containers(ids[2], (), SITE, tag_stats={"ht": (9.0, 10.0)})  # statistics alone
        catalog.delete_database(ids[3])
        start, end = catalog.dataset(DATASET).created_version, catalog.version()
        expected = {v: catalog.databases(DATASET, v) for v in range(start, end + 1)}
        with catalog._engine.begin() as conn:  # as the catalog was at level 16, data and all
            conn.execute(database_summaries.delete().where(
                database_summaries.c.database_id == ids[2], database_summaries.c.created_version == end - 1))
            conn.execute(update(database_summaries).where(database_summaries.c.database_id == ids[2])
                         .values(deleted_version=None))  # a pass of statistics alone wrote no line then
            for column in ("record", "container_ids", "created", "writer", "program_version", "parameters",
                           "idempotency_key"):
                conn.execute(text(f"ALTER TABLE database_summaries DROP COLUMN {column}"))
            conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="16"))
    with Catalog.open(catalog_url, create=False) as catalog:
        with catalog._engine.connect() as conn:
            assert migrations.read_level(conn) == migrations.latest_level() >= 17
            m = database_summaries
            live = conn.execute(select(m.c.database_id, m.c.created_version, m.c.record)
                                .where(m.c.deleted_version.is_(None))).all()
        assert all(record is not None for _, _, record in live)
        assert (ids[2], end - 1) in {(db, v) for db, v, _ in live}  # ended at the statistics and continued
        assert {v: list(catalog.iter_databases(DATASET, v, chunk=2)) for v in expected} == expected
        # and keeps them from there on
        catalog.add_containers(ids[0], (), SITE, tag_stats={"ht": (7.0, 8.0)})
        assert list(catalog.iter_databases(DATASET)) == catalog.databases(DATASET)


def test_seeded_listing_reads_the_records(ready: Catalog) -> None:
    seed(ready, 30)
    assert list(ready.iter_databases(DATASET, chunk=7)) == ready.databases(DATASET)


def test_the_live_listing_in_chunks_with_parents_and_a_summary_without_record(
        ready: Catalog, make_commit: Callable[..., DatabaseCommit]) -> None:
    """The live listing across chunk ends, with parents; a live summary without a record (as no write
    leaves one) makes its chunk read the databases' rows."""
    first = ready.commit_database(make_commit(3)).database_id
    ids = [ready.commit_database(make_commit(2 + i % 3, parents=(first, first + i) if i else (first,))).database_id
           for i in range(8)]
    for chunk in (1, 2, 3, 9, 10, 5_000):
        assert list(ready.iter_databases(DATASET, chunk=chunk)) == ready.databases(DATASET), chunk
    m = database_summaries
    with ready._engine.begin() as conn:
        conn.execute(update(m).where(m.c.database_id == ids[4]).values(record=None))
    for chunk in (1, 2, 3, 9):
        assert list(ready.iter_databases(DATASET, chunk=chunk)) == ready.databases(DATASET), chunk
    listing = ready.iter_databases(DATASET, chunk=2)
    assert next(listing).id == first
    listing.close()  # closed mid-way: the transaction ends
    assert [db.parents for db in ready.iter_databases(DATASET)][1:3] == [(first,), (first, first + 1)]


@given(st.text() | st.none() | st.integers() | st.floats(allow_nan=False, allow_infinity=False))
def test_a_records_values_are_the_text_the_encoder_makes(value: Any) -> None:
    """``record_text`` writes a str and a float without the encoder's set-up per call: the same text."""
    assert _text(value) == _dumps(value)
    if isinstance(value, float) or (isinstance(value, int) and abs(value) < 2**1000):
        assert _float(value) == _dumps(float(value))
    assert _float(None) == "null"


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_record_refuses_a_value_that_is_not_finite_as_before(value: float) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        _dumps(value)
    with pytest.raises(ValueError, match="JSON compliant"):
        _float(value)
