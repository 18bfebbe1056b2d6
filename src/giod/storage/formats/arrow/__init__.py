"""Arrow IPC container files: one record batch per cluster, block checksums, read event by event.

The modules, from the bytes up:

* ``blocks``: the block checksum table of a record batch and the layout of its message;
* ``frame``: magic, footer and its block table; the codecs and CRC-32C writer and reader share;
* ``structure``: a batch's metadata checked against its schema before anything is decoded;
* ``projection``: the one rule that keeps whole collections or some members;
* ``rows``, ``columns``: a few events of a raw batch, some columns of a compressed one;
* ``reader``: :class:`ArrowContainerReader`, a whole file; ``writer``: :class:`ArrowFileWriter`;
* ``format``: :data:`ARROW`, the format as the registry (``giod.storage.formats``) hands it out.

Measurements and the file layout: docs/storage.md.
"""

from giod.storage.formats.arrow.format import ARROW, ArrowFormat
from giod.storage.formats.arrow.frame import CODECS, MAGIC, describe, parse_footer
from giod.storage.formats.arrow.reader import ArrowContainerReader
from giod.storage.formats.arrow.writer import ArrowFileWriter

__all__ = ["ARROW", "CODECS", "MAGIC", "ArrowContainerReader", "ArrowFileWriter", "ArrowFormat", "describe",
           "parse_footer"]
