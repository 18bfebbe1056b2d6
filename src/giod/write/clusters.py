"""Container files as writers cut them: tables buffered into clusters, and the commit record in each footer.

The encoding of the files is ``giod.write.writeoptions``; the tag statistics of a
database are ``giod.store.tagstats``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from giod.errors import DataError, GiodError
from giod.storage.container import COMMIT_KEY, ContainerWriter

if TYPE_CHECKING:
    from giod.catalog.protocol import CatalogAPI

#: an executor's ``submit``: runs a function with its arguments elsewhere, its outcome a future
Submit = Callable[..., Future[Any]]


class ContainerBuffer:
    """Buffers one container's tables and writes a cluster when enough has come.

    Given a ``submit`` (an executor's), :meth:`add` hands the clusters it cuts to it and returns: they are
    encoded, compressed, checksummed and written while the caller fills the next tables, and while the
    writer's other containers write theirs (docs/decisions.md). A container has one such write at a time:
    the next add that cuts, :meth:`finish` and :meth:`settle` wait for it first, so that the file gets its
    clusters in order, and an error of the write is raised by whichever of them comes next.
    """

    def __init__(self, writer: ContainerWriter, cluster_events: int | None, cluster_bytes: int):
        self.writer = writer
        self.cluster_events = cluster_events
        self.cluster_bytes = cluster_bytes
        self.tables: list[pa.Table] = []
        self.rows = 0
        self.nbytes = 0
        self._writing: Future[None] | None = None  # the clusters handed to ``submit`` and not known written

    def add(self, table: pa.Table, submit: Submit | None = None) -> None:
        """Buffer ``table``; the clusters it completes are written now, or by ``submit`` when one is given."""
        self.tables.append(table)
        self.rows += table.num_rows
        self.nbytes += table.nbytes
        cut: list[pa.Table] = []
        if self.cluster_events is not None:
            while self.rows >= self.cluster_events:
                cut.append(self._cut(self.cluster_events))
        elif self.nbytes >= self.cluster_bytes:
            cut.append(self._cut(self.rows))
        if not cut:
            return
        self._wait()  # the container's previous clusters first
        if submit is None:
            self._write(cut)
        else:
            self._writing = submit(self._write, cut)

    def _cut(self, n: int) -> pa.Table:
        table = pa.concat_tables(self.tables)
        rest = table.slice(n)
        self.tables = [rest] if rest.num_rows else []
        self.rows = rest.num_rows
        self.nbytes = rest.nbytes if rest.num_rows else 0
        return table.slice(0, n)

    def _write(self, clusters: list[pa.Table], last: bool = False) -> None:
        for i, cluster in enumerate(clusters):
            self.writer.write_cluster(cluster, last=last and i == len(clusters) - 1)

    def _wait(self) -> None:
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()

    def finish(self) -> None:
        """Write what is buffered as the last cluster, once the clusters handed on are written."""
        self._wait()
        if self.rows:
            self._write([self._cut(self.rows)], last=True)

    def settle(self) -> None:
        """Wait for the clusters handed on, whatever became of them: the file is given up next."""
        with contextlib.suppress(BaseException):
            self._wait()


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
