"""Listing pruned by tag ranges in SQL equals the same rule applied to the full listing."""

from __future__ import annotations

import itertools
import math

from catalog_samples import SITE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod.catalog import Catalog, ContainerSpec, DatabaseCommit
from giod.catalog.records import overlaps

FIELDS = ("njets", "ht", "met")
_names = itertools.count()

number = st.one_of(
    st.integers(-5, 5).map(float),
    st.floats(-10, 10, allow_nan=False),
    st.sampled_from([math.nan, math.inf, -math.inf]),  # stored as unknown (NULL)
)
stats = st.dictionaries(st.sampled_from(FIELDS), st.tuples(number, number), max_size=3)
edge = st.one_of(st.integers(-6, 6).map(float), st.floats(-12, 12, allow_nan=False), st.just(math.inf))
ranges = st.dictionaries(
    st.sampled_from(FIELDS),
    st.tuples(edge, edge).map(lambda p: (-p[0] if p[0] == math.inf else p[0], p[1])),
    max_size=3,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    per_db=st.lists(stats, max_size=12),
    later=st.lists(st.tuples(st.integers(0, 11), stats), max_size=3),
    deleted=st.sets(st.integers(0, 11), max_size=3),
    bounds=ranges,
)
def test_sql_pruning_equals_the_python_rule(
    catalog: Catalog, per_db: list, later: list, deleted: set, bounds: dict
) -> None:
    if not catalog.sites():
        catalog.add_site(SITE, "file:///srv/giod")
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    name = f"ds{next(_names)}"
    catalog.create_dataset(name, schema_id)
    results = catalog.commit_databases([
        DatabaseCommit(name, 3, SITE, (ContainerSpec("tag", f"{name}/{i}/tag.arrow", "crc32c:0", 9, (3,),
                                                     schema_id),), s)
        for i, s in enumerate(per_db)
    ])  # fmt: skip
    pinned = catalog.version()
    ids = [r.database_id for r in results]
    for i, s in later:  # a later pass replaces some statistics; older versions keep theirs
        if i < len(ids) and s:
            catalog.add_containers(ids[i], (), SITE, tag_stats=s)
    for i in deleted:
        if i < len(ids):
            catalog.delete_database(ids[i])
    for version in (None, pinned):
        everything = catalog.databases(name, version)
        expected = [d.id for d in everything if overlaps(d.tag_stats, bounds)]
        pruned = catalog.databases(name, version, overlapping=bounds)
        assert [d.id for d in pruned] == expected
        assert pruned == [d for d in everything if d.id in set(expected)]  # whole records alike


def test_a_pruned_listing_of_many_databases_keeps_the_entry_order(catalog: Catalog, monkeypatch) -> None:
    import giod.catalog.catalog as catalog_module
    import giod.catalog.queries as queries

    monkeypatch.setattr(queries, "IN_CHUNK", 3)  # the kept ids are loaded in chunks of 3
    monkeypatch.setattr(catalog_module, "IN_CHUNK", 3)
    catalog.add_site(SITE, "file:///srv/giod")
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    catalog.create_dataset("many", schema_id)
    catalog.commit_databases([
        DatabaseCommit("many", 2, SITE, (ContainerSpec("tag", f"many/{i}/tag.arrow", "crc32c:0", 9, (2,),
                                                       schema_id),), {"ht": (float(i % 4), float(i % 4) + 1)})
        for i in range(20)
    ])  # fmt: skip
    bounds = {"ht": (2.5, 10.0)}
    everything = catalog.databases("many")
    pruned = catalog.databases("many", overlapping=bounds)
    assert pruned == [d for d in everything if overlaps(d.tag_stats, bounds)]
    assert len(pruned) == 10 and [d.first_entry for d in pruned] == sorted(d.first_entry for d in pruned)
