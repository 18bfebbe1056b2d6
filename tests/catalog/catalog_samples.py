"""Sample values shared by the catalog tests: a dataset, a site, container specs."""

from __future__ import annotations

from giod.catalog import ContainerSpec

DATASET = "qcd"
SITE = "local"


def specs(
    tag: str, n_events: int, schema_id: int, names: tuple[str, ...] = ("raw.tracker", "tag")
) -> tuple[ContainerSpec, ...]:
    """Container specs as a writer would hand them in (one row group per container)."""
    return tuple(
        ContainerSpec(
            name,
            f"{DATASET}/{tag}/{name}.parquet",
            f"crc32c:{len(name):08x}",
            1000 + len(name),
            (n_events,),
            schema_id,
        )
        for name in names
    )
