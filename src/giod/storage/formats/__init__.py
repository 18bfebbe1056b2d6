"""Container formats behind one interface, found by name through a registry.

:class:`ContainerFormat` (``base``) is what a format is: a name the catalog
records, a file suffix, a writer and a reader, and how a file tells what its
writer registered. ``registry`` maps names to formats: giod's own, ``arrow``
(the default, ``giod.storage.formats.arrow``) and ``parquet``
(``giod.storage.formats.parquet``), are imported on first use; others are
added with :func:`register_format` or the ``giod.formats`` entry-point group.
The store reads and writes through ``giod.storage.container``, which
dispatches here. Every format giod ever wrote stays registered, so its
files stay readable.
"""

from giod.storage.formats.base import (
    ContainerFormat,
    Described,
    FormatReader,
    FormatWriter,
    Gathered,
    WrittenContainer,
    WrittenFile,
)
from giod.storage.formats.options import WriteOptions
from giod.storage.formats.registry import (
    ENTRY_POINT_GROUP,
    FORMATS,
    SUFFIX,
    find_format,
    format_names,
    register_format,
)

__all__ = ["ENTRY_POINT_GROUP", "FORMATS", "SUFFIX", "ContainerFormat", "Described", "FormatReader", "FormatWriter",
           "Gathered", "WriteOptions", "WrittenContainer", "WrittenFile", "find_format", "format_names",
           "register_format"]
