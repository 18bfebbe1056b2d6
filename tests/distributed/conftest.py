"""Shared set-up for the distributed tests: a federation with two sites and one Dask cluster.

The cluster (two worker processes, one at each site) starts once per session:
starting it is the slow part of these tests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

if os.environ.get("CI") != "true":  # on a laptop without the extra these tests skip; in CI they must run
    pytest.importorskip("distributed", reason="needs the dask extra: pip install 'giod[dask]'")
    pytest.importorskip("dask_awkward", reason="needs the dask extra: pip install 'giod[dask]'")

import giod
from giod.testing import synthetic

SITES = ("cern", "caltech")
DATASET = "syn"
#: (site, events) of each database written
DATABASES = (("cern", 300), ("caltech", 250), ("cern", 200), ("fnal", 150))


@pytest.fixture(scope="session")
def fed_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An embedded federation: sites cern, caltech, fnal; four databases of synthetic events."""
    root = tmp_path_factory.mktemp("distributed") / "fed"
    with giod.open(root, create=True) as fed:
        for i, name in enumerate(("cern", "caltech", "fnal")):
            fed.add_site(name, str(root.parent / f"site-{name}"), 10 + i)
        ds = fed.create_dataset(DATASET, synthetic.schema())
        first = 0
        for k, (site, n) in enumerate(DATABASES):
            with ds.writer(site=site, database_events=n) as w:
                w.append(synthetic.events(n, seed=100 + k, first_event=first))
            first += n
    return root


@pytest.fixture
def fed(fed_path: Path) -> Iterator[giod.Federation]:
    f = giod.open(fed_path, create=False)
    yield f
    f.close()


@pytest.fixture(scope="session")
def client() -> Iterator[object]:
    """A Dask client of a cluster of two worker processes, at sites cern and caltech."""
    from distributed import Client

    from giod.distributed import local_cluster

    cluster = local_cluster(2, sites=SITES)
    # not the default scheduler: the session's later tests (coffea, dask-awkward) compute where they say
    c = Client(cluster, set_as_default=False)
    c.wait_for_workers(2, timeout=60)
    yield c
    c.close()
    cluster.close()
