"""How container files are encoded: one value object for every format.

Each format reads the settings it has and leaves the others alone: Arrow
files the codec, ``min_savings`` and ``compressed_cluster_bytes``; Parquet
files the codec, dictionary, byte-stream split, page size and page
checksums (measured choices in docs/storage.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

__all__ = ["WriteOptions"]


@dataclass(frozen=True)
class WriteOptions:
    """How container files are encoded (measured choices in docs/storage.md).

    ``container_format`` is the name of a registered format: ``arrow`` (Arrow
    IPC file), ``parquet``, or one added through ``giod.storage.formats.register_format``;
    the Parquet-only settings (dictionary, byte-stream split, pages) leave Arrow
    files alone.
    """

    container_format: str = "arrow"
    compression: str = "zstd"
    compression_level: int | None = 1
    use_dictionary: bool = False  # floats and indices gain nothing from dictionaries
    byte_stream_split: bool = True  # measured: 8 % smaller files, 11 % faster reads, same write rate
    data_page_size: int = 8 << 10  # small pages let sparse selections read little (docs/pages.md)
    page_checksums: bool = True  # lets readers catch a flipped bit in the page they read
    #: Arrow files: the codec is kept only if it saves this share of the first cluster's bytes (docs/decisions.md §47)
    min_savings: float = 0.25
    #: Arrow files whose codec is kept: clusters are cut to about this many uncompressed bytes, since a
    #: compressed buffer is decompressed whole to read one event of it (None: as given)
    compressed_cluster_bytes: int | None = 1 << 20

    def parquet_kwargs(self, schema: pa.Schema) -> dict[str, Any]:
        """The keywords of ``pyarrow.parquet.ParquetWriter`` for ``schema`` with these options."""
        kwargs: dict[str, Any] = dict(
            compression=self.compression,
            compression_level=self.compression_level if self.compression != "none" else None,
            use_dictionary=self.use_dictionary,
            write_page_index=True,
            write_page_checksum=self.page_checksums,
            data_page_size=self.data_page_size,
            write_statistics=False,
        )
        if self.byte_stream_split:
            kwargs["use_byte_stream_split"] = _float_columns(schema)
        return kwargs


def _float_columns(schema: pa.Schema) -> list[str]:
    out: list[str] = []

    def visit(path: str, t: pa.DataType) -> None:
        if pa.types.is_floating(t):
            out.append(path)
        elif pa.types.is_struct(t):
            for f in t:
                visit(f"{path}.{f.name}", f.type)
        elif pa.types.is_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_large_list(t):
            visit(f"{path}.list.element", t.value_type)

    for f in schema:
        visit(f.name, f.type)
    return out
