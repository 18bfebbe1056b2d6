"""Fixtures for the catalog tests: a catalog with one schema, dataset and site."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from catalog_samples import DATASET, SITE, specs

from giod.catalog import Catalog, DatabaseCommit


@pytest.fixture
def ready(catalog: Catalog) -> Catalog:
    """The catalog after add_schema, create_dataset and add_site (version 3)."""
    schema_id = catalog.add_schema("events", "collections: {}\n", "sha256:events-v1")
    catalog.create_dataset(DATASET, schema_id)
    catalog.add_site(SITE, "file:///srv/giod", 0)
    return catalog


@pytest.fixture
def make_commit(ready: Catalog) -> Callable[..., DatabaseCommit]:
    """Build a DatabaseCommit for the fixture dataset; keywords override fields."""
    schema_id = ready.dataset(DATASET).schema_id
    counter = iter(range(1_000_000))

    def build(n_events: int = 100, **fields: Any) -> DatabaseCommit:
        tag = f"w{next(counter)}"
        base: dict[str, Any] = {
            "dataset": DATASET,
            "n_events": n_events,
            "site": SITE,
            "containers": specs(tag, n_events, schema_id),
            "tag_stats": {"njets": (0.0, 7.0), "ht": (12.5, 950.25)},
            "writer": "test:1",
            "program": "giod.tests",
            "program_version": "1",
            "parameters": {"seed": 1},
        }
        base.update(fields)
        return DatabaseCommit(**base)

    return build
