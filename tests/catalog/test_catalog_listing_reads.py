"""The streamed listing gives, record for record, what reading each database alone gives.

``iter_databases`` reads a chunk as one summary row a database (its end the
last row read), the parents of its databases by the range of their ids (or
by the ids themselves when another dataset's databases lie between them), and
the sites of the good copies by ranges of container ids, counted first: a
range in which every container has one good copy at one site is that site
alone, any other range is read as texts. Random histories of two datasets
written in turns (parents across both), copies at three sites in every state,
deleted databases; at every version and in chunks of several sizes, each
listed record equals ``database`` of its id and the listing equals
``databases``, on both catalogs.
"""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import pytest
from catalog_samples import SITE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod.catalog import Catalog, ContainerSpec, DatabaseCommit, queries
from giod.catalog.kept import GoodCopies, sites_of
from giod.errors import CatalogError

_datasets = itertools.count()
SITES = (SITE, "far", "near")
STATES = ("good", "bad", "lost", "copying")
_NAMES = ("raw", "reco", "tag")

_OPS = st.lists(
    st.one_of(
        # a commit to one of the two datasets: its containers, and a parent (an index into every database so far)
        st.tuples(st.just("commit"), st.integers(0, 1), st.lists(st.sampled_from(_NAMES), max_size=3, unique=True),
                  st.lists(st.integers(0, 30), max_size=2, unique=True)),
        # a group of commits to one dataset
        st.tuples(st.just("group"), st.integers(0, 1), st.integers(2, 4)),
        # the state of one copy of one container (an index into every container so far)
        st.tuples(st.just("copy"), st.integers(0, 60), st.sampled_from(SITES), st.sampled_from(STATES)),
        st.tuples(st.just("delete"), st.integers(0, 30)),
    ),
    min_size=1,
    max_size=14,
)


def _specs(name: str, k: int, schema_id: int, held: Any) -> tuple[ContainerSpec, ...]:
    return tuple(ContainerSpec(c, f"{name}/{k}/{c}.arrow", f"crc32c:{k:08x}", 10 + k, (3,), schema_id) for c in held)


def _history(catalog: Catalog, names: tuple[str, str], schema_id: int, ops: list) -> None:
    made = itertools.count()
    every: list[int] = []  # databases of both datasets, in order
    for op in ops:
        if op[0] == "commit":
            name = names[op[1]]
            parents = sorted({every[i % len(every)] for i in op[3]}) if every else []
            every.append(catalog.commit_database(DatabaseCommit(
                name, 3, SITE, _specs(name, next(made), schema_id, op[2]), parents=parents,
                parameters={"k": len(every) % 3})).database_id)
        elif op[0] == "group":
            name = names[op[1]]
            done = catalog.commit_databases([DatabaseCommit(name, 3, SITE, _specs(name, next(made), schema_id,
                                                                                  _NAMES[:k % 3 + 1]))
                                             for k in range(op[2])])
            every += [d.database_id for d in done]
        elif op[0] == "copy":
            held = [c.id for n in names for db in catalog.databases(n) for c in db.containers]
            if held:
                catalog.set_replica_state(held[op[1] % len(held)], op[2], op[3])
        elif op[0] == "delete":
            live = [db.id for n in names for db in catalog.databases(n)]
            if live:
                catalog.delete_database(live[op[1] % len(live)])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, spread=st.booleans())
def test_the_listing_gives_each_record_as_read_alone(catalog: Catalog, monkeypatch: pytest.MonkeyPatch,
                                                     ops: list, spread: bool) -> None:
    for site in SITES:
        if site not in {s.name for s in catalog.sites()}:
            catalog.add_site(site, f"file:///srv/{site}")
    # spread: every gap between two ids starts another range, and a chunk's parents are read by their ids
    monkeypatch.setattr(queries, "_GAP", 0 if spread else 256)
    monkeypatch.setattr(queries, "_SPREAD", 0 if spread else 4)
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    names = (f"a{next(_datasets)}", f"b{next(_datasets)}")
    for name in names:
        catalog.create_dataset(name, schema_id)
    start = catalog.version()
    _history(catalog, names, schema_id, ops)
    for version in range(start, catalog.version() + 1):
        for name in names:
            whole = catalog.databases(name, version)
            for chunk in (1, 2, 5_000):
                listed = list(catalog.iter_databases(name, version, chunk=chunk))
                assert listed == whole, (version, chunk)
            assert listed == [catalog.database(db.id, version) for db in listed], version
            assert [db.first_entry for db in listed] == sorted(db.first_entry for db in listed)


def test_copies_counted_by_range_and_read_as_texts(ready: Catalog, make_commit: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A range with one good copy at one site a container is that site, no text read; a second copy, a copy not
    good, or a site moved make the range's texts read: each container lists exactly the sites of its good copies."""
    statements: list[str] = []
    read = queries._driver_rows

    def spy(conn: Any, sql: str, values: Any) -> Any:
        statements.append(sql)
        return read(conn, sql, values)

    monkeypatch.setattr(queries, "_driver_rows", spy)
    for _ in range(6):
        ready.commit_database(make_commit(3))
    local = ready.site(SITE).id
    far = ready.add_site("far", "file:///srv/far").id

    def listed() -> dict[int, tuple[int, ...]]:
        statements.clear()
        got = list(ready.iter_databases("qcd", chunk=4))
        assert got == ready.databases("qcd")
        return {c.id: c.site_ids for db in got for c in db.containers}

    first = listed()
    assert set(first.values()) == {(local,)} and len(first) == 12
    assert statements and not any("concat" in s or "string_agg" in s for s in statements)  # counted, no text
    ids = sorted(first)
    ready.set_replica_state(ids[3], "far", "good")
    ready.set_replica_state(ids[5], SITE, "bad")
    ready.set_replica_state(ids[7], SITE, "lost")
    ready.set_replica_state(ids[7], "far", "good")
    got = listed()
    assert any("concat" in s or "string_agg" in s for s in statements)
    want = {cid: (local,) for cid in ids} | {ids[3]: (local, far), ids[5]: (), ids[7]: (far,)}
    assert got == want
    for cid in ids:  # every copy moved to the other site: one site again, counted
        ready.set_replica_state(cid, "far", "good")
        ready.set_replica_state(cid, SITE, "copying")
    assert set(listed().values()) == {(far,)}
    assert not any("concat" in s or "string_agg" in s for s in statements)


_ranges = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 4), st.integers(1, 9)), max_size=4)


