"""The catalog API: federation, versions, schemas, datasets, databases, sites, replicas, commits.

A token restricted to one dataset sees only that dataset: listings leave the
others out, and an object of another dataset (a database, container, schema
or lease by id) is answered as an unknown one, with the same message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from giod.catalog import wire
from giod.catalog.protocol import MAX_KEYS
from giod.catalog.records import ContainerSpec, DatabaseCommit
from giod.errors import CatalogError, DataError, Forbidden, NotFound
from giod.names import check_container_path, check_name
from giod.server.auth import Caller
from giod.server.routes import files
from giod.server.state import need, state
from giod.storage.admission import check_files
from giod.store.expected import stored_relations, stored_schemas

router = APIRouter(prefix="/api/v1", tags=["catalog"])

Version = Query(None, ge=0, description="Federation version of the snapshot (default: the current one).")
Name = str


class SchemaIn(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=1 << 20)
    fingerprint: str = Field(min_length=1, max_length=200)


class DatasetIn(BaseModel):
    name: str = Field(description="A name of the name grammar (docs/security.md); any other is refused with 400")
    schema_id: int = Field(ge=1)
    container_format: str | None = Field(default=None, description="arrow or parquet: the format of every "
                                         "container of the dataset; absent: each writer's setting")


class SchemaChange(BaseModel):
    schema_id: int = Field(ge=1)


class SiteIn(BaseModel):
    name: str = Field(description="A name of the name grammar (docs/security.md); any other is refused with 400")
    url: str = Field(min_length=1, max_length=4096)
    distance: int = Field(0, ge=0, le=1_000_000)


class ReplicaState(BaseModel):
    state: str = Field(min_length=1, max_length=20)


class ContainersIn(BaseModel):
    items: list[dict[str, Any]] = Field(max_length=100_000)
    site: str = Field(min_length=1, max_length=200)
    replace: bool = False
    idempotency_key: str | None = Field(None, max_length=200)


MAX_LEASE_SECONDS = 86_400.0  # a lease term; a writer renews every third of it
MAX_LEASE_IDS = 1_000  # leases renewed by one request


class LeaseIn(BaseModel):
    site: str = Field(min_length=1, max_length=200)
    prefix: str = Field(min_length=2, max_length=1024)
    holder: str = Field("", max_length=200)
    seconds: float = Field(gt=0, le=MAX_LEASE_SECONDS)


class LeaseRenewal(BaseModel):
    ids: list[int] = Field(max_length=MAX_LEASE_IDS)
    seconds: float = Field(gt=0, le=MAX_LEASE_SECONDS)


def _catalog(request: Request) -> Any:
    return state(request).federation.catalog


def _site(rec: Any, caller: Any) -> dict[str, Any]:
    """A site as a caller may see it: where it lives on the server is for administrators only."""
    out = wire.dump(rec)
    if caller.token is None or caller.token.scope != "admin" or caller.token.dataset is not None:
        out["url"] = f"/files/{rec.name}"
    return out


def _dataset_of(request: Request, dataset_id: int, unknown: NotFound) -> str:
    """The name of a dataset by id; ``unknown`` (the answer for the object asked) when it is gone."""
    for d in _catalog(request).datasets():
        if d.id == dataset_id:
            return str(d.name)
    raise unknown


def _seen(caller: Caller, dataset: str, unknown: NotFound) -> None:
    """``unknown`` (the answer for an object that does not exist) when the caller may not see ``dataset``."""
    if not caller.sees(dataset):
        raise unknown


#: the most databases ``GET /federation?snapshots=N`` sends in all (a bound on the answer's size)
MAX_SNAPSHOT_DATABASES = 10_000


@router.get("/federation", summary="The federation: version, datasets, sites (and the datasets' snapshots)")
def federation(request: Request, snapshots: int = Query(
        0, ge=0, le=MAX_SNAPSHOT_DATABASES,
        description="Also the snapshot of each dataset at the version, as long as their databases number "
                    "at most this many in all (a far client opens and reads in one round trip less)")
        ) -> dict[str, Any]:
    caller = need(request, "read")
    cat = _catalog(request)
    v = cat.version()
    names = [d.name for d in cat.datasets(v) if caller.sees(d.name)]
    doc = {"version": v, "datasets": names, "sites": [_site(s, caller) for s in cat.sites()],
           "limits": vars(state(request).limits),
           # which sites are on tape, which a client cannot tell from /files/<site>: it stages before it reads
           "nearline": [s.name for s in cat.sites() if s.url.startswith("tape://")]}
    if snapshots:
        doc["snapshots"] = _snapshots(request, names, v, snapshots)
    return doc


def _snapshots(request: Request, names: Sequence[str], version: int, budget: int) -> dict[str, Any]:
    """The snapshots of the datasets ``names`` at ``version`` (as ``/snapshot`` answers them, sites aside)
    while their databases stay within ``budget``; a dataset beyond it is left to its own request."""
    cat = _catalog(request)
    store = state(request).federation.store
    out: dict[str, Any] = {}
    for name in names:
        # counted first (one index lookup): a dataset of a million databases is not listed to be left out
        if cat.dataset_summary(name, version)["n_databases"] > budget:
            continue
        dbs = store.snapshot_databases(name, version)
        if len(dbs) > budget:
            continue
        budget -= len(dbs)
        rec = cat.dataset(name, version)
        out[name] = {"dataset": wire.dump(rec), "schema": wire.dump(cat.schema(rec.schema_id)),
                     "databases": [wire.dump(d) for d in dbs]}
    return out


@router.get("/versions", summary="The latest versions, newest first")
def versions(request: Request, limit: int = Query(100, ge=1, le=10_000)) -> list[dict[str, Any]]:
    caller = need(request, "read")
    mine = caller.restricted
    if mine is not None:  # the log names datasets: a restricted token sees the versions that changed its own
        return [wire.dump(v) for v in _catalog(request).dataset_versions(mine, limit)]
    return [wire.dump(v) for v in _catalog(request).versions(limit)]


@router.post("/schemas", summary="Register a schema (idempotent by fingerprint)")
def add_schema(request: Request, body: SchemaIn) -> dict[str, Any]:
    need(request, "write", any_dataset=True)
    from giod.schema import Schema

    Schema.from_text(body.text)  # refuse a model that does not parse before it is registered
    return {"id": _catalog(request).add_schema(body.name, body.text, body.fingerprint)}


@router.get("/schemas/{schema_id}", summary="One schema: its YAML text and fingerprint")
def get_schema(request: Request, schema_id: int) -> dict[str, Any]:
    caller = need(request, "read")
    mine = caller.restricted
    # a schema is part of its datasets' data: a restricted token reads only its own dataset's schemas,
    # and another's is answered as an unknown id
    if mine is not None and mine not in _catalog(request).datasets_of_schema(schema_id):
        raise NotFound(f"no schema with id {schema_id}")
    return wire.dump(_catalog(request).schema(schema_id))


@router.get("/datasets", summary="Datasets at a version")
def datasets(request: Request, version: int | None = Version) -> list[dict[str, Any]]:
    caller = need(request, "read")
    return [wire.dump(d) for d in _catalog(request).datasets(version) if caller.sees(d.name)]


@router.post("/datasets", summary="Create a dataset")
def create_dataset(request: Request, body: DatasetIn) -> dict[str, Any]:
    caller = need(request, "write", any_dataset=True)
    check_name(body.name, "dataset")  # 400 before the token is judged on a name that cannot be created
    if not caller.sees(body.name):  # the same answer whether that dataset exists or not
        raise Forbidden(f"{caller.name} is restricted to dataset {caller.restricted!r}: it may create no other")
    need(request, "write", body.name)
    return wire.dump(_catalog(request).create_dataset(body.name, body.schema_id, body.container_format))


@router.get("/datasets/{name}", summary="One dataset")
def get_dataset(request: Request, name: Name, version: int | None = Version) -> dict[str, Any]:
    need(request, "read", name)
    return wire.dump(_catalog(request).dataset(name, version))


@router.put("/datasets/{name}/schema", summary="Evolve a dataset to a new schema")
def set_schema(request: Request, name: Name, body: SchemaChange) -> dict[str, Any]:
    need(request, "write", name)
    return {"version": _catalog(request).set_dataset_schema(name, body.schema_id)}


@router.delete("/datasets/{name}", summary="Delete a dataset (its files stay for old snapshots until gc)")
def delete_dataset(request: Request, name: Name) -> dict[str, Any]:
    need(request, "admin")
    return {"version": _catalog(request).delete_dataset(name)}


@router.get("/datasets/{name}/summary", summary="Events, databases and bytes of a dataset")
def summary(request: Request, name: Name, version: int | None = Version) -> dict[str, Any]:
    need(request, "read", name)
    return dict(_catalog(request).dataset_summary(name, version))


@router.get("/datasets/{name}/databases", summary="The databases of a dataset with their containers")
def databases(request: Request, name: Name, version: int | None = Version,
              since: int | None = Query(None, ge=-1, description="Only databases committed, or given a "
                                        "container, after this version."),
              key: list[str] | None = Query(None, description="Only databases committed with one of these "
                                            "idempotency keys (at most 1,000).")) -> list[dict[str, Any]]:
    need(request, "read", name)
    if key is not None and len(key) > MAX_KEYS:
        raise DataError(f"at most {MAX_KEYS} idempotency keys per request, not {len(key)}")
    if since is not None or key is not None:
        return [wire.dump(d) for d in _catalog(request).databases(name, version, changed_since=since, keys=key)]
    return [wire.dump(d) for d in state(request).federation.store.snapshot_databases(
        name, version if version is not None else _catalog(request).version())]


@router.get("/datasets/{name}/snapshot", summary="A dataset at a version in one answer")
def snapshot(request: Request, name: Name, version: int | None = Version) -> dict[str, Any]:
    """What a reader needs to start, in one round trip (the remote client opens with it)."""
    caller = need(request, "read", name)
    cat = _catalog(request)
    v = version if version is not None else cat.version()
    rec = cat.dataset(name, v)
    return {"version": v, "dataset": wire.dump(rec), "schema": wire.dump(cat.schema(rec.schema_id)),
            "databases": [wire.dump(d) for d in state(request).federation.store.snapshot_databases(name, v)],
            "sites": [_site(s, caller) for s in cat.sites()]}


@router.get("/databases/{database_id}", summary="One database with its containers")
def database(request: Request, database_id: int, version: int | None = Version) -> dict[str, Any]:
    caller = need(request, "read", any_dataset=True)
    rec = _catalog(request).database(database_id, version)
    unknown = NotFound(f"no database {database_id}{'' if version is None else f' at version {version}'}")
    if caller.restricted is not None:
        _seen(caller, _dataset_of(request, rec.dataset_id, unknown), unknown)
    return wire.dump(rec)


@router.get("/sites", summary="Sites, nearest first")
def sites(request: Request) -> list[dict[str, Any]]:
    caller = need(request, "read")
    return [_site(s, caller) for s in _catalog(request).sites()]


@router.get("/sites/{name}", summary="One site")
def site(request: Request, name: Name) -> dict[str, Any]:
    caller = need(request, "read")
    return _site(_catalog(request).site(name), caller)


@router.post("/sites", summary="Register a site")
def add_site(request: Request, body: SiteIn) -> dict[str, Any]:
    caller = need(request, "admin")
    check_name(body.name, "site")
    return _site(state(request).federation.add_site(body.name, body.url, body.distance), caller)


@router.get("/sites/{name}/files", summary="Every file on a site (for consistency checks)")
def site_files(request: Request, name: Name) -> dict[str, Any]:
    need(request, "admin")
    s = state(request).federation.site(name)
    return {"files": [{"path": f.path, "size": f.size, "mtime": f.mtime} for f in s.walk()]}


@router.get("/containers/{container_id}/replicas", summary="Copies of a container and their states")
def replicas(request: Request, container_id: int) -> list[dict[str, Any]]:
    caller = need(request, "read")
    if caller.restricted is not None:
        _seen(caller, _catalog(request).dataset_of_container(container_id), NotFound(f"no container {container_id}"))
    return [{"site": _site(s, caller), "state": st} for s, st in _catalog(request).replicas(container_id)]


@router.put("/containers/{container_id}/replicas/{site}", summary="Record the state of a copy")
def set_replica(request: Request, container_id: int, site: Name, body: ReplicaState) -> dict[str, Any]:
    who = need(request, "write", any_dataset=True)
    # a token for one dataset may mark only that dataset's copies: readers use only "good" ones
    if who.restricted is not None:
        _seen(who, _catalog(request).dataset_of_container(container_id), NotFound(f"no container {container_id}"))
    _catalog(request).set_replica_state(container_id, site, body.state)
    return {"ok": True}


@router.post("/commit", summary="Register a database, its containers and replica in one transaction")
def commit(request: Request, body: dict[str, Any]) -> dict[str, Any]:
    need(request, "write", any_dataset=True)  # who may write at all, before the body is looked at
    c = wire.load(DatabaseCommit, body)
    need(request, "write", c.dataset)
    _check_paths(request, c.dataset, [s.path for s in c.containers])
    _check_files(request, c.site, c.dataset, c.containers)
    return wire.dump(_catalog(request).commit_database(c))


@router.post("/containers", summary="Add containers to databases (a later pass) in one transaction")
def add_containers(request: Request, body: ContainersIn) -> dict[str, Any]:
    who = need(request, "write", any_dataset=True)  # also when no item names a database
    cat = _catalog(request)
    items = []
    for item in body.items:
        if not isinstance(item, dict) or "database_id" not in item:
            raise CatalogError("each item needs a database_id, containers and tag_stats")
        db = cat.database(int(item["database_id"]))
        unknown = NotFound(f"no database {db.id}")
        dataset = _dataset_of(request, db.dataset_id, unknown)
        _seen(who, dataset, unknown)
        need(request, "write", dataset)
        specs = [wire.load(ContainerSpec, c) for c in item.get("containers", [])]
        _check_paths(request, dataset, [s.path for s in specs])
        _check_files(request, body.site, dataset, specs)
        stats = wire.load_stats(item.get("tag_stats") or {})
        items.append((db.id, specs, stats))
    if body.idempotency_key is not None and len(items) == 1:
        v = cat.add_containers(items[0][0], items[0][1], body.site, tag_stats=items[0][2], replace=body.replace,
                               idempotency_key=body.idempotency_key)
    else:
        v = cat.add_containers_bulk(items, body.site, replace=body.replace)
    return {"version": v}


@router.post("/leases", summary="Take a writer's lease on the files under a path prefix at a site")
def take_lease(request: Request, body: LeaseIn) -> dict[str, Any]:
    need(request, "write", any_dataset=True)
    dataset = files.owner(state(request), body.prefix)
    need(request, "write", dataset)
    # a prefix is confined exactly as any file below it would be
    _check_paths(request, dataset, [body.prefix + "lease"])
    _catalog(request).site(body.site)  # NotFound for an unknown site
    rec = _catalog(request).take_lease(body.site, body.prefix, body.holder, body.seconds)
    return {"id": rec.id, "site": rec.site, "prefix": rec.prefix, "holder": rec.holder,
            "created": rec.created, "expires": rec.expires}


@router.post("/leases/renew", summary="Renew live leases; returns the ids renewed (an expired lease stays so)")
def renew_leases(request: Request, body: LeaseRenewal) -> dict[str, Any]:
    need(request, "write", any_dataset=True)
    mine = _leases_of(request, body.ids)
    return {"renewed": sorted(_catalog(request).renew_leases(mine, body.seconds))}


@router.delete("/leases/{lease_id}", summary="Release a lease (its files are registered or discarded)")
def release_lease(request: Request, lease_id: int) -> dict[str, Any]:
    need(request, "write", any_dataset=True)
    for lease_ids in (_leases_of(request, [lease_id], expired=True), _leases_of(request, [lease_id])):
        for i in lease_ids:
            _catalog(request).release_lease(i)
    return {"ok": True}


def _leases_of(request: Request, ids: list[int], *, expired: bool = False) -> list[int]:
    """The leases among ``ids`` on datasets the caller may write (Forbidden for one it may only read);
    a lease of a dataset the caller may not see is left out, as an unknown id is."""
    wanted = set(ids)
    caller = need(request, "write", any_dataset=True)
    st = state(request)
    found = [x for x in _catalog(request).leases(expired=expired)
             if x.id in wanted and caller.sees(files.owner(st, x.prefix))]
    for x in found:
        need(request, "write", files.owner(st, x.prefix))
    return [x.id for x in found]


def _check_files(request: Request, site: str, dataset: str, specs: Sequence[ContainerSpec]) -> None:
    """Uploaded files make sense before they are registered (their checksums prove only the transport)."""
    fed = state(request).federation
    check_files(fed.site(site), specs, stored_relations(fed.dataset(dataset).schema),
                stored_schemas(specs, fed.schema))


def _check_paths(request: Request, dataset: str, paths: list[str]) -> None:
    # files of a dataset live under its name: that is what file permissions go by (routes/files.py)
    for p in paths:
        check_container_path(dataset, p)
        if files.owner(state(request), p) != dataset:  # below an older dataset name with '/' inside this one's
            raise CatalogError(f"container path {p!r} lies in the directory of another dataset")
