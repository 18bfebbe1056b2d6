"""How writers lay out containers: write options, cluster buffers, tag statistics."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from giod import config
from giod.schema import TAG_CONTAINER
from giod.errors import ConfigError
from giod.storage.arrowfile import CODECS
from giod.storage.container import FORMATS, ContainerWriter, WriteOptions

DEFAULT_CLUSTER_BYTES = config.BY_NAME["cluster_bytes"].default


TAG_PAGE_SIZE = 1 << 20  # tags are read whole by selections: large pages


def _options_for(container: str, options: WriteOptions) -> WriteOptions:
    if container == TAG_CONTAINER:
        return dataclasses.replace(options, data_page_size=TAG_PAGE_SIZE)
    return options


def write_options(cfg: Mapping[str, Any], container_format: str | None = None) -> WriteOptions:
    """The write options of the settings ``cfg``; ``container_format`` overrides the setting's."""
    fmt = container_format or cfg["container_format"]
    if fmt not in FORMATS:
        raise ConfigError(f"container_format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt == "arrow" and cfg["compression"] not in CODECS:
        raise ConfigError(f"Arrow containers take compression {', '.join(CODECS)}, not {cfg['compression']!r}")
    return WriteOptions(container_format=fmt, compression=cfg["compression"],
                        compression_level=cfg["compression_level"],
                        byte_stream_split=cfg["byte_stream_split"], page_checksums=cfg["page_checksums"])


def merge_stats(stats: dict[str, tuple[float, float]], table: pa.Table) -> None:
    """Widen per-field (min, max) with the values in ``table``."""
    for name in table.column_names:
        col = table.column(name)
        if len(col) == 0:
            continue
        mm = pc.min_max(col)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if lo is None or (isinstance(lo, float) and (np.isnan(lo) or np.isnan(hi))):
            stats[name] = (float("nan"), float("nan"))  # unknown: never prunes
            continue
        lo, hi = float(lo), float(hi)
        if name in stats:
            old = stats[name]
            if np.isnan(old[0]):
                continue
            lo, hi = min(lo, old[0]), max(hi, old[1])
        stats[name] = (lo, hi)


class _ContainerBuffer:
    """Buffers one container's tables and writes a cluster when enough has come."""

    def __init__(self, writer: ContainerWriter, cluster_events: int | None, cluster_bytes: int):
        self.writer = writer
        self.cluster_events = cluster_events
        self.cluster_bytes = cluster_bytes
        self.tables: list[pa.Table] = []
        self.rows = 0
        self.nbytes = 0

    def add(self, table: pa.Table) -> None:
        self.tables.append(table)
        self.rows += table.num_rows
        self.nbytes += table.nbytes
        if self.cluster_events is not None:
            while self.rows >= self.cluster_events:
                self._write(self.cluster_events)
        elif self.nbytes >= self.cluster_bytes:
            self._write(self.rows)

    def _write(self, n: int) -> None:
        table = pa.concat_tables(self.tables)
        self.writer.write_cluster(table.slice(0, n))
        rest = table.slice(n)
        self.tables = [rest] if rest.num_rows else []
        self.rows = rest.num_rows
        self.nbytes = rest.nbytes if rest.num_rows else 0

    def finish(self) -> None:
        if self.rows:
            self._write(self.rows)