@given(ranges=_ranges, texts=st.dictionaries(st.integers(0, 400), st.lists(st.integers(1, 9), min_size=1, max_size=3,
                                                                           unique=True), max_size=6))
def test_good_copies_map_as_a_dict(ranges: list[tuple[int, int, int]], texts: dict[int, list[int]]) -> None:
    uniform, want, at = [], {}, 500
    for gap, width, site in ranges:  # disjoint ranges after the texts' ids, in order
        first = at + gap
        uniform.append((first, first + width, site))
        want |= {cid: (site,) for cid in range(first, first + width + 1)}
        at = first + width + 1
    want |= {cid: tuple(sorted(sites)) for cid, sites in texts.items()}
    rows = [(",".join(f"{cid}:{s}" for cid, sites in texts.items() for s in sites) or None,)]
    copies = GoodCopies(rows, uniform)
    assert dict(copies) == want and len(copies) == len(want)
    assert copies.resolve() == sites_of(rows)
    for cid in range(0, at + 2):
        assert copies.get(cid, ()) == want.get(cid, ())
        if cid not in want:
            with pytest.raises(KeyError):
                copies[cid]


def test_a_record_read_is_let_go_and_one_not_read_is_held_to_its_chunks_end(ready: Catalog,
                                                                            make_commit: Any) -> None:
    """The listing lets a record whose containers the caller read go at the next one: dropped by the caller, it is
    freed (with what its first read built), not held to the chunk's end; one not read is held to its chunk's end
    (freed while the next chunk is made)."""
    import weakref

    for _ in range(4):
        ready.commit_database(make_commit(3))
    listing = ready.iter_databases("qcd", chunk=3)
    first = next(listing)
    assert first.containers  # built on first read
    gone, built = weakref.ref(first), weakref.ref(first.containers[0])
    del first
    second = next(listing)
    assert gone() is None and built() is None
    held = weakref.ref(second)
    del second
    next(listing)
    assert held() is not None  # not read: the chunk holds it
    assert [db.id for db in listing] == [db.id for db in ready.databases("qcd")][3:]
    assert held() is None  # the chunk ended


_CONTAINER = ["raw", "d/raw.arrow", "crc32c:0", 5, [3], 1, "p", "1", {}, "arrow", [1, 2], None, None]


@pytest.mark.parametrize(("at", "value"), [
    (0, 7), (1, None), (2, 1.0), (3, True), (3, -1), (3, 5.0), (4, [True]), (4, [1.0]), (4, ["3"]), (4, [None]),
    (4, 3), (5, "1"), (6, None), (7, 1), (8, []), (9, None), (10, [False]), (10, [2, "x"]), (10, [0.5]),
    (11, 2.0), (11, True), (12, "0"), (12, [1.0]),
])
def test_a_kept_container_with_a_field_of_another_type_is_a_catalog_error(at: int, value: Any) -> None:
    """Each field of a kept container is checked for its type (a list of integers holds no bool, float or text)."""
    from giod.catalog.kept import parse_record

    sound = json.dumps([[_CONTAINER], [["ht", 1.0, 2.0]]])
    assert parse_record(sound, "9", 1, 1, 0.0, {})["containers"][0].cluster_checksums == (1, 2)
    changed = list(_CONTAINER)
    changed[at] = value
    with pytest.raises(CatalogError, match="has a container that is not as written"):
        parse_record(json.dumps([[changed], []]), "9", 1, 1, 0.0, {})


def test_kept_containers_out_of_name_order_or_statistics_of_another_type_are_a_catalog_error() -> None:
    from giod.catalog.kept import parse_record

    other = ["a", *_CONTAINER[1:]]
    with pytest.raises(CatalogError, match="has a container that is not as written"):
        parse_record(json.dumps([[_CONTAINER, other], []]), "9,10", 1, 1, 0.0, {})
    for stat in (["ht", "1", 2.0], ["ht", 1.0, True], [1, 1.0, 2.0], ["ht", 1.0], ["ht", None, None, None]):
        with pytest.raises(CatalogError, match="has a statistic that is not as written"):
            parse_record(json.dumps([[], [stat]]), "", 1, 1, 0.0, {})
    with pytest.raises(CatalogError, match="has a statistic that is not as written"):
        parse_record(json.dumps([[], [["ht", 1.0, 2.0], ["ht", 3.0, 4.0]]]), "", 1, 1, 0.0, {})
    assert parse_record(json.dumps([[], [["ht", None, 2]]]), "", 1, 1, 0.0, {})["tag_stats"] == {
        "ht": (-math.inf, 2.0)}
