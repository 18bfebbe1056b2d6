"""Planning through the tag coverage (level 11) gives the full check's candidates at every version.

Random histories of commits and groups with some statistics missing, unknown
(nan, infinities) or contradictory (min > max), later passes that replace
statistics, and deleted databases; after each, at every version so far, the
kept coverage equals a count over the listing, and the planned candidates
equal the full check (``records.overlaps`` over the whole listing).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from catalog_samples import SITE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection

from giod.catalog import Catalog, ContainerSpec, DatabaseCommit, migrations, planning
from giod.catalog.engine import create_catalog_engine, parse_url
from giod.catalog.migrations import v0011_tag_coverage
from giod.catalog.records import Bounds, overlaps
from giod.catalog.tables import databases, tag_coverage, tag_stats

FIELDS = ("ht", "njets")
_names = itertools.count()

number = st.one_of(
    st.integers(-5, 5).map(float),
    st.floats(-10, 10, allow_nan=False),
    st.sampled_from([math.nan, math.inf, -math.inf]),  # stored as unknown (NULL)
)
# mostly sound statistics (min <= max), so that fields are often covered and the indexes are used
sound = st.tuples(st.integers(-5, 5), st.integers(0, 3)).map(lambda p: (float(p[0]), float(p[0] + p[1])))
stats = st.dictionaries(st.sampled_from(FIELDS), st.one_of(sound, sound, sound, st.tuples(number, number)),
                        max_size=2)
edge = st.one_of(st.integers(-6, 6).map(float), st.floats(-12, 12, allow_nan=False))
ranges = st.dictionaries(
    st.sampled_from(FIELDS),
    st.one_of(st.tuples(edge, edge), st.tuples(st.just(-math.inf), edge), st.tuples(edge, st.just(math.inf))),
    min_size=1, max_size=2,
)
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), stats),
        st.tuples(st.just("group"), st.lists(stats, min_size=2, max_size=5)),
        st.tuples(st.just("pass"), st.integers(0, 20), stats),
        st.tuples(st.just("delete"), st.integers(0, 20)),
    ),
    min_size=1,
    max_size=8,
)


def _commit(name: str, schema_id: int, k: int, s: dict) -> DatabaseCommit:
    spec = ContainerSpec("tag", f"{name}/{k}/tag.arrow", "crc32c:0", 9, (3,), schema_id)
    return DatabaseCommit(name, 3, SITE, (spec,), s)


def _plan(catalog: Catalog, name: str, version: int, bounds: Bounds) -> tuple[list[int], Any]:
    dataset_id = catalog.dataset(name, version).id

    def work(conn: Connection) -> tuple[list[int], Any]:
        where = databases.c.dataset_id == dataset_id
        return (sorted(planning.kept_ids(conn, dataset_id, where, version, bounds)),
                planning.covered_field(conn, dataset_id, version, bounds))

    return catalog._read(work)


def _coverage(catalog: Catalog, name: str, version: int, field: str) -> int:
    c = tag_coverage
    dataset_id = catalog.dataset(name, version).id
    query = (c.select().with_only_columns(c.c.n_databases)
             .where(c.c.dataset_id == dataset_id, c.c.field == field, c.c.version <= version)
             .order_by(c.c.version.desc()).limit(1))
    found = catalog._read(lambda conn: conn.execute(query).scalar())
    return 0 if found is None else int(found)


def _span(lo: float, hi: float) -> float:
    """``max - min`` as the triggers compute it (``v0011_tag_coverage._span``): infinite where it overflows."""
    return 0.0 if hi == lo else math.inf if lo < 0 and hi > 1.79e308 + lo else hi - lo


def _recounted(catalog: Catalog, dataset_id: int) -> None:
    """The kept coverage at every version, row for row, equals a recount of the dataset's statistics rows:
    the rows made at or before the version and not deleted by it, and the widest ``max - min`` of those
    made by it (None once one had ``min > max``); no coverage before the first row of a field."""
    t, d, c = tag_stats, databases, tag_coverage

    def read(conn: Connection) -> tuple[list[Any], list[Any]]:
        stats = conn.execute(t.select().with_only_columns(t.c.field, t.c.created_version, t.c.deleted_version,
                                                          t.c.min, t.c.max)
                             .join_from(t, d, d.c.id == t.c.database_id).where(d.c.dataset_id == dataset_id))
        kept = conn.execute(c.select().with_only_columns(c.c.field, c.c.version, c.c.n_databases, c.c.width)
                            .where(c.c.dataset_id == dataset_id))
        return list(stats), list(kept)

    stats, kept = catalog._read(read)
    last = max([r[1] for r in stats] + [r[2] or 0 for r in stats] + [r[1] for r in kept] + [0])
    for field in {r[0] for r in stats} | {r[0] for r in kept}:
        rows = [r for r in stats if r[0] == field]
        for version in range(last + 1):
            made = [r for r in rows if r[1] <= version]
            expected = None
            if made:
                live = sum(1 for r in made if r[2] is None or r[2] > version)
                bad = any(r[3] is not None and r[4] is not None and r[3] > r[4] for r in made)
                spans = [_span(r[3], r[4]) for r in made if r[3] is not None and r[4] is not None]
                expected = (live, None if bad else max([0.0, *spans]))
            at = [r for r in kept if r[0] == field and r[1] <= version]
            found = None if not at else tuple(max(at, key=lambda r: r[1])[2:])
            assert found == expected, (field, version)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, bounds=st.lists(ranges, min_size=1, max_size=3))
def test_planning_equals_the_full_check_at_every_version(catalog: Catalog, ops: list, bounds: list[Bounds]) -> None:
    if not catalog.sites():
        catalog.add_site(SITE, "file:///srv/giod")
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    name = f"ds{next(_names)}"
    catalog.create_dataset(name, schema_id)
    other = f"other{next(_names)}"  # another dataset's rows of the same fields share the indexes
    catalog.create_dataset(other, schema_id)
    catalog.commit_database(_commit(other, schema_id, 0, {"ht": (-100.0, 100.0), "njets": (0.0, 9.0)}))
    start = catalog.version()
    made = itertools.count()
    for op in ops:
        live = catalog.databases(name)
        if op[0] == "commit":
            catalog.commit_database(_commit(name, schema_id, next(made), op[1]))
        elif op[0] == "group":
            catalog.commit_databases([_commit(name, schema_id, next(made), s) for s in op[1]])
        elif op[0] == "pass" and live and op[2]:  # replaces the statistics of the fields it names
            catalog.add_containers(live[op[1] % len(live)].id, (), SITE, tag_stats=op[2])
        elif op[0] == "delete" and live:
            catalog.delete_database(live[op[1] % len(live)].id)
    for version in range(start, catalog.version() + 1):
        listed = catalog.databases(name, version)
        for field in FIELDS:
            assert _coverage(catalog, name, version, field) == sum(field in db.tag_stats for db in listed)
        for box in bounds:
            kept, covered = _plan(catalog, name, version, box)
            assert kept == sorted(db.id for db in listed if overlaps(db.tag_stats, box)), (version, box)
            if covered is not None:  # the index path: only for a field every database has statistics of
                assert all(covered[0] in db.tag_stats for db in listed)
            pruned = catalog.databases(name, version, overlapping=box)
            assert pruned == [db for db in listed if overlaps(db.tag_stats, box)]
    _recounted(catalog, catalog.dataset(name).id)
    listed = catalog.databases(name)
    for box in bounds:  # live: the plan's statements built without a version
        assert catalog.databases(name, overlapping=box) == [db for db in listed if overlaps(db.tag_stats, box)]
    assert catalog.databases(other)[0].tag_stats["ht"] == (-100.0, 100.0)


_rows = st.lists(  # statistics rows inserted by one statement: (database, field, version, deleted after, min, max)
    st.tuples(st.integers(0, 3), st.sampled_from((*FIELDS, "mjj")), st.integers(1, 12),
              st.one_of(st.none(), st.integers(1, 4)), st.one_of(st.none(), number), st.one_of(st.none(), number)),
    min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kept=st.lists(stats, min_size=1, max_size=4), rows=_rows)
def test_one_statement_of_statistics_in_any_order_is_counted_as_row_by_row(
        catalog: Catalog, kept: list[dict], rows: list[tuple]) -> None:
    """Rows inserted by one statement, at versions out of order, before and after the versions already kept,
    some already deleted, several at one version: the coverage is what one row at a time gives (on
    PostgreSQL a statement trigger over them all, level 15; on SQLite row triggers)."""
    if not catalog.sites():
        catalog.add_site(SITE, "file:///srv/giod")
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    name = f"raw{next(_names)}"
    catalog.create_dataset(name, schema_id)
    ids = [r.database_id for r in catalog.commit_databases(
        [_commit(name, schema_id, k, s) for k, s in enumerate(kept)])]
    ids += [catalog.commit_database(_commit(name, schema_id, 9, {})).database_id]  # one without statistics
    held = {(db_id, f) for db_id in ids for f in catalog.database(db_id).tag_stats}
    values = list({(ids[i % len(ids)], f, v): {
        "database_id": ids[i % len(ids)], "field": f, "created_version": v,
        "deleted_version": None if after is None else v + after,
        "min": None if lo is None or not math.isfinite(lo) else lo,
        "max": None if hi is None or not math.isfinite(hi) else hi,
    } for i, f, v, after, lo, hi in rows if (ids[i % len(ids)], f) not in held}.values())
    if values:
        with catalog._engine.begin() as conn:
            conn.execute(tag_stats.insert().values(values))  # one statement, every row
    _recounted(catalog, catalog.dataset(name).id)


def test_a_level_15_catalog_sums_its_coverage_along_the_versions(catalog_url: str) -> None:
    """Level 16 replaces PostgreSQL's statement trigger of level 15 (every pair of a statement's versions)
    by running sums along them: a catalog upgraded from level 15 keeps the coverage it had, and groups of
    many versions written after, before and around the kept ones are counted as row by row."""
    engine = create_catalog_engine(parse_url(catalog_url))
    with engine.begin() as conn:
        assert migrations.migrate(conn, target=15) == (None, 15)
    engine.dispose()
    with Catalog.open(catalog_url, create=False) as catalog:
        postgres = catalog.dialect == "postgresql"
        source = ("SELECT prosrc FROM pg_proc WHERE proname = 'tag_coverage_added' "
                  "AND pronamespace = current_schema()::regnamespace")
        with catalog._engine.connect() as conn:
            assert migrations.read_level(conn) == migrations.latest_level() >= 16
            if postgres:  # the function of level 16, not 15's pairs
                assert " OVER w " in conn.exec_driver_sql(source).scalar_one()
        counted_as_row_by_row(catalog, 40)


def test_a_snapshot_keeps_its_coverage(catalog: Catalog) -> None:
    """Candidates of a covered field come from the index; a database without statistics turns that off
    from its version on, and an older snapshot keeps it."""
    catalog.add_site(SITE, "file:///srv/giod")
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    catalog.create_dataset("many", schema_id)
    results = catalog.commit_databases([_commit("many", schema_id, k, {"ht": (10.0 * k, 10.0 * k + 4)})
                                        for k in range(40)])
    pinned = catalog.version()
    box = {"ht": (201.0, 202.0)}
    kept, covered = _plan(catalog, "many", pinned, box)
    assert kept == [results[20].database_id]
    assert covered == ("ht", 4.0)
    catalog.commit_database(_commit("many", schema_id, 40, {}))  # no statistics: may match anything
    later = catalog.version()
    kept, covered = _plan(catalog, "many", later, box)
    assert covered is None and len(kept) == 2
    assert _plan(catalog, "many", pinned, box) == ([results[20].database_id], ("ht", 4.0))
    catalog.delete_database(catalog.databases("many")[-1].id)  # covered again from its deletion on
    assert _plan(catalog, "many", catalog.version(), box) == ([results[20].database_id], ("ht", 4.0))
    catalog.add_containers(results[3].database_id, (), SITE, tag_stats={"ht": (5.0, 1.0)})  # min > max
    kept, covered = _plan(catalog, "many", catalog.version(), box)
    assert covered is None and kept == sorted([results[3].database_id, results[20].database_id])


def test_the_migration_fills_what_the_triggers_keep(catalog: Catalog) -> None:
    """Level 11 on a catalog with data: one row per live dataset and field at the migration's version, equal
    to what the triggers keep; an older snapshot finds none and is planned by the full check."""
    catalog.add_site(SITE, "file:///srv/giod")
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    catalog.create_dataset("old", schema_id)
    results = catalog.commit_databases([_commit("old", schema_id, k, {"ht": (float(k), k + 2.5), "njets": (0, 4)})
                                        for k in range(6)])
    before = catalog.version()
    catalog.commit_database(_commit("old", schema_id, 6, {"ht": (3.0, 1.0)}))  # min > max, no njets
    catalog.delete_database(results[0].database_id)
    catalog.create_dataset("gone", schema_id)
    catalog.commit_database(_commit("gone", schema_id, 0, {"ht": (0.0, 1.0)}))
    catalog.delete_dataset("gone")
    c = tag_coverage
    latest = catalog.version()

    def rows(conn: Connection) -> set[tuple]:
        return {tuple(r) for r in conn.execute(c.select().where(c.c.version == latest))}

    def migrated(conn: Connection) -> set[tuple]:
        conn.execute(c.delete())  # as if the catalog had reached level 11 only now
        v0011_tag_coverage.fill(conn)
        return {tuple(r) for r in conn.execute(c.select())}

    kept = {r for r in catalog._read(lambda conn: {tuple(x) for x in conn.execute(c.select())})
            if r[0] == catalog.dataset("old").id}
    kept_latest = {(ds, f, n, w) for ds, f, v, n, w in kept
                   if v == max(v2 for ds2, f2, v2, _, _ in kept if (ds2, f2) == (ds, f))}
    with catalog._engine.begin() as conn:
        filled = migrated(conn)
    assert {(ds, f, n, w) for ds, f, _, n, w in filled} == kept_latest
    assert {r[2] for r in filled} == {latest}
    assert {(f, n, w) for _, f, _, n, w in filled} == {("ht", 6, None), ("njets", 5, 4.0)}
    box = {"ht": (2.0, 2.2)}
    kept_ids, covered = _plan(catalog, "old", before, box)  # a snapshot older than the fill: the full check
    assert covered is None and kept_ids == [r.database_id for r in results[:3]]


def test_statistics_as_wide_as_doubles_go_are_committed_and_planned(catalog: Catalog) -> None:
    """max - min of finite bounds may overflow a double: PostgreSQL would refuse the commit."""
    if not catalog.sites():
        catalog.add_site(SITE, "file:///srv/giod")
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    name = f"wide{next(_names)}"
    catalog.create_dataset(name, schema_id)
    huge = 1.7e308
    ids = [catalog.commit_database(_commit(name, schema_id, k, s)).database_id for k, s in enumerate(
        [{"ht": (-huge, huge)}, {"ht": (huge, huge)}, {"ht": (-math.inf, -math.inf)}, {"ht": (1.0, 2.0)}])]
    catalog.commit_databases([_commit(name, schema_id, 9, {"ht": (-huge, 0.0)}),
                              _commit(name, schema_id, 10, {"ht": (0.0, huge)})])
    # the smallest doubles: a quotient or product of them underflows, which PostgreSQL refuses too
    catalog.commit_databases([_commit(name, schema_id, 11, {"ht": (5e-324, 1e-323)}),
                              _commit(name, schema_id, 12, {"ht": (-5e-324, 5e-324)})])
    version = catalog.version()
    assert _coverage(catalog, name, version, "ht") == 8
    for box in ({"ht": (1.5, 1.6)}, {"ht": (-1e308, -1e308)}, {"ht": (huge, math.inf)}, {"ht": (-math.inf, -1e300)},
                {"ht": (0.0, 0.0)}, {"ht": (1e-323, 1e-323)}):
        kept, covered = _plan(catalog, name, version, box)
        assert covered is not None and covered[1] == math.inf
        assert kept == sorted(db.id for db in catalog.databases(name, version) if overlaps(db.tag_stats, box))
    assert ids[0] in _plan(catalog, name, version, {"ht": (1.5, 1.6)})[0]


def test_planning_a_covered_field_is_five_or_six_statements(catalog: Catalog) -> None:
    """The dataset's totals and coverage (one, the dataset found by name in it), the candidates and their full
    check (one on PostgreSQL, two on SQLite), the records (three): as many whatever the number of databases."""
    from sqlalchemy import event

    catalog.add_site(SITE, "file:///srv/giod")
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    catalog.create_dataset("counted", schema_id)
    results = catalog.commit_databases([_commit("counted", schema_id, k, {"ht": (10.0 * k, 10.0 * k + 4)})
                                        for k in range(30)])
    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(catalog._engine, "before_cursor_execute", count)
    try:
        kept = catalog.databases("counted", overlapping={"ht": (101.0, 102.0)})
    finally:
        event.remove(catalog._engine, "before_cursor_execute", count)
    assert [db.id for db in kept] == [results[10].database_id]
    assert len([s for s in seen if s.lstrip().upper().startswith("SELECT")]) == (
        5 if catalog.dialect == "postgresql" else 6)


def test_a_pinned_read_keeps_its_version(catalog: Catalog) -> None:
    """``databases`` and ``database`` at a pinned version (on PostgreSQL outside a transaction) give what
    they gave before later commits, a deletion, a replaced container and new statistics."""
    catalog.add_site(SITE, "file:///srv/giod")
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    catalog.create_dataset("pinned", schema_id)
    results = catalog.commit_databases([_commit("pinned", schema_id, k, {"ht": (10.0 * k, 10.0 * k + 4)})
                                        for k in range(8)])
    pinned = catalog.version()
    box = {"ht": (31.0, 32.0)}
    first, third = results[0].database_id, results[3].database_id
    before = (catalog.databases("pinned", pinned), catalog.databases("pinned", pinned, overlapping=box),
              catalog.database(first, pinned), catalog.database(third, pinned))
    assert [db.id for db in before[1]] == [third]
    catalog.commit_databases([_commit("pinned", schema_id, k, {"ht": (31.5, 31.6)}) for k in range(8, 11)])
    catalog.delete_database(first)
    spec = ContainerSpec("tag", "pinned/3/tag2.arrow", "crc32c:1", 11, (3,), schema_id)
    catalog.add_containers(third, (spec,), SITE, tag_stats={"ht": (500.0, 501.0)}, replace=True)
    live = catalog.databases("pinned", overlapping=box)
    assert third not in [db.id for db in live] and len(live) == 3  # the later writes did change the live view
    assert first not in [db.id for db in catalog.databases("pinned")]
    after = (catalog.databases("pinned", pinned), catalog.databases("pinned", pinned, overlapping=box),
             catalog.database(first, pinned), catalog.database(third, pinned))
    assert after == before
    assert [c.path for c in after[3].containers] == ["pinned/3/tag.arrow"]


def counted_as_row_by_row(catalog: Catalog, n: int) -> None:
    """Commit groups of ``n`` databases to a new dataset, then one statement of statistics rows at versions
    before, among and after the kept ones: the kept coverage after each is the one counted row by row."""
    catalog.add_site(SITE, "file:///srv/giod")
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    catalog.create_dataset("many", schema_id)
    first = catalog.commit_databases([_commit("many", schema_id, k, {"ht": (k, k + 1.5), "njets": (0, k % 5)})
                                      for k in range(n)])
    catalog.commit_databases([_commit("many", schema_id, n + k, {"ht": (-k, 2.0 * k)} if k % 3 else {})
                              for k in range(n)])
    dataset_id = catalog.dataset("many").id
    _recounted(catalog, dataset_id)
    rows = [{"database_id": first[k].database_id, "field": "mjj", "created_version": 1 + (37 * k) % (2 * n),
             "deleted_version": None if k % 4 else 2 * n + 10, "min": float(k), "max": float(k) + k % 7}
            for k in range(n)]  # one statement, at versions before, among and after the kept rows
    with catalog._engine.begin() as conn:
        conn.execute(tag_stats.insert().values(rows))
    _recounted(catalog, dataset_id)
