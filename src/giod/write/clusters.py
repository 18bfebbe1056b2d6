"""Container files as writers cut them: tables buffered into clusters, and the commit record in each footer.

The encoding of the files is ``giod.write.writeoptions``; the tag statistics of a
database are ``giod.store.tagstats``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from giod.errors import DataError, GiodError
from giod.storage.container import COMMIT_KEY, ContainerWriter

if TYPE_CHECKING:
    from giod.catalog.protocol import CatalogAPI


class ContainerBuffer:
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

    def _write(self, n: int, last: bool = False) -> None:
        table = pa.concat_tables(self.tables)
        self.writer.write_cluster(table.slice(0, n), last=last)
        rest = table.slice(n)
        self.tables = [rest] if rest.num_rows else []
        self.rows = rest.num_rows
        self.nbytes = rest.nbytes if rest.num_rows else 0

    def finish(self) -> None:
        if self.rows:
            self._write(self.rows, last=True)


def seen_version(catalog: CatalogAPI) -> list[Any] | None:
    """``[version, its time]`` of the catalog's newest version, as a footer records it (None: unknown)."""
    with contextlib.suppress(GiodError):
        last = catalog.versions(1)
        return [last[0].version, last[0].created] if last else [0, 0.0]
    return None


def commit_record(record: Mapping[str, Any], container: str) -> dict[str, str]:
    """The footer entry of one container file: the commit's record and the container's name."""
    return {COMMIT_KEY: json.dumps({**record, "container": container}, sort_keys=True, default=str)}


def recordable(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """``parameters`` as a commit records them (in the catalog and in every footer): a mapping that JSON can
    write, else DataError — not a RecursionError from deep in the first container written."""
    out = dict(parameters or {})
    try:
        json.dumps(out, default=str)
    except (RecursionError, ValueError, TypeError) as exc:
        raise DataError(f"parameters cannot be recorded: {exc}") from None
    return out
