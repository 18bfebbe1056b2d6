"""Provenance per container: who wrote each container, on both backends."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from catalog_samples import DATASET, SITE, specs

from giod.catalog import Catalog, ContainerSpec, DatabaseCommit
from giod.errors import CatalogError

MakeCommit = Callable[..., DatabaseCommit]


def _provenance(catalog: Catalog, database_id: int, version: int | None = None) -> dict:
    record = catalog.database(database_id, version)
    return {
        c.name: (c.program, c.program_version, c.parameters, c.created) for c in record.containers
    }


def test_commit_containers_take_the_database_provenance(
    ready: Catalog, make_commit: MakeCommit
) -> None:
    schema_id = ready.dataset(DATASET).schema_id
    raw, tag = specs("p", 8, schema_id)
    own = replace(tag, program="giod.tags", parameters={"cuts": [1, 2]})
    commit = make_commit(
        8,
        containers=(raw, own),
        program="giod.physics.simulate",
        program_version="2.1",
        parameters={"seed": 42, "pileup": 40},
    )
    result = ready.commit_database(commit)
    record = ready.database(result.database_id)
    shown = _provenance(ready, result.database_id)
    assert shown["raw.tracker"][:3] == ("giod.physics.simulate", "2.1", {"seed": 42, "pileup": 40})
    # each empty field falls back on its own: the version here comes from the database
    assert shown["tag"][:3] == ("giod.tags", "2.1", {"cuts": [1, 2]})
    assert {c.created for c in record.containers} == {record.created}


def test_a_later_pass_records_its_own_program(ready: Catalog, make_commit: MakeCommit) -> None:
    schema_id = ready.dataset(DATASET).schema_id
    db = ready.commit_database(make_commit(6, program="sim", program_version="1")).database_id
    v_sim = ready.version()
    reco = ContainerSpec(
        "reco", f"{DATASET}/r/reco.parquet", "crc32c:00000001", 10, (6,), schema_id,
        program="giod.physics.reconstruct", program_version="0.9",
        parameters={"jet_radius": 0.4, "algorithm": "anti-kt"},
    )  # fmt: skip
    v_reco = ready.add_containers(db, (reco,), SITE)
    shown = _provenance(ready, db)
    assert shown["reco"][:3] == ("giod.physics.reconstruct", "0.9", reco.parameters)
    assert shown["raw.tracker"][:2] == ("sim", "1")  # untouched by the pass
    assert shown["reco"][3] >= shown["raw.tracker"][3] > 0
    assert "reco" not in _provenance(ready, db, v_sim)

    again = replace(reco, path=f"{DATASET}/r2/reco.parquet", program_version="1.0")
    ready.add_containers_bulk([(db, (again,), None)], SITE, replace=True)
    assert _provenance(ready, db)["reco"][1] == "1.0"
    assert _provenance(ready, db, v_reco)["reco"][1] == "0.9"  # the snapshot keeps the old pass


def test_records_share_no_parameters(ready: Catalog, make_commit: MakeCommit) -> None:
    db = ready.commit_database(make_commit(4, parameters={"seed": 1})).database_id
    first, second = ready.database(db).containers
    first.parameters["seed"] = 99
    assert second.parameters == {"seed": 1}
    assert ready.database(db).containers[0].parameters == {"seed": 1}
    assert len({first, second}) == 2  # still hashable: parameters stay out of the hash


def test_container_parameters_must_be_json(ready: Catalog, make_commit: MakeCommit) -> None:
    schema_id = ready.dataset(DATASET).schema_id
    (bad,) = specs("j", 3, schema_id, ("reco",))
    bad = replace(bad, parameters={"fit": object()})
    version = ready.version()
    with pytest.raises(CatalogError, match="parameters of container 'reco' are not JSON"):
        ready.commit_database(make_commit(3, containers=(bad,)))
    db = ready.commit_database(make_commit(3)).database_id
    with pytest.raises(CatalogError, match="parameters of container 'reco' are not JSON"):
        ready.add_containers(db, (bad,), SITE)
    assert ready.version() == version + 1
