"""The interface of a container format: how its files are written, read, checked and registered.

A format is a :class:`ContainerFormat` registered under the name the catalog
records for each container (``giod.storage.formats.registry``). It hands out
a :class:`FormatWriter` for a file being written and a :class:`FormatReader`
for a published one; ``giod.storage.container`` is the one front that the
store calls, and it dispatches through the registry, so a format is added by
registering it, not by editing the store. Built in: ``arrow`` (Arrow IPC,
``giod.storage.formats.arrow``) and ``parquet`` (``...formats.parquet``).

What every format promises (the conformance suite
``tests/storage/test_format_conformance.py`` holds each to it):

- a writer turns clusters (Arrow tables with the container's schema) into one
  file, passing every byte through the CRC-32C of
  :class:`~giod.storage.checksum.Checksum`, and reports the events of each
  cluster it wrote and any per-cluster checksums the catalog should record;
- a reader checks what it reads before it hands it out: a changed byte is an
  :class:`~giod.errors.IntegrityError`, and so is a structure that makes no
  sense (every decoded column passes ``giod.storage.validation.check_columns``);
- columns are named as Parquet paths (``coll``, ``coll.list.element.field``),
  clusters by their index, rows by their entry in the file;
- :meth:`ContainerFormat.describe` finds again, from a file alone, what a
  writer registered (``giod recover``), and :meth:`ContainerFormat.footer_metadata`
  the key-value entries a writer put in its footer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

import numpy as np
import pyarrow as pa

from giod.storage.checksum import Checksum
from giod.storage.formats.options import WriteOptions
from giod.storage.kind import Site
from giod.storage.pending import PendingFile

__all__ = ["ContainerFormat", "Described", "FormatReader", "FormatWriter", "Gathered", "WrittenContainer",
           "WrittenFile"]


@dataclass(frozen=True)
class WrittenContainer:
    """A container file as its writer published it: what the catalog registers."""

    path: str
    checksum: str
    size: int
    cluster_entries: tuple[int, ...]
    format: str = "parquet"
    cluster_checksums: tuple[int, ...] = ()  # Arrow files: CRC-32C of each record batch, then of the footer


@dataclass(frozen=True)
class WrittenFile:
    """What a format writer reports when its file is finished: the whole file's checksum, and the
    per-cluster checksums the catalog records — none (where the format keeps its own), or one per
    cluster then one more for what locates them (the footer), each a CRC-32C below 2**32."""

    checksum: Checksum
    cluster_checksums: tuple[int, ...] = ()


@dataclass(frozen=True)
class Described:
    """What a writer registered for a file, found again from its bytes alone."""

    cluster_entries: tuple[int, ...]
    cluster_checksums: tuple[int, ...] = ()


class FormatWriter(ABC):
    """Writes the clusters of one container file into a site's pending file.

    Errors are :class:`~giod.errors.StorageError`, ``OSError`` or
    ``pyarrow.ArrowException``; the front (``ContainerWriter``) maps them and
    discards the pending file.
    """

    @abstractmethod
    def write_cluster(self, table: pa.Table) -> list[int]:
        """Write ``table`` (not empty) as one cluster or several; the events of each cluster written."""

    def last_cluster_next(self) -> None:  # noqa: B027 - a hint a format may take or leave
        """No cluster follows the next one written (a format may choose its settings knowing the whole
        file); a format that has no use for it leaves it as it is."""

    @abstractmethod
    def close(self) -> WrittenFile:
        """Finish the file (the front publishes it)."""

    @abstractmethod
    def abort(self) -> None:
        """Stop writing, quietly: the front discards the pending file."""


class FormatReader(ABC):
    """Reads clusters, columns and rows of one published container file, checked before use."""

    @property
    @abstractmethod
    def schema(self) -> pa.Schema:
        """The file's Arrow schema, metadata included."""

    @property
    @abstractmethod
    def num_clusters(self) -> int: ...

    @abstractmethod
    def read(self, columns: Sequence[str] | None, clusters: Sequence[int] | None) -> pa.Table:
        """``columns`` (Parquet paths; None: all) of ``clusters`` (None: all), checked."""

    @abstractmethod
    def read_rows(self, columns: Sequence[str] | None, rows: np.ndarray) -> pa.Table:
        """``columns`` of the entries ``rows`` (sorted), reading as little of the file as the format allows."""

    @abstractmethod
    def cluster_starts(self) -> np.ndarray:
        """The first entry of every cluster, and the file's entries last (a cumulative array)."""

    def layout(self) -> Any:
        """What :meth:`ContainerFormat.gather` needs of this file (read and checked now), or None: the file is
        read on its own (the default)."""
        return None

    def refresh(self) -> bool:
        """Ready this reader, after a read, to be kept open for later reads without holding what that read
        touched (a memory map mapped afresh: the pages it mapped count in the process's resident memory as long
        as they are mapped); False when it cannot be (the default: a reader is opened anew to be kept)."""
        return False

    @abstractmethod
    def close(self) -> None: ...


class Gathered(Protocol):
    """A planned read of columns of several files into one table (:meth:`ContainerFormat.gather`)."""

    def run(self, streams: int, max_request: int) -> pa.Table:
        """Receive (``streams`` requests in flight, each at most ``max_request`` bytes), check, join."""
        ...


class ContainerFormat(ABC):
    """A container format: its name in the catalog, its file suffix, its writer and reader."""

    #: the name the catalog records for each container (``containers.format``), a name of the name grammar
    name: str
    #: the suffix of its files' names (``.arrow``); unique among the formats
    suffix: str
    #: the codecs its files can carry (None: every codec pyarrow has)
    codecs: tuple[str, ...] | None = None

    @abstractmethod
    def writer(self, pending: PendingFile, path: str, schema: pa.Schema, options: WriteOptions,
               metadata: dict[str, str] | None) -> FormatWriter:
        """A writer of the file ``path`` into ``pending``; ``metadata`` goes into its footer (strings)."""

    @abstractmethod
    def reader(self, site: Site, path: str, *, size: int | None, clusters: Sequence[int] | None,
               checksums: Sequence[int] | None) -> FormatReader:
        """A reader of ``path`` on ``site``; ``size``, ``clusters`` (events per cluster) and ``checksums``
        (per-cluster checksums) are the catalog's, when it has them, and are checked against the file."""

    def gather(self, layouts: Sequence[Any], names: Sequence[str], schema: pa.Schema) -> Gathered | None:
        """A read of columns ``names`` of several files (their readers' ``layout()``, in reading order) into
        one table, each buffer received where the joined column holds it; None when the files are read one
        by one (the default)."""
        return None

    @abstractmethod
    def describe(self, data: bytes) -> Described:
        """What a writer registered for the file whose whole bytes are ``data``."""

    @abstractmethod
    def footer_metadata(self, fh: BinaryIO) -> dict[bytes, bytes]:
        """The key-value entries of the footer of the open file ``fh``."""

    def __repr__(self) -> str:
        return f"<container format {self.name!r} ({self.suffix})>"
