"""How writers lay out containers: write options, cluster buffers, tag statistics, commit records."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from giod import config
from giod.errors import ConfigError, GiodError
from giod.schema import TAG_CONTAINER
from giod.storage.arrowfile import CODECS
from giod.storage.container import COMMIT_KEY, FORMATS, ContainerWriter, WriteOptions

DEFAULT_CLUSTER_BYTES = config.BY_NAME["cluster_bytes"].default


TAG_PAGE_SIZE = 1 << 20  # tags are read whole by selections: large pages


def _options_for(container: str, options: WriteOptions) -> WriteOptions:
    if container == TAG_CONTAINER:
        return dataclasses.replace(options, data_page_size=TAG_PAGE_SIZE)
    return options


def write_options(cfg: Mapping[str, Any], container_format: str | None = None) -> WriteOptions:
    """The encoding of container files from the effective settings; ``container_format`` overrides the
    setting's. A format giod does not write, or a codec the format or pyarrow lacks, is a ConfigError."""
    fmt = container_format or cfg["container_format"]
    if fmt not in FORMATS:
        raise ConfigError(f"container_format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    codec = str(cfg["compression"]).lower()
    level: int | None = cfg["compression_level"]
    if fmt == "arrow" and codec not in CODECS:
        raise ConfigError(f"Arrow containers take compression {', '.join(CODECS)}, not {cfg['compression']!r}")
    if codec != "none":
        try:
            available = pa.Codec.is_available(codec)
        except ValueError:
            available = False
        if not available:
            raise ConfigError(f"compression {cfg['compression']!r} is not available "
                              f"(one of: {', '.join(_codecs())}, none)")
        if not pa.Codec.supports_compression_level(codec):
            level = None  # snappy has no levels: the setting does not apply rather than fail every write
    return WriteOptions(container_format=fmt, compression=codec, compression_level=level,
                        byte_stream_split=cfg["byte_stream_split"], page_checksums=cfg["page_checksums"])


def dataset_options(record: Any, options: WriteOptions, asked: str | None = None) -> WriteOptions:
    """``options`` in the container format the dataset ``record`` fixes, if it fixes one.

    ``asked`` is a format a writer was given by name: one the dataset does not use is a ConfigError,
    so that a dataset's containers never mix formats by accident.
    """
    fixed = getattr(record, "container_format", None)
    if fixed is None:
        return options
    if asked is not None and asked != fixed:
        raise ConfigError(f"dataset {record.name} keeps its containers as {fixed}, not {asked} "
                          "(its format was fixed when it was created)")
    return options if options.container_format == fixed else dataclasses.replace(options, container_format=fixed)


def _codecs() -> list[str]:
    return [c for c in ("zstd", "lz4", "snappy", "gzip", "brotli") if pa.Codec.is_available(c)]


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

def seen_version(catalog: Any) -> list[Any] | None:
    """``[version, its time]`` of the catalog's newest version, as a footer records it (None: unknown)."""
    versions = getattr(catalog, "versions", None)
    if versions is None:
        return None
    with contextlib.suppress(GiodError):
        last = versions(1)
        return [last[0].version, last[0].created] if last else [0, 0.0]
    return None


def commit_record(record: Mapping[str, Any], container: str) -> dict[str, str]:
    """The footer entry of one container file: the commit's record and the container's name."""
    return {COMMIT_KEY: json.dumps({**record, "container": container}, sort_keys=True, default=str)}
