"""The full check of container files before anything registers them: every batch, every column, relations.

A commit, an upload or a copy registers files that someone else wrote. The
catalog records their checksums, which only prove that later reads see the
same bytes; :func:`check_files` proves the bytes make sense first. It reads
every record batch (or row group) of every file through the ordinary reader,
so each passes the structural checks of ``giod.storage.validation``, and
checks every relation index of the files against the objects per event of
its target collection, where the target is among the files. Any failure is
an :class:`~giod.errors.IntegrityError` naming the file, batch and column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import pyarrow as pa

from giod.errors import IntegrityError
from giod.storage.container import ContainerReader
from giod.storage.site import Site
from giod.storage.validation import (
    ContainerFigures,
    Relation,
    check_container,
    check_database,
    check_schema,
)

__all__ = ["FileToRegister", "check_files"]


class FileToRegister(Protocol):
    """What a commit says of one file (a catalog's ``ContainerSpec``)."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def size(self) -> int: ...

    @property
    def format(self) -> str: ...

    @property
    def cluster_entries(self) -> tuple[int, ...]: ...

    @property
    def cluster_checksums(self) -> tuple[int, ...]: ...


def check_files(site: Site, files: Sequence[FileToRegister], relations: Sequence[Relation],
                schemas: Mapping[str, pa.Schema] | None = None) -> None:
    """Check whole container files on ``site`` before they are registered (IntegrityError if one is bad).

    ``relations`` are the data model's (``giod.store.expected.stored_relations``); a relation whose target is
    in none of ``files`` is checked when both are read (``giod.read.objects.link``). ``schemas`` holds, by
    path, the Arrow schema a file must have (``giod.store.expected.stored_schemas``): its container's in the
    model it was written with.
    """
    figures: dict[str, ContainerFigures] = {}
    for f in files:
        if site.size(f.path) != f.size:
            raise IntegrityError(f"container {f.path} on site {site.name} has {site.size(f.path)} bytes, "
                                 f"the commit says {f.size}")
        # no size given to the reader: a check is no read, whose object counts a later pass would use
        reader = ContainerReader(site, f.path, format=f.format, clusters=f.cluster_entries or None,
                                 checksums=f.cluster_checksums or None)
        try:
            if schemas is not None and f.path in schemas:
                check_schema(reader.arrow_schema, schemas[f.path], f"container {f.path} on site {site.name}")
            figures[f.name] = check_container(reader, relations, f"container {f.path} on site {site.name}")
        finally:
            reader.close()
    check_database(figures, relations)
