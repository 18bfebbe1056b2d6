"""The catalog API on both backends: versions, snapshots, commits, containers, errors."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest
from catalog_samples import DATASET, SITE, specs
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from giod.catalog import Catalog, ContainerSpec, DatabaseCommit
from giod.errors import CatalogError, ConfigError, ConflictError, NotFound

MakeCommit = Callable[..., DatabaseCommit]


def test_fresh_catalog_is_empty_at_version_zero(catalog: Catalog) -> None:
    assert catalog.version() == 0
    assert catalog.versions() == []
    assert catalog.datasets() == []
    assert catalog.sites() == []
    assert catalog.container_paths() == set()


def test_each_mutation_bumps_the_version_exactly_once(catalog: Catalog) -> None:
    schema_id = catalog.add_schema("events", "a: 1\n", "fp-1")
    catalog.add_site(SITE, "file:///srv", 1)
    catalog.create_dataset(DATASET, schema_id)
    result = catalog.commit_database(
        DatabaseCommit(DATASET, 10, SITE, specs("a", 10, schema_id), {"ht": (1.0, 2.0)})
    )
    catalog.add_containers(result.database_id, specs("a", 10, schema_id, ("reco",)), SITE)
    catalog.set_replica_state(catalog.database(result.database_id).containers[0].id, SITE, "bad")
    catalog.delete_database(result.database_id)
    catalog.delete_dataset(DATASET)

    log = catalog.versions()
    assert [v.version for v in log] == list(range(8, 0, -1))
    assert catalog.version() == 8
    assert log[-1].description == "add schema events (1)"
    assert log[4].description == f"commit {DATASET} db {result.database_id}"
    assert all(log[i].created >= log[i + 1].created for i in range(len(log) - 1))
    assert catalog.versions(limit=3) == log[:3]


def test_no_op_calls_do_not_bump(catalog: Catalog) -> None:
    first = catalog.add_schema("events", "a: 1\n", "fp-1")
    assert catalog.add_schema("renamed", "a: 1\n", "fp-1") == first
    catalog.create_dataset(DATASET, first)
    assert catalog.set_dataset_schema(DATASET, first) == 2
    assert catalog.version() == 2
    assert catalog.schema(first).name == "events"
    with pytest.raises(NotFound, match="no schema with id 99"):
        catalog.schema(99)


def test_snapshot_hides_what_came_later(ready: Catalog, make_commit: MakeCommit) -> None:
    created = ready.dataset(DATASET).created_version
    with pytest.raises(NotFound, match=f"at version {created - 1}"):
        ready.dataset(DATASET, created - 1)
    before = ready.version()
    result = ready.commit_database(make_commit(50))
    assert result.version == before + 1
    assert ready.databases(DATASET, before) == []
    assert [d.id for d in ready.databases(DATASET, result.version)] == [result.database_id]
    with pytest.raises(NotFound):
        ready.database(result.database_id, before)
    assert ready.dataset_summary(DATASET, before) == {"n_events": 0, "n_databases": 0, "bytes": 0}


def test_commit_round_trip_and_contiguous_entries(ready: Catalog, make_commit: MakeCommit) -> None:
    sizes = [7, 1, 300, 42]
    results = [ready.commit_database(make_commit(n)) for n in sizes]
    assert [r.first_entry for r in results] == [sum(sizes[:i]) for i in range(len(sizes))]
    listed = ready.databases(DATASET)
    assert [d.n_events for d in listed] == sizes
    assert all(a.stop_entry == b.first_entry for a, b in itertools.pairwise(listed))
    record = ready.database(results[2].database_id)
    sent = make_commit(300)
    assert record.writer == sent.writer and record.program == sent.program
    assert record.parameters == sent.parameters
    assert record.tag_stats == sent.tag_stats
    assert [c.name for c in record.containers] == [c.name for c in sent.containers]
    assert record.containers[0].cluster_entries == (300,)
    assert record.containers[0].site_ids == (ready.site(SITE).id,)
    assert record.bytes == sum(c.size for c in record.containers)
    summary = ready.dataset_summary(DATASET)
    assert summary == {
        "n_events": sum(sizes),
        "n_databases": 4,
        "bytes": sum(d.bytes for d in listed),
    }


def test_parents_keep_their_order(ready: Catalog, make_commit: MakeCommit) -> None:
    a, b = (ready.commit_database(make_commit(5)).database_id for _ in range(2))
    child = ready.commit_database(make_commit(5, parents=(b, a)))
    assert ready.database(child.database_id).parents == (b, a)
    with pytest.raises(NotFound, match="no database 12345"):
        ready.commit_database(make_commit(5, parents=(a, 12345)))


def test_idempotency_key_lands_once(ready: Catalog, make_commit: MakeCommit) -> None:
    first = ready.commit_database(make_commit(10, idempotency_key="run7-file3"))
    version = ready.version()
    again = ready.commit_database(make_commit(99, idempotency_key="run7-file3"))
    assert again.duplicate and not first.duplicate
    assert (again.database_id, again.first_entry, again.version) == (
        first.database_id,
        first.first_entry,
        first.version,
    )
    assert ready.version() == version
    assert len(ready.databases(DATASET)) == 1
    assert ready.database(first.database_id).idempotency_key == "run7-file3"


def test_add_containers_conflict_then_replace(ready: Catalog, make_commit: MakeCommit) -> None:
    schema_id = ready.dataset(DATASET).schema_id
    db = ready.commit_database(make_commit(20)).database_id
    v_commit = ready.version()
    v_reco = ready.add_containers(
        db,
        specs("r1", 20, schema_id, ("reco",)),
        SITE,
        tag_stats={"ht": (30.0, 40.0), "nmuons": (0.0, 2.0)},
    )
    assert v_reco == v_commit + 1
    with pytest.raises(ConflictError, match="already has a container 'reco'"):
        ready.add_containers(db, specs("r2", 20, schema_id, ("reco",)), SITE)
    assert ready.version() == v_reco

    newer = (
        ContainerSpec(
            "reco", f"{DATASET}/r2/reco.parquet", "crc32c:0000beef", 77, (20,), schema_id
        ),
    )
    v_replace = ready.add_containers(db, newer, SITE, replace=True, tag_stats={"ht": (31.0, 41.0)})
    old_paths = {c.name: c.path for c in ready.database(db, v_reco).containers}
    new_paths = {c.name: c.path for c in ready.database(db, v_replace).containers}
    assert "reco" not in {c.name for c in ready.database(db, v_commit).containers}
    assert old_paths["reco"] == f"{DATASET}/r1/reco.parquet"
    assert new_paths["reco"] == f"{DATASET}/r2/reco.parquet"
    assert ready.database(db, v_commit).tag_stats["ht"] == (12.5, 950.25)
    assert ready.database(db, v_reco).tag_stats["ht"] == (30.0, 40.0)
    assert ready.database(db).tag_stats == {
        "njets": (0.0, 7.0),
        "ht": (31.0, 41.0),
        "nmuons": (0.0, 2.0),
    }
    # the superseded file stays referenced until purged
    assert old_paths["reco"] in ready.container_paths()
    assert ready.purge_deleted(v_replace + 1) == [old_paths["reco"]]
    assert old_paths["reco"] not in ready.container_paths(SITE)
    assert ready.database(db).containers == ready.database(db, v_replace).containers


def test_add_containers_idempotency_key(ready: Catalog, make_commit: MakeCommit) -> None:
    schema_id = ready.dataset(DATASET).schema_id
    db = ready.commit_database(make_commit(20)).database_id
    new = specs("r", 20, schema_id, ("reco",))
    v = ready.add_containers(db, new, SITE, idempotency_key="reco-pass-1")
    assert ready.add_containers(db, new, SITE, idempotency_key="reco-pass-1") == v
    assert ready.version() == v


def test_add_containers_bulk_is_one_version(ready: Catalog, make_commit: MakeCommit) -> None:
    schema_id = ready.dataset(DATASET).schema_id
    dbs = [ready.commit_database(make_commit(10)).database_id for _ in range(5)]
    before = ready.version()
    items = [
        (db, specs(f"b{db}", 10, schema_id, ("reco", "tag.reco")), {"ht": (float(db), 99.0)})
        for db in dbs
    ]
    v = ready.add_containers_bulk(items, SITE)
    assert v == before + 1 == ready.version()
    for record in ready.databases(DATASET):
        assert {"reco", "tag.reco"} <= {c.name for c in record.containers}
        assert record.tag_stats["ht"] == (float(record.id), 99.0)
    assert all(len(d.containers) == 2 for d in ready.databases(DATASET, before))
    # one bad item refuses the whole pass
    with pytest.raises(ConflictError):
        ready.add_containers_bulk(
            [
                (dbs[0], specs("x", 10, schema_id, ("new",)), None),
                (dbs[1], specs("x", 10, schema_id, ("reco",)), None),
            ],
            SITE,
        )
    assert ready.version() == v
    assert "new" not in {c.name for c in ready.database(dbs[0]).containers}


def test_bad_commits_are_refused(ready: Catalog, make_commit: MakeCommit) -> None:
    schema_id = ready.dataset(DATASET).schema_id
    version = ready.version()
    with pytest.raises(NotFound, match="no dataset named 'qdc'; did you mean 'qcd'"):
        ready.commit_database(make_commit(dataset="qdc"))
    with pytest.raises(NotFound, match="no site named 'lokal'; did you mean 'local'"):
        ready.commit_database(make_commit(site="lokal"))
    with pytest.raises(
        CatalogError, match="holds 5 entries in its clusters but the database has 6"
    ):
        ready.commit_database(make_commit(6, containers=specs("a", 5, schema_id)))
    with pytest.raises(ConflictError, match="two containers named 'raw'"):
        ready.commit_database(make_commit(5, containers=specs("a", 5, schema_id, ("raw", "raw"))))
    with pytest.raises(NotFound, match="no schema with id 42"):
        ready.commit_database(make_commit(5, containers=specs("a", 5, 42)))
    with pytest.raises(CatalogError, match="JSON"):
        ready.commit_database(make_commit(5, parameters={"x": object()}))
    huge = ContainerSpec("raw", "qcd/huge.parquet", "crc32c:0", 2**64, (5,), schema_id)
    with pytest.raises(CatalogError, match="container 'raw' has size 18446744073709551616"):
        ready.commit_database(make_commit(5, containers=(huge,)))
    with pytest.raises(CatalogError, match="64 bits|out of range"):  # no raw driver error
        ready.commit_database(make_commit(5, parents=(2**64,)))
    with pytest.raises(NotFound, match="no database 404"):
        ready.add_containers(404, specs("a", 5, schema_id, ("reco",)), SITE)
    with pytest.raises(NotFound, match="no database 404"):
        ready.database(404)
    assert ready.version() == version
    assert ready.databases(DATASET) == []


def test_names_conflict_and_close_matches(ready: Catalog) -> None:
    schema_id = ready.dataset(DATASET).schema_id
    with pytest.raises(ConflictError, match="dataset 'qcd' already exists"):
        ready.create_dataset(DATASET, schema_id)
    with pytest.raises(ConflictError, match="site 'local' already exists"):
        ready.add_site(SITE, "file:///elsewhere")
    with pytest.raises(NotFound, match="no dataset named 'qcd_mulitjet'") as info:
        ready.dataset("qcd_mulitjet")
    assert "did you mean 'qcd'" in str(info.value)
    with pytest.raises(NotFound, match=r"no dataset named 'zzz'$"):
        ready.databases("zzz")
    with pytest.raises(NotFound):
        ready.dataset_summary("zzz")
    with pytest.raises(NotFound, match="no schema with id 77"):
        ready.create_dataset("other", 77)
    with pytest.raises(ConfigError):
        ready.create_dataset("", schema_id)


def test_setting_the_state_a_replica_has_changes_nothing(ready: Catalog, make_commit: MakeCommit) -> None:
    ready.add_site("cern", "https://giod.cern.ch", distance=10)
    container = ready.database(ready.commit_database(make_commit(10)).database_id).containers[0]
    version = ready.version()
    ready.set_replica_state(container.id, SITE, "good")
    assert ready.version() == version
    ready.set_replica_state(container.id, "cern", "copying")  # a new replica is a change
    ready.set_replica_state(container.id, SITE, "bad")
    assert ready.version() == version + 2
    for _ in range(3):
        ready.set_replica_state(container.id, SITE, "bad")
        ready.set_replica_state(container.id, "cern", "copying")
    assert ready.version() == version + 2
    assert [(s.name, st) for s, st in ready.replicas(container.id)] == [(SITE, "bad"), ("cern", "copying")]


def test_remove_site(ready: Catalog, make_commit: MakeCommit) -> None:
    ready.add_site("cern", "https://giod.cern.ch", distance=10)
    ready.add_site("empty", "file:///srv/empty", distance=20)
    held = ready.database(ready.commit_database(make_commit(10)).database_id).containers
    container = held[0]
    ready.set_replica_state(container.id, "cern", "good")
    with pytest.raises(NotFound, match="no site named 'nowhere'"):
        ready.remove_site("nowhere")
    version = ready.version()
    assert ready.remove_site("empty") == version + 1
    with pytest.raises(ConflictError, match="site cern still has 1 replicas"):
        ready.remove_site("cern")
    rule = ready.add_rule(DATASET, 1, ["cern"])
    with pytest.raises(ConflictError, match=f"rule {rule.id} names site cern"):
        ready.remove_site("cern", force=True)
    ready.remove_rule(rule.id)
    assert ready.remove_site("cern", force=True) == version + 2
    assert [s.name for s, _ in ready.replicas(container.id)] == [SITE]
    with pytest.raises(ConflictError, match=f"site {SITE} holds the only good copy of {len(held)} containers"):
        ready.remove_site(SITE, force=True)
    for c in held:
        ready.set_replica_state(c.id, SITE, "lost")  # nothing good is left to lose
    ready.remove_site(SITE, force=True)
    assert [s.name for s in ready.sites()] == [] and ready.version() == version + 3 + len(held)


def test_sites_and_replicas(ready: Catalog, make_commit: MakeCommit) -> None:
    far = ready.add_site("cern", "https://giod.cern.ch", distance=10)
    near = ready.add_site("desk", "file:///home/data", distance=-1)
    assert [s.name for s in ready.sites()] == ["desk", SITE, "cern"]
    assert ready.site("cern") == far
    db = ready.commit_database(make_commit(10)).database_id
    container = ready.database(db).containers[0]
    ready.set_replica_state(container.id, "cern", "copying")
    ready.set_replica_state(container.id, "desk", "good")
    states = ready.replicas(container.id)
    assert [(s.name, st) for s, st in states] == [
        ("desk", "good"),
        (SITE, "good"),
        ("cern", "copying"),
    ]
    assert ready.database(db).container(container.name).site_ids == tuple(
        sorted((ready.site(SITE).id, near.id))
    )
    ready.set_replica_state(container.id, "cern", "good")
    ready.set_replica_state(container.id, SITE, "lost")
    assert set(ready.database(db).containers[0].site_ids) == {far.id, near.id}
    assert container.path in ready.container_paths("cern")
    assert ready.container_paths("desk") == {container.path}
    with pytest.raises(ConfigError, match="'broken' is not one of"):
        ready.set_replica_state(container.id, SITE, "broken")
    with pytest.raises(NotFound, match="no container 999"):
        ready.set_replica_state(999, SITE, "bad")
    with pytest.raises(NotFound, match="no container 999"):
        ready.replicas(999)
    with pytest.raises(NotFound, match="did you mean 'cern'"):
        ready.container_paths("cerm")


def test_delete_database_then_purge(ready: Catalog, make_commit: MakeCommit) -> None:
    keep = ready.commit_database(make_commit(10))
    drop = ready.commit_database(make_commit(10))
    paths = {c.path for c in ready.database(drop.database_id).containers}
    v = ready.delete_database(drop.database_id)
    assert [d.id for d in ready.databases(DATASET)] == [keep.database_id]
    assert [d.id for d in ready.databases(DATASET, v - 1)] == [keep.database_id, drop.database_id]
    with pytest.raises(NotFound):
        ready.delete_database(drop.database_id)
    assert paths <= ready.container_paths()
    assert ready.purge_deleted(v) == []  # deleted at v: not before v
    assert ready.version() == v
    assert sorted(ready.purge_deleted(v + 1)) == sorted(paths)
    assert ready.version() == v + 1
    assert not paths & ready.container_paths()
    assert ready.dataset_summary(DATASET)["n_databases"] == 1


def test_delete_and_recreate_dataset(ready: Catalog, make_commit: MakeCommit) -> None:
    schema_id = ready.dataset(DATASET).schema_id
    old = ready.commit_database(make_commit(10))
    v = ready.delete_dataset(DATASET)
    with pytest.raises(NotFound):
        ready.dataset(DATASET)
    with pytest.raises(NotFound):
        ready.database(old.database_id)
    again = ready.create_dataset(DATASET, schema_id)
    assert again.id != ready.dataset(DATASET, v - 1).id
    assert ready.commit_database(make_commit(3)).first_entry == 0
    assert [d.n_events for d in ready.databases(DATASET, v - 1)] == [10]
    assert [d.n_events for d in ready.databases(DATASET)] == [3]
    assert [d.name for d in ready.datasets(v)] == []
    assert len(ready.purge_deleted(ready.version())) == len(make_commit().containers)
    with pytest.raises(NotFound):
        ready.dataset(DATASET, v - 1)


def test_schema_history_follows_versions(ready: Catalog) -> None:
    old = ready.dataset(DATASET)
    new_schema = ready.add_schema("events", "collections: {jets: {}}\n", "sha256:events-v2")
    v = ready.set_dataset_schema(DATASET, new_schema)
    assert ready.dataset(DATASET).schema_id == new_schema
    assert ready.dataset(DATASET, v - 1).schema_id == old.schema_id
    assert [d.schema_id for d in ready.datasets(v - 1)] == [old.schema_id]
    with pytest.raises(NotFound):
        ready.set_dataset_schema(DATASET, 999)


def test_non_finite_tag_stats_read_as_unbounded(ready: Catalog, make_commit: MakeCommit) -> None:
    stats = {"a": (math.nan, 3.0), "b": (-math.inf, math.inf), "c": (1.0, math.nan)}
    db = ready.commit_database(make_commit(5, tag_stats=stats)).database_id
    assert ready.database(db).tag_stats == {
        "a": (-math.inf, 3.0),
        "b": (-math.inf, math.inf),
        "c": (1.0, math.inf),
    }


finite = st.floats(allow_nan=False, allow_infinity=False)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    bounds=st.dictionaries(
        st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True),
        st.tuples(finite, finite),
        max_size=6,
    )
)
@example(bounds={"a": (1e308, -1e308)})  # min above max, past a float apart: refused before level 18
def test_tag_stats_round_trip_exactly(
    ready: Catalog, make_commit: MakeCommit, bounds: dict[str, tuple[float, float]]
) -> None:
    db = ready.commit_database(make_commit(3, tag_stats=bounds)).database_id
    assert ready.database(db).tag_stats == bounds


def test_a_driver_error_in_a_commit_is_one_giod_error(
    ready: Catalog, make_commit: MakeCommit
) -> None:
    """An error the database raises half-way through the commit path (here a trigger
    refusing tag statistics) rolls the whole commit back and surfaces as one line."""
    with ready._engine.begin() as conn:
        if ready.dialect == "sqlite":
            conn.exec_driver_sql(
                "CREATE TRIGGER refuse BEFORE INSERT ON tag_stats "
                "BEGIN SELECT RAISE(ABORT, 'tag statistics are frozen'); END"
            )
        else:
            conn.exec_driver_sql(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'tag statistics are frozen'; END $$"
            )
            conn.exec_driver_sql(
                "CREATE TRIGGER refuse BEFORE INSERT ON tag_stats "
                "FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
    version = ready.version()
    with pytest.raises((ConflictError, CatalogError), match="tag statistics are frozen") as info:
        ready.commit_database(make_commit(5))
    assert "\n" not in str(info.value)
    db = ready.commit_database(make_commit(5, tag_stats={}))  # nothing for the trigger
    with pytest.raises((ConflictError, CatalogError), match="tag statistics are frozen"):
        ready.add_containers(db.database_id, (), SITE, tag_stats={"ht": (1.0, 2.0)})
    assert ready.version() == version + 1
    assert [d.id for d in ready.databases(DATASET)] == [db.database_id]
    assert ready.database(db.database_id).tag_stats == {}
