"""Listings of what changed since a version, and of databases by idempotency key, filtered in SQL."""

from __future__ import annotations

import itertools

import pytest
from catalog_samples import SITE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from giod.catalog import Catalog, ContainerSpec, DatabaseCommit
from giod.catalog import catalog as catalog_module

_names = itertools.count()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    later=st.lists(st.integers(0, 15), max_size=4),
    deleted=st.sets(st.integers(0, 15), max_size=3),
    data=st.data(),
)
def test_changes_and_keys_equal_the_python_rule(catalog: Catalog, batches: list, later: list, deleted: set,
                                                data: st.DataObject) -> None:
    if not catalog.sites():
        catalog.add_site(SITE, "file:///srv/giod")
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    name = f"ds{next(_names)}"
    catalog.create_dataset(name, schema_id)
    start = catalog.version()
    ids: list[int] = []
    for n in batches:  # databases committed over several versions, with keys
        results = catalog.commit_databases([
            DatabaseCommit(name, 3, SITE, (ContainerSpec("tag", f"{name}/{len(ids) + i}/tag.arrow", "crc32c:0", 9,
                                                         (3,), schema_id),), {}, idempotency_key=f"k{len(ids) + i}")
            for i in range(n)
        ])  # fmt: skip
        ids += [r.database_id for r in results]
    for k, i in enumerate(later):  # a later pass gives an older database a container
        if i < len(ids):
            catalog.add_containers(ids[i], (ContainerSpec(f"reco{k}", f"{name}/{i}/reco{k}.arrow",
                                                          "crc32c:1", 9, (3,), schema_id),), SITE)
    for i in deleted:
        if i < len(ids):
            catalog.delete_database(ids[i])
    everything = catalog.databases(name)
    for since in range(start - 1, catalog.version() + 1):
        expected = [d for d in everything
                    if d.created_version > since or any(c.created_version > since for c in d.containers)]
        assert catalog.databases(name, changed_since=since) == expected, since
    keys = data.draw(st.lists(st.sampled_from([f"k{i}" for i in range(len(ids) + 2)]), max_size=6))
    assert catalog.databases(name, keys=keys) == [d for d in everything if d.idempotency_key in set(keys)]
    assert catalog.databases(name, keys=[]) == []
    # more keys than one statement carries: the same answer, filtered after the listing
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(catalog_module, "MAX_KEYS", 1)
        assert catalog.databases(name, keys=keys) == [d for d in everything if d.idempotency_key in set(keys)]
