"""Names and container paths are checked where the catalog creates them; older names keep working."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import pytest
from catalog_samples import DATASET, SITE, specs
from sqlalchemy import insert

from giod.catalog import Catalog, DatabaseCommit
from giod.catalog.tables import dataset_schemas, datasets
from giod.errors import CatalogError, ConfigError, ConflictError

MakeCommit = Callable[..., DatabaseCommit]

BAD_NAMES = ["", "alpha/sub", "..", ".hidden", "a" * 129, "q\u0441d", "qcd\u202e", "qcd\n"]
ESCAPES = [f"{DATASET}/../other/x/raw.parquet", "other/x/raw.parquet", f"/{DATASET}/x/raw.parquet",
           f"{DATASET}/./x/raw.parquet", f"{DATASET}//raw.parquet", f"{DATASET}\\..\\x", DATASET,
           f"{DATASET}x/raw.parquet"]


def older_dataset(catalog: Catalog, name: str, schema_id: int) -> None:
    """A dataset whose name predates the name grammar, as an older giod stored it."""
    v = catalog.version()

    def work(conn):
        new = conn.execute(insert(datasets).values(name=name, schema_id=schema_id, created_version=v,
                                                   next_entry=0, created=time.time())
                           .returning(datasets.c.id)).scalar_one()
        conn.execute(insert(dataset_schemas).values(dataset_id=new, version=v, schema_id=schema_id))

    catalog._run(work, write=True)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_names_are_refused_at_creation(ready: Catalog, name: str) -> None:
    schema_id = ready.dataset(DATASET).schema_id
    v = ready.version()
    with pytest.raises(ConfigError, match="invalid dataset name"):
        ready.create_dataset(name, schema_id)
    with pytest.raises(ConfigError, match="invalid site name"):
        ready.add_site(name, "file:///srv/elsewhere")
    with pytest.raises(ConfigError, match="invalid dataset name|needs a name"):
        ready.create_token("read", name)
    if name.strip() == name:  # a rule strips the names it is given
        with pytest.raises(ConfigError, match="invalid container name|non-empty names"):
            ready.add_rule(DATASET, 1, containers=["tag", name])
    assert ready.version() == v
    assert [d.name for d in ready.datasets()] == [DATASET]
    assert [s.name for s in ready.sites()] == [SITE]
    assert ready.tokens() == [] and ready.rules() == []


@pytest.mark.parametrize("path", ESCAPES)
def test_a_commit_cannot_register_a_path_outside_its_dataset(ready: Catalog, make_commit: MakeCommit,
                                                              path: str) -> None:
    good = make_commit(10)
    db = ready.commit_database(good).database_id
    v = ready.version()
    bad = replace(good.containers[0], path=path)
    with pytest.raises(CatalogError, match="container path"):
        ready.commit_database(replace(good, containers=(bad, *good.containers[1:]), idempotency_key=None))
    reco = replace(bad, name="reco")
    with pytest.raises(CatalogError, match="container path"):
        ready.add_containers(db, (reco,), SITE)
    second = ready.commit_database(make_commit(10)).database_id
    v = ready.version()
    with pytest.raises(CatalogError, match="container path"):  # several databases: the other query
        ready.add_containers_bulk([(second, specs("ok", 10, reco.schema_id, ("reco",)), None),
                                   (db, (reco,), None)], SITE)
    assert ready.version() == v
    assert all(c.path.startswith(f"{DATASET}/w") for d in ready.databases(DATASET) for c in d.containers)


def test_datasets_named_before_the_grammar_keep_working(ready: Catalog, make_commit: MakeCommit) -> None:
    schema_id = ready.dataset(DATASET).schema_id
    older_dataset(ready, "alpha/sub", schema_id)
    assert "alpha/sub" in [d.name for d in ready.datasets()]
    # read, written to under its own directory, and given tokens, but never created again
    commit = make_commit(10, dataset="alpha/sub", containers=tuple(
        replace(c, path=c.path.replace(f"{DATASET}/", "alpha/sub/", 1)) for c in specs("o", 10, schema_id)))
    db = ready.commit_database(commit).database_id
    assert [d.id for d in ready.databases("alpha/sub")] == [db]
    with pytest.raises(CatalogError, match="container path"):
        ready.commit_database(replace(commit, containers=(replace(commit.containers[0], path="alpha/x/r.parquet"),)))
    record, _ = ready.create_token("read", "alpha/sub")
    assert record.dataset == "alpha/sub"
    with pytest.raises(ConfigError, match="invalid dataset name"):
        ready.create_token("read", "alpha/other")  # not a dataset: a new name, held to the grammar
    ready.delete_dataset("alpha/sub")
    with pytest.raises(ConfigError, match="invalid dataset name"):
        ready.create_dataset("alpha/sub", schema_id)


def test_names_that_differ_only_in_case_are_refused(ready: Catalog) -> None:
    """On a case-insensitive file system QCD's files would land in qcd's directory."""
    schema_id = ready.dataset(DATASET).schema_id
    for twin in (DATASET.upper(), "Qcd"):
        with pytest.raises(ConflictError, match="only in case"):
            ready.create_dataset(twin, schema_id)
    ready.delete_dataset(DATASET)
    with pytest.raises(ConflictError, match="only in case"):  # its files stay until gc
        ready.create_dataset("QCD", schema_id)
    assert ready.create_dataset(DATASET, schema_id).name == DATASET  # the same name again is fine
