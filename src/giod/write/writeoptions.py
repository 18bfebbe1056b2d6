"""How container files are encoded: write options from the settings, per container.

The settings (``giod.config``: ``container_format``, ``compression``, ...) become
a :class:`~giod.storage.container.WriteOptions`; a format or codec giod cannot
write is refused here, once, before any file is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from giod import config
from giod.catalog.records import DatasetRecord
from giod.errors import ConfigError
from giod.schema import TAG_CONTAINER
from giod.storage.container import FORMATS, WriteOptions
from giod.storage.formats.arrow import CODECS

__all__ = ["DEFAULT_CLUSTER_BYTES", "TAG_PAGE_SIZE", "available_codecs", "encoding", "options_for",
           "write_options"]

DEFAULT_CLUSTER_BYTES = config.BY_NAME["cluster_bytes"].default


TAG_PAGE_SIZE = 1 << 20  # tags are read whole by selections: large pages


def options_for(container: str, options: WriteOptions) -> WriteOptions:
    """``options`` as ``container`` is written with them (the tag container: larger pages)."""
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
                              f"(one of: {', '.join(available_codecs())}, none)")
        if not pa.Codec.supports_compression_level(codec):
            level = None  # snappy has no levels: the setting does not apply rather than fail every write
    min_savings = float(cfg["min_savings"])
    if not 0.0 <= min_savings < 1.0:
        raise ConfigError(f"min_savings is a share of the bytes, from 0 (size first) to below 1, not {min_savings!r}")
    return WriteOptions(container_format=fmt, compression=codec, compression_level=level,
                        byte_stream_split=cfg["byte_stream_split"], page_checksums=cfg["page_checksums"],
                        min_savings=min_savings)


def dataset_options(record: DatasetRecord, options: WriteOptions, asked: str | None = None) -> WriteOptions:
    """``options`` in the container format the dataset ``record`` fixes, if it fixes one.

    ``asked`` is a format a writer was given by name: one the dataset does not use is a ConfigError,
    so that a dataset's containers never mix formats by accident.
    """
    fixed = record.container_format
    if fixed is None:
        return options
    if asked is not None and asked != fixed:
        raise ConfigError(f"dataset {record.name} keeps its containers as {fixed}, not {asked} "
                          "(its format was fixed when it was created)")
    return options if options.container_format == fixed else dataclasses.replace(options, container_format=fixed)


def available_codecs() -> list[str]:
    """The codecs this pyarrow build has, as a setting names them."""
    return [c for c in ("zstd", "lz4", "snappy", "gzip", "brotli") if pa.Codec.is_available(c)]


def encoding(root: Path | None, record: DatasetRecord, options: WriteOptions | None, *,
             container_format: str | None = None, compression: str | None = None,
             compression_level: int | None = None, min_savings: float | None = None,
             byte_stream_split: bool | None = None, page_checksums: bool | None = None,
             **settings: Any) -> tuple[WriteOptions, dict[str, Any]]:
    """The write options and effective settings of a writer of either kind (new databases or a pass).

    ``options`` and the encoding keywords exclude each other (ConfigError); ``settings`` are further
    settings by name (``database_events``, ``cluster_bytes``, ...), None meaning "from the settings".
    """
    given: dict[str, Any] = dict(compression=compression, compression_level=compression_level,
                 min_savings=min_savings, byte_stream_split=byte_stream_split, page_checksums=page_checksums)
    if options is not None and any(v is not None for v in given.values()):
        named = ", ".join(k for k, v in given.items() if v is not None)
        raise ConfigError(f"give either options=WriteOptions(...) or {named}, not both")
    cfg = config.load(root, None, container_format=container_format, **given, **settings)
    return dataset_options(record, options or write_options(cfg), container_format), cfg
