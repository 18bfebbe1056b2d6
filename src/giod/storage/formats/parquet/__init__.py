"""Parquet container files: pyarrow for whole clusters, giod's page reader for a few rows.

Parquet stays a per-dataset option (``container_format = "parquet"``) and
every Parquet container giod ever wrote stays readable; Arrow IPC is the
default format (``giod.storage.formats.arrow``). :data:`PARQUET` is the
format as the registry (``giod.storage.formats``) hands it out (``format``).
Whole columns of a Parquet container are read by pyarrow; the page reader is
for the sparse case, where pyarrow would read whole column chunks. Its one
entry is :func:`read_rows`; the modules inside are its steps:

* ``thrift``: the Thrift compact protocol, decoded to a tree that re-encodes;
* ``footer``: the file's layout (leaf columns, row groups, column chunks);
* ``source``: positioned reads from a mapped path or a file object;
* ``pageindex``: which data pages hold the selected rows (OffsetIndexes, page headers);
* ``minifile``: those pages wrapped into a small in-memory Parquet file for Arrow to decode;
* ``rows``: :func:`read_rows`, putting the selected rows back together.

Measurements and writer settings: ``docs/pages.md``.
"""

from giod.storage.formats.parquet.format import PARQUET, ParquetFormat
from giod.storage.formats.parquet.rows import read_rows

__all__ = ["PARQUET", "ParquetFormat", "read_rows"]
