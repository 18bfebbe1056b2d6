"""A dataset whose container format was fixed at creation: every writer and pass uses it."""

from __future__ import annotations

import pytest

from giod.errors import ConfigError
from giod.storage.container import WriteOptions
from giod.testing import synthetic

RAW = ["hits", "cells", "run", "event", "njets", "ntracks", "ht", "lead_pt"]


def test_every_writer_of_a_dataset_uses_its_format(fed) -> None:
    lake = fed.create_dataset("lake", synthetic.schema(), container_format="parquet")
    assert lake.record.container_format == "parquet"
    assert fed.dataset("lake").record.container_format == "parquet"  # as the catalog keeps it
    events = synthetic.events(40, seed=1)
    with lake.writer() as w:  # the settings say arrow: the dataset says parquet
        w.append(events[RAW])
    with lake.writer(options=WriteOptions(compression="lz4")) as w:
        w.append(events[RAW])
    with lake.add_containers(program="reco") as p:  # a later pass adds parquet containers too
        for db in lake.databases():
            p.write(db, events[["tracks", "jets"]])
    formats = {(c.name, c.format) for db in fed.dataset("lake").databases() for c in db.containers}
    assert {f for name, f in formats if name != "tag-index"} == {"parquet"}
    assert {name for name, _ in formats} >= {"raw.tracker", "raw.calo", "reco", "tag"}
    assert fed.dataset("lake").read(["hits"]).hits.x.to_list() == 2 * events.hits.x.to_list()
    with pytest.raises(ConfigError, match="keeps its containers as parquet, not arrow"):
        lake.writer(container_format="arrow")
    # a dataset created without a format follows each writer's settings, as before
    free = fed.create_dataset("free", synthetic.schema())
    assert free.record.container_format is None
    with free.writer(container_format="parquet") as w:
        w.append(events[RAW])
    assert free.databases()[0].container("raw.tracker").format == "parquet"


def test_an_unknown_format_is_refused_when_the_dataset_is_created(fed) -> None:
    with pytest.raises(ConfigError, match="container_format must be one of arrow, parquet, not 'root'"):
        fed.create_dataset("odd", synthetic.schema(), container_format="root")
    assert "odd" not in fed.datasets()
