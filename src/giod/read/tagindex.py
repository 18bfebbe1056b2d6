"""Tag index: each tag field of a database sorted, so that a narrow selection reads only what it can match.

When a writer commits a database, it sorts every numeric or boolean tag field
(nan after the numbers, nulls last; ties keep entry order) and writes one
more Arrow IPC container, ``tag-index``, beside the tag container. Its
record batch ``k`` holds block ``k`` (``BLOCK`` positions) of every field's
sorted order: the values and the entry numbers they belong to. The file's
schema metadata carries the directory: per field and block the smallest and
largest value (a zone map over sorted blocks, read with the footer), the
number of non-null and of non-nan values, and the path and checksum of the
tag container the index was built from.

A selection asks, per field it reads, which blocks may hold a match: the
expression is checked against a block's (min, max) with every other field
unknown (``Expression.may_match``, the interval arithmetic that also skips
whole databases), bisecting runs of blocks so that the checks grow with the
runs that match, not with the blocks. Only the matching blocks are read. An
event can be selected only if each field it reads lies in a matching block
(a field's value lies inside its block's range, and nulls never match), so
the entries found in a matching block of every field are the candidates;
their values come from those same blocks, and the expression is evaluated
on them alone. When the matching blocks are more than ``MAX_SHARE`` of the
index, or the index is missing, stale or unreadable, the tag container is
read whole as before (docs/selection.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from giod.expression import Expression
from giod.schema import TAG_INDEX as TAG_INDEX  # the index's container name, where the store can see it
from giod.storage.container import ContainerWriter, WriteOptions, WrittenContainer
from giod.storage.formats.arrow import CODECS
from giod.storage.numpyview import chunked_values, numpy_array, unique
from giod.storage.numpyview import values as _values  # numbers and booleans from their buffer
from giod.storage.pending import FolderSyncs
from giod.storage.site import Site

#: positions of a field's sorted order per record batch (and per directory entry)
BLOCK = 4096
#: schema metadata key of the directory
DIRECTORY_KEY = "giod.tagindex"
#: past this share of the index's blocks, a selection reads the tag container instead
MAX_SHARE = 0.1
_ENTRY = "#entry"  # suffix of a field's entry column: '#' cannot occur in a tag name


def indexable(dtype: pa.DataType) -> bool:
    """Whether selections can read a tag of this type (numbers and booleans)."""
    return bool(pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_boolean(dtype))


def _numpy_sortable(col: pa.Array) -> bool:
    """Whether numpy sorts ``col`` as Arrow does: numbers (not float16) and booleans without nulls."""
    t = col.type
    return col.null_count == 0 and bool(pa.types.is_integer(t) or pa.types.is_boolean(t)
                                        or pa.types.is_float32(t) or pa.types.is_float64(t))


def _sorted_arrow(col: pa.Array) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """``col`` sorted (stable: ties keep entry order; nulls last), the order (entry of each position) and
    the sorted values that are not null, as numpy."""
    # Arrow cannot sort float16, float32 holds every one exactly
    key = col.cast(pa.float32()) if pa.types.is_float16(col.type) else col
    order = pc.array_sort_indices(key, null_placement="at_end")
    values = col.take(order)
    return values, order, _values(values.slice(0, len(col) - col.null_count))


def _sorted_numpy(col: pa.Array) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """:func:`_sorted_arrow` of a column without nulls, in numpy: the same arrays (a stable sort, NaN last,
    -0.0 and 0.0 equal, as Arrow's) without a compute kernel's dispatch per call (a small commit's tag
    index sorted each of its tags through four)."""
    key = _values(col)
    order = np.argsort(key, kind="stable")
    head = key[order]
    entry = np.uint32 if len(col) < 1 << 32 else np.int64
    return numpy_array(head, col.type), numpy_array(order.astype(entry)), head


def build(tags: pa.Table, tag_path: str, tag_checksum: str) -> tuple[pa.Table, dict[str, str]] | None:
    """The index table of one database's tags (one row per event and position) and its directory as
    schema metadata; None when no tag can be indexed."""
    n = tags.num_rows
    entry_type = pa.uint32() if n < 1 << 32 else pa.int64()
    arrays: list[pa.Array] = []
    fields: list[pa.Field] = []
    directory: dict[str, Any] = {}
    for name in tags.column_names:
        col = tags.column(name)
        if not indexable(col.type):
            continue
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        values, order, head = _sorted_numpy(col) if _numpy_sortable(col) else _sorted_arrow(col)
        valid = n - col.null_count
        numeric = valid - (int(np.count_nonzero(np.isnan(head))) if head.dtype.kind == "f" else 0)
        starts = np.arange(0, numeric, BLOCK)
        ends = np.minimum(starts + BLOCK, numeric) - 1
        directory[name] = {"valid": valid, "numeric": numeric,
                           "lo": head[starts].tolist(), "hi": head[ends].tolist()}
        arrays += [values, order.cast(entry_type) if order.type != entry_type else order]
        fields += [pa.field(name, col.type), pa.field(name + _ENTRY, entry_type, nullable=False)]
    if not arrays:
        return None
    meta = {"block": BLOCK, "events": n, "tag": tag_path, "checksum": tag_checksum, "fields": directory}
    # json writes nan/inf bounds as NaN/Infinity, which json.loads reads back
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields)), {DIRECTORY_KEY: json.dumps(meta)}


def worth_writing(events: int) -> bool:
    """Whether a database of ``events`` gets an index: more than one block.

    The index of one block answers no selection: if its block may match, that is all of the index, past
    ``MAX_SHARE``, and the tag container is read; if not, its field's bounds are the database's, which
    the catalog's tag statistics hold already and prune with. For a small commit (a DAQ writer's second)
    it was one file in five, with its inode, fsync and catalog row (docs/decisions.md).
    """
    return events > BLOCK


def write(site: Site, path: str, tags: pa.Table, tag_path: str, tag_checksum: str, options: WriteOptions,
          metadata: Mapping[str, str], folders: FolderSyncs | None = None) -> WrittenContainer | None:
    """Write the index of ``tags`` (stored in the tag container ``tag_path``) to ``path``; ``metadata``
    joins the directory in the footer. None when no tag can be indexed, or when ``tags`` fit in one
    block (:func:`worth_writing`). ``folders``: as :meth:`ContainerWriter.close` takes it."""
    if not worth_writing(tags.num_rows):
        return None
    built = build(tags, tag_path, tag_checksum)
    if built is None:
        return None
    table, directory = built
    # always Arrow, whatever the dataset's containers are: the index is read by record batch
    codec = options.compression if options.compression in CODECS else "zstd"
    # record batch k is block k of the index: never cut
    options = dataclasses.replace(options, container_format="arrow", compression=codec,
                                  compression_level=options.compression_level if codec == "zstd" else None,
                                  compressed_cluster_bytes=None)
    w = ContainerWriter(site, path, table.schema, options, {**metadata, **directory})
    for start in range(0, table.num_rows, BLOCK):
        w.write_cluster(table.slice(start, BLOCK), last=start + BLOCK >= table.num_rows)
    return w.close(folders)


def same_file(indexed: str, path: str) -> bool:
    """Whether the tag container an index names is ``path``: the same database folder and file name.

    The dataset's folder is not compared: a copy under another dataset name (``giod copy --as``)
    keeps the folder and file names below it, and with them its index.
    """
    return indexed.split("/")[-2:] == path.split("/")[-2:]


@dataclass(frozen=True)
class Directory:
    """What an index's footer says: block size, events, the tag container it indexes, per-field bounds."""

    block: int
    events: int
    tag: str
    checksum: str
    fields: Mapping[str, Mapping[str, Any]]

    @classmethod
    def of(cls, schema: pa.Schema) -> Directory | None:
        raw = (schema.metadata or {}).get(DIRECTORY_KEY.encode())
        if raw is None:
            return None
        try:
            meta = json.loads(raw)
            return cls(int(meta["block"]), int(meta["events"]), str(meta["tag"]), str(meta["checksum"]),
                       dict(meta["fields"]))
        except (ValueError, KeyError, TypeError):
            return None

    @property
    def n_blocks(self) -> int:
        return -(-self.events // self.block)

    def blocks(self, expression: Expression, name: str) -> np.ndarray:
        """The blocks of ``name``'s sorted order that may hold an event ``expression`` selects."""
        return self._walk(expression, name, count=False)[0]

    def counted(self, expression: Expression, name: str) -> tuple[np.ndarray, int]:
        """The blocks of ``name``'s sorted order that may hold an event ``expression`` selects and one it
        does not (to be read), and how many events lie in blocks of numbers every one of which it selects
        (counted, not read)."""
        return self._walk(expression, name, count=True)

    def _walk(self, expression: Expression, name: str, count: bool) -> tuple[np.ndarray, int]:
        info = self.fields[name]
        lo, hi = info["lo"], info["hi"]
        found: list[int] = []
        whole = int(info["numeric"]) // self.block  # blocks [0, whole) hold numbers alone
        certain = 0

        def visit(i: int, j: int) -> None:  # blocks [i, j) of the numbers: sorted, so lo[i]..hi[j - 1]
            nonlocal certain
            bounds = {name: (lo[i], hi[j - 1])}
            may, always = (expression.matches(bounds) if count and j <= whole
                           else (expression.may_match(bounds, numbers=j <= whole), False))
            if not may:
                return
            if always:
                certain += (j - i) * self.block
                return
            if j - i == 1:
                found.append(i)
                return
            mid = (i + j) // 2
            visit(i, mid)
            visit(mid, j)

        if lo:
            # the blocks of the closed range every selected value lies in first (two searches), then the
            # expression's own walk within them
            first, stop = 0, len(lo)
            box = expression.necessary_box().get(name)
            if box is not None and not (math.isnan(box[0]) or math.isnan(box[1])):
                first = int(np.searchsorted(np.asarray(hi, dtype=np.float64), box[0], side="left"))
                stop = int(np.searchsorted(np.asarray(lo, dtype=np.float64), box[1], side="right"))
            if first < stop:
                visit(first, stop)
        # blocks past the numbers hold nan (a float's bounds always allow it), then nulls (never selected)
        nan_blocks = range(-(-int(info["numeric"]) // self.block), -(-int(info["valid"]) // self.block))
        if len(nan_blocks) and expression.may_match({name: (math.nan, math.nan)}):
            found += list(nan_blocks)
        return np.asarray(found, dtype=np.int64), certain


def count(expression: Expression, directory: Directory,
          read: Callable[[np.ndarray, list[str]], pa.Table]) -> int | None:
    """How many entries ``expression`` (of one field) selects: the events of blocks it selects whole
    counted from the directory, the values of the blocks at its edges read and evaluated; None when the
    index does not cover the expression or would read more than ``MAX_SHARE`` of itself."""
    names = sorted(expression.fields)
    if len(names) != 1 or names[0] not in directory.fields:
        return None
    n = names[0]
    blocks, certain = directory.counted(expression, n)
    if not len(blocks):
        return certain
    if len(blocks) > MAX_SHARE * directory.n_blocks:
        return None
    table = read(blocks, [n])
    sizes = np.minimum(directory.block, directory.events - blocks * directory.block)
    if table.num_rows != int(sizes.sum()):
        return None  # not what the directory describes: the tag container will answer
    # the values only (no entries, no order): nulls, past ``valid``, are never selected
    position = np.repeat(blocks * directory.block - (np.cumsum(sizes) - sizes), sizes) + np.arange(table.num_rows)
    values = table.column(n).filter(numpy_array(position < int(directory.fields[n]["valid"])))
    return certain + int(np.count_nonzero(np.asarray(expression.evaluate({n: values}, size=len(values)),
                                                     dtype=bool)))


def select(expression: Expression, directory: Directory,
           read: Callable[[np.ndarray, list[str]], pa.Table]) -> np.ndarray | None:
    """Selected local entries, read through the index (``read(blocks, columns)`` reads those columns of
    those record batches);
    None when the index does not cover the expression or would read more than ``MAX_SHARE`` of itself."""
    names = sorted(expression.fields)
    if not names or any(n not in directory.fields for n in names):
        return None
    matched = {n: directory.blocks(expression, n) for n in names}
    wanted = unique(np.concatenate(list(matched.values())))
    if len(wanted) > MAX_SHARE * directory.n_blocks:
        return None
    if not len(wanted):
        return np.zeros(0, dtype=np.int64)
    table = read(wanted, [c for n in names for c in (n, n + _ENTRY)])
    sizes = np.minimum(directory.block, directory.events - wanted * directory.block)
    if table.num_rows != int(sizes.sum()):
        return None  # not what the directory describes: the tag container will answer
    # for every row read: its block and its position in each field's sorted order
    block_of = np.repeat(wanted, sizes)
    position = block_of * directory.block + (np.arange(table.num_rows) - np.repeat(np.cumsum(sizes) - sizes, sizes))
    if len(names) == 1:  # one field: its rows decide alone, and only those that pass are sorted
        n = names[0]
        mask = numpy_array(np.isin(block_of, matched[n]) & (position < int(directory.fields[n]["valid"])))
        entries = chunked_values(table.column(n + _ENTRY).filter(mask)).astype(np.int64)
        values = table.column(n).filter(mask)
        return np.sort(entries[np.asarray(expression.evaluate({n: values}, size=len(entries)), dtype=bool)])
    candidates: np.ndarray | None = None
    kept: dict[str, tuple[np.ndarray, np.ndarray, pa.ChunkedArray]] = {}
    for n in names:
        rows = np.isin(block_of, matched[n]) & (position < int(directory.fields[n]["valid"]))
        mask = numpy_array(rows)
        entries = chunked_values(table.column(n + _ENTRY).filter(mask)).astype(np.int64)
        order = np.argsort(entries)  # a field's index names each entry once: any sort gives the one order
        ordered = entries[order]
        kept[n] = (order, ordered, table.column(n).filter(mask))
        candidates = ordered if candidates is None else np.intersect1d(candidates, ordered, assume_unique=True)
    assert candidates is not None
    columns = {}
    for n, (order, ordered, values) in kept.items():
        at = order if len(ordered) == len(candidates) else order[np.searchsorted(ordered, candidates)]
        columns[n] = values.take(numpy_array(at))
    return np.asarray(candidates[expression.evaluate(columns, size=len(candidates))])
