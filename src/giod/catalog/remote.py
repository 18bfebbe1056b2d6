"""A catalog that speaks to a giod server: the same methods as ``Catalog``, over HTTP.

``giod.open("http://host:port", token=…)`` puts this catalog under a
``Federation``, so everything above works unchanged on a remote federation.
Sites come back with URLs under the server (``…/files/<site>``): container
files are read and written through it. Writes go through the server's
commit call, which runs the same single catalog transaction as a local
commit.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from giod.catalog import wire
from giod.catalog.leases import LeaseRecord
from giod.catalog.protocol import MAX_KEYS
from giod.catalog.records import (
    Bounds,
    CommitResult,
    ContainerSpec,
    DatabaseCommit,
    DatabaseRecord,
    DatabaseRow,
    DatasetRecord,
    ReplicaRecord,
    RuleRecord,
    SchemaRecord,
    SiteRecord,
    TokenRecord,
    VersionRecord,
    overlaps,
)
from giod.catalog.rows import BadRow
from giod.errors import CatalogError, ConfigError, GiodError, NotFound, StorageError
from giod.names import check_container_path, check_name, dataset_of_path, is_name
from giod.storage.container import check_dataset_format
from giod.storage.http import Endpoint, Limits, connect

__all__ = ["RemoteCatalog"]

API = "/api/v1"
VERSION_SECONDS = 1.0  # a current version the server reported is reused this long (others' commits lag by it)
SITES_SECONDS = 5.0  # a site list is reused this long (sites are rarely added; a new one is seen after it)
SNAPSHOT_DATABASES = 2_000  # databases of the datasets' snapshots the open asks to come with it, at most


def pa_is_int64(t: Any) -> bool:
    import pyarrow as pa

    return bool(t == pa.int64())


def _q(version: int | None = None, **more: Any) -> str:
    params = {k: v for k, v in {"version": version, **more}.items() if v is not None}
    return "?" + urlencode(params) if params else ""


_got = wire.got


def _int(value: Any, what: str) -> int:
    return int(wire.checked(value, "int", what))


def _text(value: Any, what: str) -> str:
    return str(wire.checked(value, "str", what))


def _list(value: Any, what: str) -> list[Any]:
    return list(wire.checked(value, "list", what))


class RemoteCatalog:
    """The catalog of a federation served by ``giod serve``."""

    dialect = "remote"
    sqlite = False

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self.url = endpoint.base
        # versions never change once committed: what was seen at a version is kept
        self._schemas: dict[int, SchemaRecord] = {}
        self._datasets: dict[tuple[str, int], DatasetRecord] = {}
        self._databases: dict[tuple[str, int], list[DatabaseRecord]] = {}
        self._sites: tuple[float, list[SiteRecord]] | None = None  # (when listed, sites): briefly kept
        self._seen: tuple[float, int] | None = None  # (when, version) last reported by the server
        self.nearline_sites: frozenset[str] | None = None  # the server's sites on tape (None: not told)
        self._no_select = False  # the server makes no selections at the source (an older level)

    @classmethod
    def open(cls, url: str, *, token: str | None = None, verify: bool | str = True) -> RemoteCatalog:
        """Connect to the server at ``url``; AuthError if the token is refused."""
        cat = cls(connect(url, token, verify=verify))
        # connections for the data open while the catalog is asked; opened before the first request, not
        # after it, so that no warming borrows its connection from the next catalog call (far away, a
        # fresh connection costs a round trip more)
        cat.endpoint.warm()
        # the datasets' snapshots come with the open (a server of an older level leaves them out), so that
        # opening a dataset right after costs no round trip
        doc = cat.endpoint.json("GET", f"{API}/federation?snapshots={SNAPSHOT_DATABASES}",
                                what=f"opening {cat.url}")
        if isinstance(doc, dict) and isinstance(doc.get("sites"), list):
            cat._keep_sites(doc["sites"])
            v = cat._saw(_int(doc.get("version", 0), "the version"))
            snapshots = doc.get("snapshots")
            for name, snap in (snapshots.items() if isinstance(snapshots, dict) else ()):
                cat._keep_snapshot(str(name), v, snap)
        if isinstance(doc, dict) and isinstance(doc.get("nearline"), list):
            cat.nearline_sites = frozenset(n for n in doc["nearline"] if isinstance(n, str))
        bounds = doc.get("limits") if isinstance(doc, dict) else None
        if isinstance(bounds, dict):
            cat.endpoint.limits = Limits.from_headers({f"x-giod-{k.replace('_', '-')}": v for k, v in bounds.items()})
        return cat

    def credentials(self) -> tuple[str | None, bool | str]:
        """The token and TLS setting a worker needs to reach the same server."""
        return self.endpoint.token, self.endpoint.verify

    def close(self) -> None:
        """Nothing to release: connections belong to the endpoint, shared by its sites."""

    def _get(self, path: str) -> Any:
        return self.endpoint.json("GET", API + path)

    def _post(self, path: str, payload: Any, *, idempotent: bool = False) -> Any:
        return self._write("POST", path, payload, idempotent=idempotent)

    def _write(self, method: str, path: str, payload: Any = None, *, idempotent: bool = False) -> Any:
        self._seen = None  # the write makes a new version: the next version() asks
        return self.endpoint.json(method, API + path, payload, idempotent=idempotent)

    # -- versions and schemas -------------------------------------------------

    def version(self) -> int:
        """The current version; one the server reported less than ``VERSION_SECONDS`` ago is reused.

        So a dataset opened and selected at once costs one round trip, not
        two. Writes made through this catalog are always seen: they forget the
        reused version.
        """
        if self._seen is not None and time.monotonic() - self._seen[0] < VERSION_SECONDS:
            return self._seen[1]
        return self.fresh_version()

    def fresh_version(self) -> int:
        """The current version as the server says now (a change feed's event is only a hint of it)."""
        return self._saw(_int(_got(self._get("/federation"), "version"), "the version"))

    def _saw(self, version: int) -> int:
        self._seen = (time.monotonic(), version)
        return version

    def versions(self, limit: int = 100) -> list[VersionRecord]:
        return wire.load_many(VersionRecord, self._get(f"/versions{_q(limit=limit)}"))

    def add_schema(self, name: str, text: str, fingerprint: str) -> int:
        doc = self._post("/schemas", {"name": name, "text": text, "fingerprint": fingerprint}, idempotent=True)
        return _int(_got(doc, "id"), "the schema's id")

    def schema(self, schema_id: int) -> SchemaRecord:
        if schema_id not in self._schemas:  # schemas never change once registered
            self._schemas[schema_id] = wire.load(SchemaRecord, self._get(f"/schemas/{int(schema_id)}"))
        return self._schemas[schema_id]

    # -- datasets --------------------------------------------------------------

    def create_dataset(self, name: str, schema_id: int, container_format: str | None = None) -> DatasetRecord:
        check_name(name, "dataset")  # the server checks too; a bad name need not cross the link
        check_dataset_format(container_format)
        body: dict[str, Any] = {"name": name, "schema_id": schema_id}
        if container_format is not None:  # a server of an older level knows no such field
            body["container_format"] = container_format
        return wire.load(DatasetRecord, self._post("/datasets", body))

    def _recent(self, version: int | None) -> int | None:
        """``version``, or for None the current version when one was reported just now."""
        if version is None and self._seen is not None and time.monotonic() - self._seen[0] < VERSION_SECONDS:
            return self._seen[1]
        return version

    def dataset(self, name: str, version: int | None = None) -> DatasetRecord:
        v = self._recent(version)
        if v is not None and (name, v) in self._datasets:
            return self._datasets[(name, v)]
        return self._snapshot(name, version)

    def _snapshot(self, name: str, version: int | None) -> DatasetRecord:
        """Record, schema, databases and sites of a dataset at a version, in one round trip."""
        try:
            doc = self._get(f"/datasets/{quote(name, safe='')}/snapshot{_q(version)}")
        except NotFound:
            if is_name(name):
                raise
            # a name off the grammar ('a/b') matches no route of the server: say what a local catalog says
            raise NotFound(f"no dataset named {name!r}") from None
        try:
            v = _int(_got(doc, "version"), "the version")
            if version is None:
                self._saw(v)
            self._keep_sites(doc["sites"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CatalogError(f"malformed snapshot of {name} from {self.url}: {exc}") from exc
        return self._keep_snapshot(name, v, doc)

    def _keep_snapshot(self, name: str, version: int, doc: Any) -> DatasetRecord:
        """Keep a dataset's record, schema and databases at ``version`` from a snapshot the server sent."""
        try:
            rec = wire.load(DatasetRecord, doc["dataset"])
            schema = wire.load(SchemaRecord, doc["schema"])
            dbs = wire.load_many(DatabaseRecord, doc["databases"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CatalogError(f"malformed snapshot of {name} from {self.url}: {exc}") from exc
        if rec.name != name or rec.schema_id != schema.id:
            raise CatalogError(f"malformed snapshot of {name} from {self.url}: it holds dataset {rec.name}")
        self._schemas[schema.id] = schema
        self._datasets[(name, version)] = rec
        self._databases[(name, version)] = dbs
        return rec

    def datasets(self, version: int | None = None) -> list[DatasetRecord]:
        return wire.load_many(DatasetRecord, self._get(f"/datasets{_q(version)}"))

    def set_dataset_schema(self, name: str, schema_id: int) -> int:
        doc = self._write("PUT", f"/datasets/{quote(name, safe='')}/schema", {"schema_id": schema_id},
                          idempotent=True)
        return _int(_got(doc, "version"), "the version")

    def delete_dataset(self, name: str) -> int:
        return _int(_got(self._write("DELETE", f"/datasets/{quote(name, safe='')}", idempotent=True), "version"),
                    "the version")

    def dataset_summary(self, name: str, version: int | None = None) -> dict[str, int]:
        doc = self._get(f"/datasets/{quote(name, safe='')}/summary{_q(version)}")
        counts = {k: _int(_got(doc, k), k) for k in ("n_events", "n_databases", "bytes")}
        if min(counts.values()) < 0:
            raise CatalogError(f"malformed answer from the server: a negative count in the summary of {name}")
        return counts

    # -- sites -----------------------------------------------------------------

    def _through_server(self, rec: SiteRecord) -> SiteRecord:
        # the client reaches every site of the federation through the server
        return SiteRecord(rec.id, rec.name, f"{self.url}/files/{quote(rec.name, safe='')}", rec.distance)

    def _keep_sites(self, docs: Any) -> list[SiteRecord]:
        found = [self._through_server(s) for s in wire.load_many(SiteRecord, docs)]
        self._sites = (time.monotonic(), found)
        return found

    def add_site(self, name: str, url: str, distance: int = 0) -> SiteRecord:
        check_name(name, "site")
        self._sites = None
        rec = wire.load(SiteRecord, self._post("/sites", {"name": name, "url": url, "distance": distance}))
        return self._through_server(rec)

    def site(self, name: str) -> SiteRecord:
        for s in self.sites():
            if s.name == name:
                return s
        return self._through_server(wire.load(SiteRecord, self._get(f"/sites/{quote(name, safe='')}")))

    def sites(self) -> list[SiteRecord]:
        if self._sites is not None and time.monotonic() - self._sites[0] < SITES_SECONDS:
            return list(self._sites[1])
        return list(self._keep_sites(self._get("/sites")))

    def replicas(self, container_id: int) -> list[tuple[SiteRecord, str]]:
        doc = self._get(f"/containers/{int(container_id)}/replicas")
        return [(self._through_server(wire.load(SiteRecord, _got(d, "site"))), _text(_got(d, "state"), "a state"))
                for d in _list(doc, "the replicas")]

    def set_replica_state(self, container_id: int, site: str, state: str) -> None:
        self._write("PUT", f"/containers/{int(container_id)}/replicas/{quote(site, safe='')}", {"state": state},
                    idempotent=True)

    # -- databases -------------------------------------------------------------

    def databases(self, dataset: str, version: int | None = None, *, overlapping: Bounds | None = None,
                  changed_since: int | None = None, keys: Sequence[str] | None = None) -> list[DatabaseRecord]:
        wanted = None if keys is None else set(keys)
        if changed_since is not None or (wanted is not None and len(wanted) <= MAX_KEYS):
            # what changed, or a few keys: the server filters (a follower's pass need not fetch the dataset)
            params: list[tuple[str, Any]] = [("version", version)] if version is not None else []
            params += [("since", changed_since)] if changed_since is not None else []
            params += [("key", k) for k in sorted(wanted)] if wanted is not None and len(wanted) <= MAX_KEYS else []
            found = wire.load_many(DatabaseRecord, self._get(f"/datasets/{quote(dataset, safe='')}/databases?"
                                                             f"{urlencode(params)}"))
        else:
            v = self._recent(version)
            if v is not None and (dataset, v) in self._databases:
                found = list(self._databases[(dataset, v)])
            else:  # the server sends the whole snapshot (one round trip, cached)
                found = wire.load_many(DatabaseRecord,
                                       self._get(f"/datasets/{quote(dataset, safe='')}/databases{_q(version)}"))
        if wanted is not None:  # (also what the server filtered: an empty key list sends none)
            found = [db for db in found if db.idempotency_key in wanted]
        # pruned here by the catalog's rule
        return [db for db in found if overlaps(db.tag_stats, overlapping)] if overlapping else found
        if v is not None and (dataset, v) in self._databases:
            found = list(self._databases[(dataset, v)])
        else:
            found = wire.load_many(DatabaseRecord,
                                   self._get(f"/datasets/{quote(dataset, safe='')}/databases{_q(version)}"))
        if keys is not None:  # more keys than a request carries: the whole snapshot, kept here
            wanted = set(keys)
            found = [db for db in found if db.idempotency_key in wanted]
        # the server sends the whole snapshot (one round trip, cached); pruned here by the same rule
        return [db for db in found if overlaps(db.tag_stats, overlapping)] if overlapping else found

    def database(self, database_id: int, version: int | None = None) -> DatabaseRecord:
        return wire.load(DatabaseRecord, self._get(f"/databases/{int(database_id)}{_q(version)}"))

    # the server sends a snapshot whole (one round trip, cached): these read it

    def iter_databases(self, dataset: str, version: int | None = None, *, chunk: int = 5_000
                       ) -> Iterator[DatabaseRecord]:
        return iter(self.databases(dataset, version))

    def database_rows(self, dataset: str, version: int | None = None) -> Iterator[DatabaseRow]:
        for db in self.databases(dataset, version):
            yield DatabaseRow(db.id, db.first_entry, db.n_events, db.bytes, db.created_version, db.program,
                              ",".join(c.name for c in db.containers))

    def database_at(self, dataset: str, entry: int, version: int | None = None) -> DatabaseRecord:
        for db in self.databases(dataset, version):
            if db.first_entry <= entry < db.stop_entry:
                return db
        raise NotFound(f"dataset {dataset} has no entry {entry}")

    def commit_database(self, commit: DatabaseCommit, *, release_lease: int | None = None) -> CommitResult:
        for c in commit.containers:
            check_container_path(commit.dataset, c.path)
        # an idempotency key makes a retried commit land once; without one a retry could land twice
        doc = self._post("/commit", wire.dump(commit), idempotent=commit.idempotency_key is not None)
        if release_lease is not None:  # a request of its own here; a server away now: it expires by itself
            with contextlib.suppress(GiodError):
                self.release_lease(release_lease)
        return wire.load(CommitResult, doc)

    def add_containers(self, database_id: int, containers: Sequence[ContainerSpec], site: str, *,
                       tag_stats: Mapping[str, tuple[float, float]] | None = None, replace: bool = False,
                       idempotency_key: str | None = None) -> int:
        item = _add_item(database_id, containers, tag_stats)
        doc = self._post("/containers", {"items": [item], "site": site, "replace": replace,
                                         "idempotency_key": idempotency_key},
                         idempotent=idempotency_key is not None)
        return _int(_got(doc, "version"), "the version")

    def add_containers_bulk(self, items: Sequence[tuple[int, Sequence[ContainerSpec],
                                                        Mapping[str, tuple[float, float]] | None]],
                            site: str, *, replace: bool = False) -> int:
        doc = self._post("/containers", {"items": [_add_item(*item) for item in items], "site": site,
                                         "replace": replace, "idempotency_key": None})
        return _int(_got(doc, "version"), "the version")

    # -- writers' leases (not versioned: the cached version stays valid) --------------

    def take_lease(self, site: str, prefix: str, holder: str, seconds: float) -> LeaseRecord:
        doc = self.endpoint.json("POST", f"{API}/leases",
                                 {"site": site, "prefix": prefix, "holder": holder, "seconds": seconds})
        return LeaseRecord(_int(_got(doc, "id"), "the lease's id"), _text(_got(doc, "site"), "the site"),
                           _text(_got(doc, "prefix"), "the prefix"), _text(_got(doc, "holder"), "the holder"),
                           wire.time_of(_got(doc, "created"), "created"), wire.time_of(_got(doc, "expires"), "expires"))

    def renew_leases(self, ids: Iterable[int], seconds: float) -> set[int]:
        wanted = sorted({int(i) for i in ids})
        if not wanted:
            return set()
        # renewing twice is harmless: the request may be retried
        doc = self.endpoint.json("POST", f"{API}/leases/renew", {"ids": wanted, "seconds": seconds},
                                 idempotent=True)
        return {_int(i, "a lease's id") for i in _list(_got(doc, "renewed"), "the leases renewed")}

    def release_lease(self, lease_id: int) -> None:
        self.endpoint.json("DELETE", f"{API}/leases/{int(lease_id)}", idempotent=True)

    # -- server-side query ----------------------------------------------------------

    selects_at_source = True

    def select_at_source(self, dataset: str, where: str, version: int, *, columns: Sequence[str] | None = None,
                         read: bool = False) -> tuple[Any, dict[str, Any]] | None:
        """The server's plan of a selection at ``version``, as runs ``[start, stop)`` of entries (an (n, 2)
        array), and with ``read`` the stored tables of ``columns`` (one per container) of the events it
        selects: one request however many databases hold them. None when the server does not make them
        (a server of an older level, a federation with sites on tape: the client stages those first);
        ``TooLarge`` when the answer would be past the server's bound."""
        import numpy as np

        from giod.catalog import framed

        if self.nearline_sites or self._no_select:
            return None
        what = f"selection {where!r} on {dataset}"
        body = {"dataset": dataset, "where": where, "version": int(version),
                "columns": list(columns) if columns is not None else None, "read": bool(read)}
        try:
            r = self.endpoint.request("POST", f"{API}/select", body=json.dumps(body).encode(),
                                      headers={"content-type": "application/json"}, idempotent=True, what=what)
        except NotFound as exc:
            if str(exc) != f"{what}: not found":
                raise  # the server's own word (an unknown dataset), not a route it lacks
            self._no_select = True  # an older server: the client plans, as before
            return None
        tables = framed.decode(r.data, what)
        runs = tables.pop("", None)
        if runs is None or runs.column_names != ["start", "stop"] or runs.num_rows and (
                not all(pa_is_int64(t) for t in runs.schema.types) or runs.column(0).null_count
                or runs.column(1).null_count):
            raise CatalogError(f"{what}: the answer's runs are malformed")
        arr = np.stack([runs.column(0).to_numpy(), runs.column(1).to_numpy()], axis=1) if runs.num_rows \
            else np.zeros((0, 2), dtype=np.int64)
        return arr.astype(np.int64, copy=False), tables

    def query(self, dataset: str, where: str | None = None, columns: Sequence[str] | None = None,
              limit: int | None = None, version: int | None = None) -> Any:
        """The server's selection and projection, as a ``pyarrow.Table`` (computed where the data are)."""
        import pyarrow as pa

        batches = self.query_batches(dataset, where, columns, limit, version)
        schema = next(batches)
        return pa.Table.from_batches(list(batches), schema=schema)

    def query_batches(self, dataset: str, where: str | None = None, columns: Sequence[str] | None = None,
                      limit: int | None = None, version: int | None = None) -> Iterator[Any]:
        """The answer's ``pyarrow.Schema``, then its record batches as they arrive (none is held back)."""
        import pyarrow as pa
        import urllib3

        body = {"dataset": dataset, "where": where, "columns": list(columns) if columns is not None else None,
                "limit": limit, "version": version}
        what = f"query on {dataset}"
        r = self.endpoint.stream("POST", f"{API}/query", body=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"}, idempotent=True, what=what)
        whole = False
        try:
            try:
                reader = pa.ipc.open_stream(r)
                yield reader.schema
                for batch in reader:
                    batch.validate(full=True)  # offsets within their values: the IPC reader checks only sizes
                    yield batch
            except pa.ArrowException as exc:
                raise CatalogError(f"{what}: malformed answer: {exc}") from exc
            except (urllib3.exceptions.HTTPError, OSError) as exc:  # the answer was cut short
                raise StorageError(f"{what}: answer from {self.url} broken off: {exc}") from exc
            whole = True
        finally:
            if whole:
                r.release_conn()
            else:  # mid-answer: the connection cannot serve another request
                r.close()

    # -- abilities the server keeps to itself (see giod.catalog.protocol) -----------

    def leases(self, site: str | None = None, *, expired: bool = False) -> list[LeaseRecord]:
        """None to list: the server's leases guard the server's own sites, and its gc reads them there."""
        return []

    def drop_expired_leases(self) -> int:
        """Nothing dropped from here: the server's gc drops its expired leases."""
        return 0

    def mark_damaged(self, container_id: int, site: str) -> str:
        """``bad`` when another good replica exists, else ``lost``: two calls instead of one transaction."""
        others = [rec.name for rec, state in self.replicas(container_id) if state == "good" and rec.name != site]
        state = "bad" if others else "lost"
        self.set_replica_state(container_id, site, state)
        return state

    def replica_states(self, dataset: str | None = None) -> dict[int, list[ReplicaRecord]]:
        """The good replicas of the live containers (of ``dataset``), as the server's listing carries them."""
        names = {s.id: s.name for s in self.sites()}
        out: dict[int, list[ReplicaRecord]] = {}
        for name in [dataset] if dataset is not None else [d.name for d in self.datasets()]:
            for db in self.databases(name):
                for c in db.containers:
                    out[c.id] = [ReplicaRecord(c.id, names[i], "good", None) for i in c.site_ids if i in names]
        return out

    def replica_summary(self) -> dict[str, dict[str, tuple[int, int]]]:
        """No summary: the server counts replicas of every state only in its own catalog."""
        return {}

    def remove_site(self, name: str, *, force: bool = False) -> int:
        raise ConfigError("a site is removed with direct access to the catalog, not through a server")


    # -- maintenance: run where the catalog is, never through a server (see giod.catalog.protocol) --

    def commit_databases(self, commits: Sequence[DatabaseCommit]) -> list[CommitResult]:
        raise _unavailable("commit_databases")

    def container_paths(self, site: str | None = None) -> set[str]:
        raise _unavailable("container_paths")

    def deleted_paths(self, site: str | None = None, before_version: int | None = None) -> dict[str, int]:
        raise _unavailable("deleted_paths")

    def purge_deleted(self, before_version: int) -> list[str]:
        raise _unavailable("purge_deleted")

    def version_at(self, when: float) -> int:
        raise _unavailable("version_at")

    def version_created(self, version: int) -> float | None:
        raise _unavailable("version_created")

    def checksum_of(self, path: str) -> str | None:
        raise _unavailable("checksum_of")

    def dataset_names(self) -> set[str]:
        raise _unavailable("dataset_names")

    def dataset_versions(self, name: str, limit: int = 100, *, after: int | None = None) -> list[VersionRecord]:
        raise _unavailable("dataset_versions")

    def set_replica_states(self, items: Sequence[tuple[int, str, str]]) -> int:
        raise _unavailable("set_replica_states")

    def forget_replica(self, container_id: int, site: str) -> bool:
        raise _unavailable("forget_replica")

    def add_rule(self, dataset: str, copies: int, sites: Sequence[str] | None = None,
                 containers: Sequence[str] | None = None) -> RuleRecord:
        raise _unavailable("add_rule")

    def rules(self, dataset: str | None = None) -> list[RuleRecord]:
        raise _unavailable("rules")

    def remove_rule(self, rule_id: int) -> None:
        raise _unavailable("remove_rule")

    def create_token(self, scope: str, dataset: str | None = None, *, expires: float | None = None,
                     note: str = "") -> tuple[TokenRecord, str]:
        raise _unavailable("create_token")

    def tokens(self) -> list[TokenRecord]:
        raise _unavailable("tokens")

    def revoke_token(self, token_id: int) -> None:
        raise _unavailable("revoke_token")

    def remove_token(self, token_id: int) -> None:
        raise _unavailable("remove_token")

    def bad_rows(self) -> list[BadRow]:
        raise _unavailable("bad_rows")

    def tag_coverage(self, dataset: str, version: int | None = None) -> dict[str, tuple[int, float | None]]:
        raise _unavailable("tag_coverage")

    def rebuild_kept(self, dataset: str, summaries: Sequence[int] = ()) -> int:
        raise _unavailable("rebuild_kept")

    def verify_token(self, secret: str, *, now: float | None = None) -> TokenRecord:
        raise _unavailable("verify_token")

    # -- exchange between federations: the destination's cursors (see giod.exchange) --

    def exchange_cursor(self, key: str, dataset: str) -> int | None:
        found = _got(self._get(f"/exchange-cursors/{key}?{urlencode({'dataset': dataset})}"), "version")
        return None if found is None else _int(found, "the cursor's version")

    def forget_exchange_cursor(self, key: str, dataset: str) -> bool:
        target = f"{API}/exchange-cursors/{key}?{urlencode({'dataset': dataset})}"
        return _got(self.endpoint.json("DELETE", target, None, idempotent=True), "forgotten") is True

    def advance_exchange_cursor(self, key: str, source: str, dataset: str, version: int) -> int:
        body = {"source": source, "dataset": dataset, "version": version}
        doc = self.endpoint.json("PUT", f"{API}/exchange-cursors/{key}", body, idempotent=True)
        return _int(_got(doc, "version"), "the cursor's version")

    def __getattr__(self, name: str) -> Any:
        # anything else a SQL catalog has (migrations, ...) runs on the server's own catalog, not through it
        if name.startswith("_"):
            raise AttributeError(name)
        raise _unavailable(name)


class Unavailable(CatalogError, AttributeError):
    """A catalog method that only the server's own catalog has."""


def _unavailable(name: str) -> Unavailable:
    return Unavailable(f"{name}: not available through a remote catalog; run it where the catalog is")


def _add_item(database_id: int, containers: Sequence[ContainerSpec],
              tag_stats: Mapping[str, tuple[float, float]] | None) -> dict[str, Any]:
    for c in containers:
        # which dataset's directory it must lie in, the server checks: it knows the database's dataset
        check_container_path(dataset_of_path(c.path), c.path)
    stats = dict(tag_stats or {})
    return {"database_id": int(database_id), "containers": [wire.dump(c) for c in containers],
            "tag_stats": wire.dump_stats(stats)}
