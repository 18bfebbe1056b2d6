"""Both catalog kinds satisfy ``CatalogAPI``, and answer the abilities they lack in part by saying so."""

from __future__ import annotations

import inspect

import pytest

from giod.catalog import Catalog
from giod.catalog.protocol import CatalogAPI
from giod.catalog.remote import RemoteCatalog, Unavailable
from giod.errors import ConfigError
from giod.storage.http import Endpoint

MEMBERS = sorted(n for n in vars(CatalogAPI) if not n.startswith("_") and callable(getattr(CatalogAPI, n)))


def _parameters(fn: object) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", [Catalog, RemoteCatalog])
@pytest.mark.parametrize("name", MEMBERS)
def test_each_kind_has_every_method_of_the_protocol_with_its_parameters(kind, name):
    method = inspect.getattr_static(kind, name, None)  # not __getattr__'s catch-all
    assert method is not None, f"{kind.__name__} lacks {name}"
    assert _parameters(getattr(kind, name)) == _parameters(getattr(CatalogAPI, name))


def test_the_protocol_declares_the_abilities_once_probed_for():
    for name in ("query", "leases", "drop_expired_leases", "remove_site", "versions", "take_lease",
                 "mark_damaged", "replica_states", "replica_summary"):
        assert name in MEMBERS


def test_a_local_catalog_is_one_and_leaves_selections_to_the_reader(catalog):
    assert isinstance(catalog, CatalogAPI)
    assert catalog.query("anything") is None


def test_a_remote_catalog_says_what_it_cannot_do_without_a_round_trip():
    remote = RemoteCatalog(Endpoint("http://127.0.0.1:9", None))  # nothing listens: nothing may be asked
    assert isinstance(remote, CatalogAPI)
    assert remote.leases() == [] and remote.drop_expired_leases() == 0 and remote.replica_summary() == {}
    with pytest.raises(ConfigError, match="direct access to the catalog"):
        remote.remove_site("cern")
    for call in (remote.container_paths, remote.tokens, remote.rules, lambda: remote.purge_deleted(3)):
        with pytest.raises(Unavailable, match="run it where the catalog is"):
            call()
