"""Names, paths and per-dataset tokens against a real server on loopback.

Two datasets, ``alpha`` and ``beta`` (with different schemas), and
``alpha/sub``, a dataset named before the name grammar existed, as an older
giod stored it. Every leak tried here is refused with the status
docs/security.md gives it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import insert

import giod
from giod.catalog import wire
from giod.catalog.records import ContainerSpec, DatabaseCommit
from giod.catalog.tables import dataset_schemas, datasets
from giod.cli import main
from giod.errors import CatalogError, ConfigError
from giod.schema import Schema
from giod.server.app import ServerThread, create_app
from giod.storage.checksum import checksum_bytes
from giod.testing import synthetic
from tests.server.test_security import call

OLD = "alpha/sub"  # a name from before the grammar
BAD_NAMES = ["alpha/sub2", "../beta", "..", ".hidden", "", "a" * 129, "a" * 5000, "\uff41lpha", "alph\u0430",
             "alpha\u202e", "alpha\u200b", "alpha\n", "a..b", "al pha"]


@dataclass
class World:
    url: str
    local: giod.Federation
    root: Path
    admin: str
    tokens: dict[tuple[str, str | None], str]
    files: dict[str, str]  # dataset -> one of its container files
    containers: dict[str, int]  # dataset -> one of its container ids
    schemas: dict[str, int]  # dataset -> its schema id

    def token(self, scope: str, dataset: str | None = None) -> str:
        key = (scope, dataset)
        if key not in self.tokens:
            self.tokens[key] = self.local.catalog.create_token(scope, dataset)[1]
        return self.tokens[key]


def older_dataset(fed: giod.Federation, name: str, schema_id: int) -> None:
    """A dataset row written as a giod without the name grammar wrote it."""
    v = fed.catalog.version()

    def work(conn):
        new = conn.execute(insert(datasets).values(name=name, schema_id=schema_id, created_version=v,
                                                   next_entry=0, created=time.time())
                           .returning(datasets.c.id)).scalar_one()
        conn.execute(insert(dataset_schemas).values(dataset_id=new, version=v, schema_id=schema_id))

    fed.catalog._run(work, write=True)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("names")
    local = giod.open(base / "fed", create=True)
    schema = synthetic.schema()
    other = Schema.from_text(schema.to_yaml().replace("name: synthetic", "name: synthetic_beta", 1))
    for name, model, seed in (("alpha", schema, 1), ("beta", other, 2)):
        ds = local.create_dataset(name, model)
        with ds.writer(database_events=100, cluster_events=50) as w:
            w.append(synthetic.events(100, seed=seed))
    older_dataset(local, OLD, local.dataset("alpha").schema_id)
    with local.dataset(OLD).writer(database_events=100, cluster_events=50) as w:
        w.append(synthetic.events(100, seed=3))
    root = Path(local.site("local").root).resolve()
    first = {n: local.catalog.databases(n)[0].containers[0] for n in ("alpha", "beta", OLD)}
    # links inside the site, from alpha's directory into beta's
    os.symlink(root / first["beta"].path, root / "alpha" / "stolen.parquet")
    os.symlink(root / "beta", root / "alpha" / "betadir")
    with ServerThread(create_app(str(base / "fed"))) as url:
        admin = local.catalog.create_token("admin")[1]
        yield World(url, local, root, admin, {}, {n: c.path for n, c in first.items()},
                    {n: c.id for n, c in first.items()}, {n: local.dataset(n).schema_id for n in ("alpha", "beta")})
    local.close()


def _get(w: World, target: str, token: str, method: str = "GET") -> int:
    return call(w.url, method, target, token, headers={"Range": "bytes=0-3"}).status


# --------------------------------------------------------------------------- files


def test_files_are_authorised_by_the_dataset_they_belong_to(world: World) -> None:
    w = world
    alpha, old = w.token("read", "alpha"), w.token("read", OLD)
    assert w.files[OLD].startswith(OLD + "/")
    for method in ("GET", "HEAD"):
        assert _get(w, f"/files/local/{w.files[OLD]}", alpha, method) == 404  # its first directory is alpha
        assert _get(w, f"/files/local/{w.files[OLD]}", old, method) in (200, 206)  # its own token reads it
        assert _get(w, f"/files/local/{w.files['alpha']}", old, method) == 404
        assert _get(w, f"/files/local/{w.files['alpha']}", alpha, method) in (200, 206)
    body = b"planted"
    put = call(w.url, "PUT", f"/files/local/{OLD}/planted.parquet", w.token("write", "alpha"), body=body,
               headers={"X-Giod-Checksum": "crc32c:00000000", "Content-Type": "application/octet-stream"})
    assert put.status == 404 and not (w.root / OLD / "planted.parquet").exists()


def test_links_into_another_dataset_are_not_followed_for_its_token(world: World) -> None:
    w = world
    alpha_reader, alpha_writer = w.token("read", "alpha"), w.token("write", "alpha")
    beta_file = w.files["beta"].split("/", 1)[1]
    for target in ("/files/local/alpha/stolen.parquet", f"/files/local/alpha/betadir/{beta_file}"):
        for method in ("GET", "HEAD"):
            a = call(w.url, method, target, alpha_reader, headers={"Range": "bytes=0-3"})
            # answered as a file that is not there: where the link leads is not told
            assert a.status == 404 and b"PAR1" not in a.body, (method, target, a.status)
        assert call(w.url, "DELETE", target, alpha_writer).status == 404
    planted = b"planted through a link"
    a = call(w.url, "PUT", "/files/local/alpha/betadir/planted.parquet", alpha_writer, body=planted,
             headers={"X-Giod-Checksum": checksum_bytes(planted), "Content-Type": "application/octet-stream"})
    assert a.status == 404 and not (w.root / "beta" / "planted.parquet").exists()
    assert (w.root / w.files["beta"]).exists() and (w.root / "alpha" / "stolen.parquet").is_symlink()
    # a token that covers both datasets follows the link; beta's token is not asked about alpha's paths
    assert _get(w, "/files/local/alpha/stolen.parquet", w.admin) == 206
    assert _get(w, "/files/local/alpha/stolen.parquet", w.token("read", "beta")) == 404


# --------------------------------------------------------------------------- catalog objects


def test_replicas_and_schemas_answer_only_for_their_datasets(world: World) -> None:
    w = world
    alpha, beta, everyone = w.token("read", "alpha"), w.token("read", "beta"), w.token("read")
    replicas = "/api/v1/containers/{}/replicas"
    # another dataset's container is answered as an unknown one
    assert call(w.url, "GET", replicas.format(w.containers["beta"]), alpha).status == 404
    assert call(w.url, "GET", replicas.format(w.containers[OLD]), alpha).status == 404
    assert call(w.url, "GET", replicas.format(w.containers["alpha"]), alpha).status == 200
    assert call(w.url, "GET", replicas.format(w.containers[OLD]), w.token("read", OLD)).status == 200
    assert call(w.url, "GET", replicas.format(w.containers["beta"]), everyone).status == 200
    assert call(w.url, "GET", replicas.format(10**9), alpha).status == 404
    schema = "/api/v1/schemas/{}"
    assert call(w.url, "GET", schema.format(w.schemas["beta"]), alpha).status == 404
    assert call(w.url, "GET", schema.format(w.schemas["alpha"]), beta).status == 404
    assert call(w.url, "GET", schema.format(10**9), alpha).status == 404  # the same answer as another's
    for token, name in ((alpha, "alpha"), (beta, "beta"), (everyone, "beta")):
        a = call(w.url, "GET", schema.format(w.schemas[name]), token)
        assert a.status == 200 and json.loads(a.body)["id"] == w.schemas[name]
    # marking copies goes by the container's dataset too
    mark = json.dumps({"state": "good"}).encode()
    target = f"/api/v1/containers/{w.containers['beta']}/replicas/local"
    assert call(w.url, "PUT", target, w.token("write", "alpha"), body=mark).status == 404


def test_a_restricted_remote_client_still_reads_its_dataset(world: World) -> None:
    w = world
    with giod.open(w.url, token=w.token("read", "alpha")) as fed:
        assert len(fed.dataset("alpha").read(["ht"])) == 100
        assert fed.dataset("alpha").schema.name == "synthetic"


# --------------------------------------------------------------------------- commits


def _commit(w: World, dataset: str, path: str) -> DatabaseCommit:
    spec = ContainerSpec("extra", path, "crc32c:00000000", 10, (1,), w.schemas["alpha"])
    return DatabaseCommit(dataset, 1, "local", (spec,))


def test_a_commit_cannot_register_paths_outside_its_dataset(world: World) -> None:
    w = world
    writer = w.token("write", "alpha")
    db = w.local.catalog.databases("alpha")[0].id
    v = w.local.version
    escapes = [f"alpha/../beta/{w.files['beta'].split('/', 1)[1]}", "alpha/../../catalog.sqlite", "beta/x/raw.parquet",
               "alpha/./x/raw.parquet", "alpha//raw.parquet", "/alpha/x/raw.parquet", "alpha",
               f"{OLD}/x/raw.parquet"]  # below alpha's name, but in the directory of the older dataset alpha/sub
    for path in escapes:
        body = json.dumps(wire.dump(_commit(w, "alpha", path))).encode()
        a = call(w.url, "POST", "/api/v1/commit", writer, body=body)
        assert a.status == 400 and b"container path" in a.body, (path, a.status, a.body[:200])
        item = {"database_id": db, "containers": [wire.dump(_commit(w, "alpha", path).containers[0])],
                "tag_stats": {}}
        a = call(w.url, "POST", "/api/v1/containers", writer,
                 body=json.dumps({"items": [item], "site": "local"}).encode())
        assert a.status == 400 and b"container path" in a.body, (path, a.status, a.body[:200])
    assert w.local.version == v
    # and the remote client refuses them before they cross the link
    with giod.open(w.url, token=writer) as fed:
        with pytest.raises(CatalogError, match="container path"):
            fed.catalog.commit_database(_commit(w, "alpha", escapes[0]))
    with giod.open(w.url, token=w.token("read", "alpha")) as fed:  # alpha reads as before
        assert len(fed.dataset("alpha").read(["ht"])) == 100


# --------------------------------------------------------------------------- names at creation


def test_bad_names_are_refused_by_the_server(world: World) -> None:
    w = world
    v = w.local.version
    for name in BAD_NAMES:
        for target, doc in (("/api/v1/datasets", {"name": name, "schema_id": w.schemas["alpha"]}),
                            ("/api/v1/sites", {"name": name, "url": str(w.root.parent / "x"), "distance": 1})):
            a = call(w.url, "POST", target, w.admin, body=json.dumps(doc).encode())
            assert a.status == 400, (target, name[:20], a.status, a.body[:200])
            assert json.loads(a.body)["error"] == "ConfigError"
    assert w.local.version == v and not (w.root.parent / "x").exists()
    assert sorted(w.local.datasets()) == sorted(["alpha", "beta", OLD])
    # a dataset-restricted writer, for a name below its own
    a = call(w.url, "POST", "/api/v1/datasets", w.token("write", "alpha"),
             body=json.dumps({"name": "alpha/x", "schema_id": w.schemas["alpha"]}).encode())
    assert a.status == 400


def test_bad_names_are_refused_by_the_remote_client(world: World) -> None:
    w = world
    with giod.open(w.url, token=w.admin) as fed:
        for name in BAD_NAMES:
            with pytest.raises(ConfigError, match="invalid dataset name"):
                fed.create_dataset(name, synthetic.schema())
            with pytest.raises(ConfigError, match="invalid site name"):
                fed.add_site(name, str(w.root.parent / "y"))


def test_bad_names_are_refused_by_the_command_line(world: World, tmp_path: Path) -> None:
    fed_dir = str(Path(world.local.root))
    for name in ("alpha/sub2", "..", "\uff41lpha", "a" * 129, "alpha\u202e"):
        for args in (["site", "add", name, str(tmp_path / "site")], ["token", "create", "--scope", "read",
                                                                      "--dataset", name]):
            r = CliRunner().invoke(main, [*args, "-f", fed_dir], catch_exceptions=False)
            assert r.exit_code == 2, (args, r.output)
            assert len(r.output.strip().splitlines()) == 1 and "invalid" in r.output
    assert not (tmp_path / "site").exists()
    r = CliRunner().invoke(main, ["token", "create", "--scope", "read", "--dataset", OLD, "-f", fed_dir])
    assert r.exit_code == 0  # a dataset named before the grammar still gets tokens


# --------------------------------------------------------------------------- malformed ids


def test_malformed_object_ids_are_400(world: World) -> None:
    w = world
    reader = w.token("read", "alpha")
    for target in ("/api/v1/events/alpha/db42/tracks/x%23y", "/api/v1/events/alpha/db42%2Ftracks%2Fx%23y",
                   "/api/v1/events/alpha/db42/tracks/1%237", "/api/v1/events/alpha/3/x"):
        a = call(w.url, "GET", target, reader)
        assert a.status == 400 and json.loads(a.body)["error"] == "DataError", (target, a.status, a.body[:200])
    for target in ("/api/v1/events/alpha/x", "/api/v1/events/alpha/1e3", "/api/v1/events/alpha/x%23y"):
        # one path segment: refused by the route's parameter validation (422 until it answers 400 as well)
        assert call(w.url, "GET", target, reader).status in (400, 422), target
    assert call(w.url, "GET", "/api/v1/events/alpha/3", reader).status == 200
    assert call(w.url, "GET", "/api/v1/events/beta/db1/tracks/x", reader).status == 404
    assert call(w.url, "GET", "/api/v1/events/alpha/db1/tracks/x").status == 401
    with pytest.raises(giod.GiodError) as caught:
        w.local.object("db42/tracks/x#y")
    assert not isinstance(caught.value, giod.NotFound)
    r = CliRunner().invoke(main, ["object", "db42/tracks/x#y", "-f", str(w.local.root)])
    assert r.exit_code == 2 and "malformed object id" in r.output
