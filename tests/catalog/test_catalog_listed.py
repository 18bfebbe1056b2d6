"""The listing's records build their containers, bytes and statistics on first read, and are the records.

``Catalog.iter_databases`` and ``Catalog.databases`` make records whose own
columns are set at once and whose ``containers``, ``bytes`` and ``tag_stats``
are built from the fetched rows when one is first read
(``giod.catalog.listed``). They must equal, pickle and copy as records made by
the constructor, and a row that does not parse must still be a
``CatalogError`` before anything uses it.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
import sqlite3
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from catalog_samples import DATASET, specs
from hypothesis import given
from hypothesis import strategies as st

from giod.catalog import Catalog, DatabaseCommit
from giod.catalog.listed import Parsed, container_record, database_records
from giod.catalog.records import DatabaseRecord
from giod.errors import CatalogError, ConfigError


def _made(db: DatabaseRecord) -> DatabaseRecord:
    return DatabaseRecord(**{f.name: getattr(db, f.name) for f in fields(DatabaseRecord)})


def test_listed_records_equal_constructed_ones(ready: Catalog, make_commit: Callable[..., DatabaseCommit]) -> None:
    first = ready.commit_database(make_commit(3))
    ready.commit_databases([make_commit(n, parents=(first.database_id,)) for n in (2, 5)])
    ready.commit_database(make_commit(4, tag_stats={"ht": (-math.inf, math.inf)}))
    listed = list(ready.iter_databases(DATASET, chunk=2))
    assert [db.first_entry for db in listed] == [0, 3, 5, 10]
    assert [db.parents for db in listed] == [(), (first.database_id,), (first.database_id,), ()]
    assert listed[3].tag_stats == {"ht": (-math.inf, math.inf)}
    unread = list(ready.iter_databases(DATASET))
    for db, fresh in zip(listed, unread, strict=True):
        assert db == _made(db) and _made(db) == db
        assert db.bytes == sum(c.size for c in db.containers) > 0
        assert [c.id for c in db.containers] == sorted(c.id for c in db.containers)
        # pickled or copied before any deferred field was read: the copy holds values, not rows
        again = pickle.loads(pickle.dumps(fresh))
        assert "_rows" not in vars(again) and again == db
        assert copy.deepcopy(db) == db
    assert unread == ready.databases(DATASET)


def test_a_chunk_below_one_is_refused(ready: Catalog) -> None:
    with pytest.raises(ConfigError, match="at least 1"):
        next(ready.iter_databases(DATASET, chunk=0))


EDITS = {
    "cluster entries not JSON": "UPDATE containers SET cluster_entries = '{bad'",
    "cluster checksums not integers": "UPDATE containers SET cluster_checksums = '[1.5]'",
    "container parameters a list": "UPDATE containers SET parameters = '[1]'",
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_malformed_container_row_is_a_catalog_error_when_read(tmp_path: Path, edit: str) -> None:
    catalog = Catalog.open(str(tmp_path / "c.sqlite"))
    try:
        schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
        catalog.create_dataset(DATASET, schema_id)
        catalog.add_site("local", "file:///srv/giod", 0)
        catalog.commit_database(DatabaseCommit(DATASET, 4, "local", specs("a", 4, schema_id)))
        with sqlite3.connect(tmp_path / "c.sqlite") as con:
            con.execute(EDITS[edit])
        (db,) = catalog.databases(DATASET)  # the rows themselves (the listing reads its kept record, level 17)
        assert db.n_events == 4  # its own columns are sound
        for _ in range(2):  # and stays an error at every read
            for name in ("containers", "bytes", "tag_stats"):
                with pytest.raises(CatalogError, match="malformed catalog row"):
                    getattr(db, name)
        with pytest.raises(CatalogError, match="malformed catalog row"):
            pickle.dumps(db)
    finally:
        catalog.close()


def _reference_list(text: str) -> tuple[int, ...] | None:
    try:
        got = json.loads(text)
    except ValueError:
        return None
    ok = isinstance(got, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in got)
    return tuple(got) if ok else None


_TEXT = st.one_of(
    st.lists(st.integers(-(2**40), 2**40), max_size=4).map(json.dumps),
    st.sampled_from(["[]", "{}", "[1.5]", "[true]", '["a"]', "nope", "[1,", "{\"a\": 1}", "null"]),
    st.text(max_size=12),
)
_SITES = st.one_of(st.none(), st.lists(st.integers(1, 99), min_size=1, max_size=3).map(
    lambda ids: ",".join(map(str, ids))), st.text(max_size=6).filter(bool))


@given(entries=_TEXT, checksums=_TEXT, parameters=_TEXT, sites=_SITES)
def test_a_container_row_parses_as_json_would_or_is_a_catalog_error(
    entries: str, checksums: str, parameters: str, sites: str | None
) -> None:
    row = (7, 1, "reco", "d/x.arrow", "crc32c:00000001", 10, entries, 1, 3, sites, "p", "1", parameters, 0.5,
           "arrow", checksums)
    want_entries, want_checksums = _reference_list(entries), _reference_list(checksums)
    try:
        want_parameters: Any = json.loads(parameters)
    except ValueError:
        want_parameters = None
    try:
        want_sites: Any = () if sites is None else tuple(sorted(int(x) for x in sites.split(",")))
    except ValueError:
        want_sites = None
    sound = (want_entries is not None and want_checksums is not None and isinstance(want_parameters, dict)
             and want_sites is not None)
    for parsed in (Parsed(), Parsed()):  # a text parsed before is the same answer
        if not sound:
            with pytest.raises(CatalogError, match="malformed catalog row"):
                container_record(row, parsed)
            continue
        got = container_record(row, parsed)
        assert (got.cluster_entries, got.cluster_checksums, got.parameters, got.site_ids) == (
            want_entries, want_checksums, want_parameters, want_sites)
        got.parameters["x"] = 1  # records share no mutable state
        assert container_record(row, parsed).parameters == want_parameters


def test_records_of_one_chunk_are_built_apart() -> None:
    heads = [(1, 1, 0, 5, 0.0, 3, "w", "p", "1", "{}", None, None),
             (2, 1, 5, 5, 0.0, 3, "w", "p", "1", "{}", None, 9), (2, 1, 5, 5, 0.0, 3, "w", "p", "1", "{}", None, 8)]
    held = [(11, 2, "tag", "d/t", "c", 4, "[5]", 1, 3, "1", "p", "1", "{}", 0.0, "arrow", "[]"),
            (10, 2, "raw", "d/r", "c", 6, "[5]", 1, 3, None, "p", "1", "{}", 0.0, "arrow", "[]")]
    one, two = database_records(heads, held, [(2, "ht", None, 4.0)], Parsed())
    assert two.parents == (9, 8) and [c.id for c in two.containers] == [10, 11]
    assert (two.bytes, two.tag_stats) == (10, {"ht": (-math.inf, 4.0)})
    assert (one.containers, one.bytes, one.tag_stats) == ((), 0, {})
