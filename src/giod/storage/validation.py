"""Validation of untrusted container structure: before anything is allocated, and before any array is used.

A container may come from another site, federation or writer; its checksums
prove that the bytes are the ones registered, not that they make sense
(docs/storage.md, "What is validated"). Every record batch or row group a
reader decodes passes two checks, each failure an
:class:`~giod.errors.IntegrityError` naming the container, the batch and the
column:

- the format's own check of a batch's metadata, before a buffer is
  decompressed or an array built (for Arrow files
  ``giod.storage.formats.arrow.structure.check_layout``), so that a length in
  metadata cannot make the reader allocate more than the file can hold;
- :func:`check_columns`, on the decoded arrays: offsets start at or above
  zero, never decrease and stay within their child or values buffer, child
  lengths and validity bitmaps agree with their parents (pyarrow's full
  validation, column by column).

Both are done once per batch and column and remembered (:data:`SEEN`): a
batch's catalog CRC-32C covers its metadata, which holds the checksum of
every buffer, and every read checks the buffers it uses against those, so
bytes once validated stay valid. Relation indices are checked where the
schema is known (``giod.read.objects``), and a whole file, relations included, by
:func:`check_container` before a commit, an upload or a copy registers it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow as pa

from giod.errors import GiodError, IntegrityError

__all__ = ["SEEN", "ContainerFigures", "Readable", "Relation", "check_columns", "check_container", "check_database",
           "check_relations", "check_schema", "relation_error"]


class _Seen:
    """Keys of the batches and columns validated in this process (least recently used forgotten first)."""

    def __init__(self, size: int = 1 << 16):
        self.size = size
        self._keys: OrderedDict[Hashable, None] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            if key in self._keys:
                self._keys.move_to_end(key)
                return True
            return False

    def add(self, key: Hashable) -> None:
        with self._lock:
            self._keys[key] = None
            while len(self._keys) > self.size:
                self._keys.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._keys.clear()


#: what this process has validated: (container key, batch, column) and (container key, batch, "layout")
SEEN = _Seen()


def check_columns(columns: Iterable[tuple[str, pa.Array | pa.ChunkedArray]], where: str,
                  key: Hashable | None = None) -> None:
    """Fully validate decoded arrays (offsets, child lengths, bitmaps), each column once per ``key``."""
    for name, array in columns:
        if key is not None and (key, name) in SEEN:
            continue
        try:
            array.validate(full=True)
        except (pa.ArrowException, ValueError) as exc:
            raise IntegrityError(f"{where}, column {name}: {exc}") from exc
        if key is not None:
            SEEN.add((key, name))


# ------------------------------------------------------------------ relations


@dataclass(frozen=True)
class Relation:
    """A relation as stored: ``source`` collection's member ``member`` indexes ``target`` in the same event."""

    source: str
    member: str
    target: str
    many: bool


def relation_error(relation: Relation, event: int, value: int, count: int, where: str) -> IntegrityError:
    return IntegrityError(f"{where}: relation {relation.source}.{relation.member} of event {event} points at "
                          f"{relation.target} object {value}, and the event has {count}")


def check_relations(counts: np.ndarray, events: np.ndarray, values: np.ndarray, relation: Relation,
                    where: str) -> None:
    """Indices ``values`` (of objects in events ``events``) within ``counts[event]`` objects (-1: none, for a
    one-to-one relation)."""
    if not len(values):
        return
    low = -1 if not relation.many else 0
    high = counts[events]
    bad = (values < low) | (values >= high)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise relation_error(relation, int(events[i]), int(values[i]), int(high[i]), where)


@dataclass
class ContainerFigures:
    """What a full check learns of a container: objects per event of each collection, and for each
    relation whose source it holds, the smallest and largest index of every event's objects."""

    counts: dict[str, np.ndarray] = field(default_factory=dict)
    lowest: dict[Relation, np.ndarray] = field(default_factory=dict)
    highest: dict[Relation, np.ndarray] = field(default_factory=dict)


