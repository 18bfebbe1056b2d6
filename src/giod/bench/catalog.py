"""Catalog benchmark: registrations per second as the catalog grows.

Each registration is what a writer commits for one database: 4 containers
(raw.tracker, raw.calo, reco, tag) of 10 clusters each, 8 tag statistics,
program parameters, one replica. The benchmark adds a fresh dataset to the
catalog at ``url`` (so it can run against a catalog in use) and, after every
``step`` registrations, also times listing the whole dataset (three queries).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from giod.catalog import Catalog, ContainerSpec, DatabaseCommit

__all__ = ["run"]

_CONTAINERS = ("raw.tracker", "raw.calo", "reco", "tag")
_TAGS = ("njets", "ht", "lead_jet_pt", "mjj", "met", "nmuons", "nelectrons", "ntracks")
_EVENTS = 10_000
_CLUSTERS = (1_000,) * 10
_SITE = "bench"


def _commit(dataset: str, schema_id: int, i: int) -> DatabaseCommit:
    containers = tuple(
        ContainerSpec(
            name,
            f"{dataset}/db{i:07d}/{name}.parquet",
            f"crc32c:{(i * 31 + k) & 0xFFFFFFFF:08x}",
            40_000_000 + 1_000 * k + i % 997,
            _CLUSTERS,
            schema_id,
        )
        for k, name in enumerate(_CONTAINERS)
    )
    tags = {
        name: (float(k + i % 7), float(100 * (k + 1) + i % 101)) for k, name in enumerate(_TAGS)
    }
    return DatabaseCommit(
        dataset=dataset,
        n_events=_EVENTS,
        site=_SITE,
        containers=containers,
        tag_stats=tags,
        writer=f"bench:{i % 8}",
        program="giod.bench.catalog",
        program_version="1",
        parameters={"seed": i, "generator": "synthetic", "pileup": 40},
    )


def run(
    url: str,
    n_databases: int = 100_000,
    step: int = 5_000,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, float]]:
    """Register ``n_databases`` databases; one result per ``step``.

    Each result holds ``databases`` (registered so far), ``seconds`` (for this
    step), ``rate`` (registrations/s in this step) and ``list_seconds`` (time
    to list every database of the dataset afterwards). ``progress(done,
    total)`` is called after every step.
    """
    results: list[dict[str, float]] = []
    with Catalog.open(url) as catalog:
        tag = uuid.uuid4().hex[:8]
        schema_id = catalog.add_schema("bench", "collections: {}\n", "sha256:giod-bench-catalog")
        dataset = catalog.create_dataset(f"bench_{tag}", schema_id).name
        if _SITE not in {s.name for s in catalog.sites()}:
            catalog.add_site(_SITE, "file:///bench", 0)
        done = 0
        while done < n_databases:
            count = min(step, n_databases - done)
            start = time.perf_counter()
            for i in range(done, done + count):
                catalog.commit_database(_commit(dataset, schema_id, i))
            seconds = time.perf_counter() - start
            done += count
            start = time.perf_counter()
            catalog.databases(dataset)
            listed = time.perf_counter() - start
            results.append(
                {
                    "databases": done,
                    "seconds": seconds,
                    "rate": count / seconds,
                    "list_seconds": listed,
                }
            )
            if progress is not None:
                progress(done, n_databases)
    return results