def _extremes(n: int, owner: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per event (``n`` of them), the least and greatest of the ``values`` it ``owner``\\ s (empty: max, -2)."""
    low = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    high = np.full(n, -2, dtype=np.int64)
    if len(values):
        np.minimum.at(low, owner, values)
        np.maximum.at(high, owner, values)
    return low, high


def _figures(table: pa.Table, relations: Sequence[Relation]) -> ContainerFigures:
    out = ContainerFigures()
    for name in table.column_names:
        col = table.column(name).combine_chunks()
        if not pa.types.is_list(col.type):
            continue
        per_event = np.diff(col.offsets.to_numpy()).astype(np.int64)
        out.counts[name] = per_event
        mine = [rel for rel in relations if rel.source == name]
        if not mine:
            continue
        objects = col.flatten()
        event_of = np.repeat(np.arange(len(col)), per_event)
        for rel in mine:
            member = objects.flatten()[objects.type.get_field_index(rel.member)]
            if rel.many:
                lengths = np.diff(member.offsets.to_numpy())
                values = member.flatten().to_numpy().astype(np.int64)
                owner = event_of[np.repeat(np.arange(len(member)), lengths)]
            else:
                values, owner = member.to_numpy().astype(np.int64), event_of
            out.lowest[rel], out.highest[rel] = _extremes(len(col), owner, values)
    return out


class Readable(Protocol):
    """What a full check needs of an open container: its clusters, read one at a time."""

    @property
    def num_row_groups(self) -> int: ...

    def read(self, columns: Sequence[str] | None = None, row_groups: Sequence[int] | None = None) -> pa.Table: ...


def check_container(reader: Readable, relations: Sequence[Relation], where: str) -> ContainerFigures:
    """Read every cluster of an open container, which validates its structure, and note what its relations
    need checking against their targets (:func:`check_database`)."""
    parts: list[ContainerFigures] = []
    try:
        for group in range(reader.num_row_groups):
            parts.append(_figures(reader.read(None, [group]), relations))
    except GiodError:
        raise
    except (pa.ArrowException, ValueError, IndexError) as exc:
        raise IntegrityError(f"{where} is corrupt: {exc}") from exc

    def joined(arrays: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(arrays) if arrays else np.zeros(0, np.int64)

    out = ContainerFigures()
    for name in parts[0].counts if parts else []:
        out.counts[name] = joined([p.counts[name] for p in parts])
    for rel in parts[0].lowest if parts else []:
        out.lowest[rel] = joined([p.lowest[rel] for p in parts])
        out.highest[rel] = joined([p.highest[rel] for p in parts])
    return out


def check_database(figures: Mapping[str, ContainerFigures], relations: Sequence[Relation],
                   known_counts: Mapping[str, np.ndarray] | None = None) -> None:
    """Check every relation of the containers in ``figures`` (by container name) against its target's
    objects per event, where the target is among them or in ``known_counts``."""
    counts: dict[str, np.ndarray] = dict(known_counts or {})
    for fig in figures.values():
        counts.update(fig.counts)
    for name, fig in figures.items():
        for rel in relations:
            if rel not in fig.highest or rel.target not in counts:
                continue
            n, low, high = counts[rel.target], fig.lowest[rel], fig.highest[rel]
            if len(n) != len(high):
                raise IntegrityError(f"container {name}: {len(high)} events, its relation {rel.source}."
                                     f"{rel.member} targets {rel.target} with {len(n)}")
            floor = 0 if rel.many else -1
            bad = (low < floor) | (high >= n)
            if bad.any():
                e = int(np.flatnonzero(bad)[0])
                value = int(high[e]) if high[e] >= n[e] else int(low[e])
                raise relation_error(rel, e, value, int(n[e]), f"container {name}")


def check_schema(found: pa.Schema, expected: pa.Schema, where: str) -> None:
    """A file's own schema is its container's in the data model: the footer is the writer's to write, and
    columns of another type or name would pass every structural check and still not be the data asked for
    (IntegrityError naming the first column that differs)."""
    if found.equals(expected, check_metadata=False):
        return
    for f in expected:
        i = found.get_field_index(f.name)
        if i < 0:
            raise IntegrityError(f"{where}: no column {f.name}, which its container has in the data model")
        if not found.field(i).equals(f):
            raise IntegrityError(f"{where}: column {f.name} is {found.field(i).type} in the file, "
                                 f"{f.type} in the data model")
    raise IntegrityError(f"{where}: columns {', '.join(found.names)}, the data model's "
                         f"{', '.join(expected.names)}")
