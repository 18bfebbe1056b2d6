"""Arrow IPC container files: one record batch per cluster, no per-value levels.

An Arrow IPC file (``pyarrow.ipc.new_file``) stores each cluster as one
record batch whose buffers (validity, offsets, values) are the in-memory
Arrow buffers, each compressed on its own (zstd or lz4) or stored raw. Lists
of structs need no repetition/definition levels, so reading is a
decompression and, uncompressed, a memory map (docs/storage.md,
docs/decisions.md §37). pyarrow, polars and DuckDB read the files as they are.

giod reads the file itself: the footer's block table gives the byte range
of every record batch, so a selection fetches only the batches holding its
events (locally from a memory map, remotely as coalesced range requests),
and within a batch only the checksummed blocks holding them
(``.rows``, ``.columns`` beside this module); each batch's metadata is
checked against the CRC-32C the writer recorded in the catalog (``.structure``
checks its layout), and its buffers against the checksums the metadata
holds, before they are used. The writer is ``.writer``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from giod.errors import IntegrityError, NotFound
from giod.storage.formats.arrow.blocks import BLOCK, SCHEMA_KEY, check_batch, has_block_layout, parse_message
from giod.storage.formats.arrow.columns import body_ranges, decode_columns, plan_columns, read_columns
from giod.storage.formats.arrow.frame import MAGIC, crc32c, parse_footer, schema_of
from giod.storage.formats.arrow.gather import BatchLayout, FileLayout
from giod.storage.formats.arrow.projection import project, top_columns
from giod.storage.formats.arrow.rows import read_rows as read_batch_rows
from giod.storage.formats.arrow.structure import buffer_sizes, check_layout
from giod.storage.kind import Site
from giod.storage.numpyview import numpy_array
from giod.storage.validation import check_columns

__all__ = ["ArrowContainerReader"]

#: bytes read from the end of a remote file to find the footer in one request
TAIL = 64 << 10
#: batches this close in the file are fetched in one range (0: only neighbours, which touch)
COALESCE_GAP = 0
#: a batch with more selected events than this share of its events is read whole, not block by block
PARTIAL_SHARE = 1 / 16
#: ... and so is one where the blocks its events touch (about one per event and buffer) pass this share of all
#: its blocks: checking a block costs a call, checking a whole buffer one call per buffer
PARTIAL_BLOCKS = 1 / 8


class ArrowContainerReader:
    """Reads clusters (record batches) and columns of one Arrow IPC container file.

    ``clusters`` are the events of each batch and ``checksums`` the CRC-32C
    of each batch's bytes and, last, of the footer, as the catalog recorded
    them: the footer is checked on opening, every batch before it is decoded.
    """

    def __init__(self, site: Site, path: str, *, size: int, clusters: Sequence[int] | None = None,
                 checksums: Sequence[int] | None = None):
        self.site = site
        self.path = path
        self.size = size
        local = site.local_path(path)
        self._map: pa.Buffer | None = None
        self._file: Any = None
        if local is not None:
            with pa.memory_map(str(local)) as mm:
                self._map = mm.read_buffer()  # zero-copy; the mapping lives as long as the buffer
        else:
            self._file = site.open(path)
        try:
            # the footer first, checked before it is believed: it says where everything else is
            self._open_footer(checksums[-1] if checksums else None)
        except (pa.ArrowException, ValueError) as exc:
            raise IntegrityError(f"container {path} on site {site.name}: unreadable Arrow footer: {exc}") from exc
        n = len(self.blocks)
        if checksums:
            if len(checksums) != n + 1:
                raise IntegrityError(f"container {path} on site {site.name} has {n} record batches, "
                                     f"the catalog recorded {len(checksums) - 1} checksums")
        if clusters is not None and len(clusters) != n:
            raise IntegrityError(f"container {path} on site {site.name} has {n} record batches, "
                                 f"the catalog recorded {len(clusters)} clusters")
        self.clusters = None if clusters is None else np.asarray(clusters, dtype=np.int64)
        self.checksums = list(checksums) if checksums else None

    def _open_footer(self, crc: int | None) -> None:
        if self.size < len(MAGIC) * 2 + 4:
            raise IntegrityError(f"container {self.path} on site {self.site.name} is too short for an Arrow file")
        # one request for footer and tail from far away; a memory map just looks
        tail_at = max(0, self.size - (TAIL if self._map is None else 10))
        tail = self._ranges([(tail_at, self.size)])[0]
        if bytes(tail[-6:]) != MAGIC:
            raise IntegrityError(f"container {self.path} on site {self.site.name} does not end as an Arrow file "
                                 "(truncated?)")
        n = int.from_bytes(bytes(tail[-10:-6]), "little", signed=True)
        if not 0 < n <= self.size - 18:
            raise IntegrityError(f"container {self.path} on site {self.site.name}: footer length {n} is impossible")
        if n + 10 > len(tail):
            tail_at = self.size - n - 10
            tail = self._ranges([(tail_at, self.size)])[0]
        self._tail = (tail_at, tail)  # a gathered read takes the buffers it holds from here (``layout``)
        footer = memoryview(tail)[len(tail) - 10 - n:len(tail) - 10]
        # checksummed with its length and magic
        if crc is not None and crc32c(memoryview(tail)[len(tail) - 10 - n:]) != crc:
            raise IntegrityError(f"container {self.path} on site {self.site.name}: CRC-32C mismatch in the footer "
                                 "(the bytes changed since they were written)")
        blocks = parse_footer(footer)
        ends = blocks["offset"] + blocks["meta"] + blocks["body"]
        if len(blocks) and (blocks["offset"].min() < 8 or ends.max() > self.size - 10 - n):
            raise IntegrityError(f"container {self.path} on site {self.site.name}: record batches lie outside "
                                 "the file")
        self.blocks = np.stack([blocks["offset"], ends], axis=1) if len(blocks) else np.zeros((0, 2), np.int64)
        self.meta = blocks["meta"].astype(np.int64)
        self.schema = schema_of(footer)
        # block checksums: the catalog's CRC of a batch covers its metadata, which checksums the rest
        mark = (self.schema.metadata or {}).get(SCHEMA_KEY)
        if mark is not None and mark != str(BLOCK).encode():
            raise IntegrityError(f"container {self.path} on site {self.site.name}: checksum blocks of "
                                 f"{mark.decode(errors='replace')} bytes (this giod reads {BLOCK})")
        self.block_checksums = mark is not None
        self._layout = has_block_layout(self.schema)  # a layout giod walks buffer by buffer

    # ------------------------------------------------------------------ bytes

    def _ranges(self, ranges: Sequence[tuple[int, int]]) -> list[Any]:
        if self._map is not None:
            return [self._map.slice(a, b - a) for a, b in ranges]
        f = self._file
        if hasattr(f, "read_many"):  # a remote file: all in flight at once
            return [pa.py_buffer(d) for d in f.read_many(list(ranges))]
        out = []
        for a, b in ranges:
            f.seek(a)
            out.append(pa.py_buffer(f.read(b - a)))
        return out

    def _batches(self, which: Sequence[int] | np.ndarray, names: Sequence[str] | None = None
                 ) -> list[pa.RecordBatch]:
        """The record batches ``which`` (sorted), fetched in few ranges, decoded and checked (their columns
        ``names``, all by default)."""
        if not len(which):
            return []
        spans = self.blocks[np.asarray(which, dtype=np.int64)]
        # neighbouring batches travel in one range
        groups: list[list[int]] = [[0]]
        for i in range(1, len(spans)):
            if spans[i, 0] - spans[groups[-1][-1], 1] <= COALESCE_GAP:
                groups[-1].append(i)
            else:
                groups.append([i])
        got = self._ranges([(int(spans[g[0], 0]), int(spans[g[-1], 1])) for g in groups])
        out: list[pa.RecordBatch] = []
        for g, data in zip(groups, got, strict=True):
            base = int(spans[g[0], 0])
            if len(data) != int(spans[g[-1], 1]) - base:
                raise IntegrityError(f"container {self.path} on site {self.site.name}: short read")
            for i in g:
                a, b = int(spans[i, 0]) - base, int(spans[i, 1]) - base
                out.append(self._decode(int(which[i]), data.slice(a, b - a), names))
        return out

    def _where(self, index: int) -> str:
        return f"container {self.path} on site {self.site.name}, record batch {index}"

    def _message(self, index: int, meta: pa.Buffer) -> Any:
        """The parsed metadata of batch ``index`` (block checksums), checked against the catalog's CRC."""
        if self.checksums is not None and crc32c(meta) != self.checksums[index]:
            raise IntegrityError(f"{self._where(index)}: CRC-32C mismatch in the metadata (the bytes changed "
                                 "since they were written)")
        msg = parse_message(bytes(meta))
        if msg.table is None:
            raise IntegrityError(f"{self._where(index)} has no block checksums")
        return msg

    def _key(self, index: int) -> tuple[str, int, int, int] | None:
        """What names batch ``index`` among the batches validated (its catalog CRC covers every buffer's)."""
        return None if self.checksums is None else (self.path, self.size, index, int(self.checksums[index]))

    def _decode(self, index: int, data: pa.Buffer, names: Sequence[str] | None = None) -> pa.RecordBatch:
        """Batch ``index`` from its bytes, checked: metadata before decoding, then columns ``names`` (all)."""
        where = self._where(index)
        meta = data.slice(0, int(self.meta[index]))
        if self.block_checksums:
            msg = self._message(index, meta)
        elif self.checksums is not None and crc32c(data) != self.checksums[index]:
            raise IntegrityError(f"{where}: CRC-32C mismatch (the bytes changed since they were written)")
        else:
            msg = parse_message(bytes(meta))
        key = self._key(index)
        if self._layout:  # nothing decompressed, nothing built, before the metadata makes sense
            check_layout(self.schema, msg, buffer_sizes(msg, data.slice(len(meta)), where), where, key)
        try:
            batch = ipc.read_record_batch(ipc.read_message(data), self.schema)
            if msg.table is not None:
                check_batch(batch, msg.table, where)
        except (pa.ArrowException, ValueError) as exc:
            raise IntegrityError(f"{where} is corrupt: {exc}") from exc
        present = set(batch.schema.names)
        check_columns(((n, batch.column(n)) for n in (names if names is not None else batch.schema.names)
                       if n in present),
                      where, key)
        if self.clusters is not None and batch.num_rows != self.clusters[index]:
            raise IntegrityError(f"{where} has {batch.num_rows} events, the catalog recorded "
                                 f"{self.clusters[index]}")
        return batch

    def layout(self) -> FileLayout | None:
        """The file's batches as :mod:`.gather` needs them (metadata checked against the catalog), or None
        when its site cannot receive into given memory or the file has no block checksums."""
        receive = getattr(self.site, "receive_into", None)
        if receive is None or self._map is not None or not self.block_checksums or self.checksums is None:
            return None
        which = range(len(self.blocks))
        metas = self._ranges([(int(self.blocks[i, 0]), int(self.blocks[i, 0] + self.meta[i])) for i in which])
        batches = []
        for i, meta in zip(which, metas, strict=True):
            msg = self._message(i, meta)
            if self.clusters is not None and msg.length != self.clusters[i]:
                raise IntegrityError(f"{self._where(i)} has {msg.length} events, the catalog recorded "
                                     f"{self.clusters[i]}")
            batches.append(BatchLayout(msg, int(self.blocks[i, 0] + self.meta[i]), self._where(i), self._key(i)))
        path = self.path
        tail_at, tail = self._tail
        return FileLayout(self.schema, tuple(batches), lambda a, b, views, landed: receive(path, a, b, views, landed),
                          f"container {path} on site {self.site.name}", tail_at,
                          lambda a, b: memoryview(tail)[a - tail_at:b - tail_at])

    # ------------------------------------------------------------------ reads

    @property
    def num_batches(self) -> int:
        return len(self.blocks)

    def read(self, columns: Sequence[str] | None, batches: Sequence[int] | None = None) -> pa.Table:
        """``columns`` (Parquet-style paths: ``coll``, ``coll.list.element.field``) of the given batches."""
        which = np.arange(self.num_batches) if batches is None else np.asarray(sorted(batches), dtype=np.int64)
        if columns is not None and self.block_checksums and len(which):
            names = list(dict.fromkeys(c.partition(".")[0] for c in columns))
            known = set(self.schema.names)
            missing = [n for n in names if n not in known]
            if missing:
                raise NotFound(f"no column {missing[0]!r} in the container (it has {', '.join(self.schema.names)})")
            if len(names) < len(self.schema.names):
                if self._map is not None:
                    return project(self._some_columns(names, which), columns)
                return project(self._fetch_columns(names, which), columns)
        table = pa.Table.from_batches(self._batches(which, top_columns(columns)), schema=self.schema)
        return project(table, columns)

    def _some_columns(self, names: list[str], which: np.ndarray) -> pa.Table:
        """Columns ``names`` of batches ``which`` of a memory-mapped file: of a compressed batch only their
        buffers are decompressed."""
        assert self._map is not None
        whole = [self._map.slice(int(a), int(b - a)) for a, b in self.blocks[which]]
        parts: dict[int, pa.Table] = {}
        for i, data in zip(which.tolist(), whole, strict=True):
            msg = self._message(i, data.slice(0, int(self.meta[i])))
            if not msg.compressed:  # decoded whole, which maps its buffers and copies nothing
                parts[i] = pa.Table.from_batches([self._decode(i, data, names)], schema=self.schema).select(names)
                continue
            if self.clusters is not None and msg.length != self.clusters[i]:
                raise IntegrityError(f"{self._where(i)} has {msg.length} events, the catalog recorded "
                                     f"{self.clusters[i]}")
            mapped = data.slice(int(self.meta[i]))
            parts[i] = read_columns(self.schema, msg, int(self.blocks[i, 0] + self.meta[i]), mapped,
                                                 self._ranges, names, self._where(i), self._key(i))
        tables = [parts[i] for i in which.tolist()]
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def _fetch_columns(self, names: list[str], which: np.ndarray) -> pa.Table:
        """Columns ``names`` of batches ``which`` of a remote file: every batch's metadata in one call, then
        only those columns' buffers (``.plan``: the ranges a site fetched ahead are these), in one call."""
        metas = self._ranges([(int(a), int(a + self.meta[i])) for i, a in zip(which.tolist(), self.blocks[which, 0],
                                                                                 strict=True)])
        msgs = [self._message(i, meta) for i, meta in zip(which.tolist(), metas, strict=True)]
        plans, ranges = [], []
        for i, msg in zip(which.tolist(), msgs, strict=True):
            if self.clusters is not None and msg.length != self.clusters[i]:
                raise IntegrityError(f"{self._where(i)} has {msg.length} events, the catalog recorded "
                                     f"{self.clusters[i]}")
            plan = plan_columns(msg, self.schema, names, self._where(i))
            start = int(self.blocks[i, 0] + self.meta[i])
            plans.append(plan)
            ranges.append([(start + a, start + b) for a, b in body_ranges(plan, msg)])
        got = self._ranges([r for rs in ranges for r in rs])
        tables, at = [], 0
        for i, msg, plan, rs in zip(which.tolist(), msgs, plans, ranges, strict=True):
            parts = got[at:at + len(rs)]
            at += len(rs)
            tables.append(decode_columns(plan, msg, self.schema, parts, self._where(i), self._key(i)))
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def batch_rows(self) -> np.ndarray:
        """The first entry of every batch, and the total, as a cumulative array."""
        if self.clusters is None:  # no catalog figures: the batches' own (reads every batch)
            counts = [b.num_rows for b in self._batches(np.arange(self.num_batches))]
            self.clusters = np.asarray(counts, dtype=np.int64)
        return np.concatenate([[0], np.cumsum(self.clusters)])

    def read_rows(self, columns: Sequence[str] | None, rows: np.ndarray) -> pa.Table:
        """Only the given entries (sorted), reading only the record batches that hold them."""
        first = self.batch_rows()
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) and (rows[0] < 0 or rows[-1] >= first[-1]):
            raise IntegrityError(f"container {self.path} holds {first[-1]} events, not entry {rows[-1]}")
        batch = np.searchsorted(first, rows, side="right") - 1
        which = np.unique(batch)
        if self.block_checksums:
            return self._read_few(columns, rows, batch, which, first)
        table = pa.Table.from_batches(self._batches(which, top_columns(columns)), schema=self.schema)
        # where each batch read starts in ``table``, then each entry's place in it
        starts = np.zeros(self.num_batches, dtype=np.int64)
        starts[which] = np.concatenate([[0], np.cumsum(np.diff(first)[which])[:-1]])
        return project(table.take(numpy_array(starts[batch] + rows - first[batch])), columns)

    def _read_few(self, columns: Sequence[str] | None, rows: np.ndarray, batch: np.ndarray, which: np.ndarray,
                  first: np.ndarray) -> pa.Table:
        """Rows of batches with block checksums: few rows of a batch read block by block, many whole."""
        wanted: dict[str, set[str] | None] = {}
        for c in columns if columns is not None else self.schema.names:
            name, _, member = c.partition(".")
            if name not in self.schema.names:
                raise NotFound(f"no column {name!r} in the container (it has {', '.join(self.schema.names)})")
            if not member or wanted.get(name, set()) is None:
                wanted[name] = None
            else:
                wanted.setdefault(name, set()).add(c.rsplit(".", 1)[-1])  # type: ignore[union-attr]
        bounds = np.searchsorted(batch, which, side="left"), np.searchsorted(batch, which, side="right")
        few = {int(i): rows[a:b] - first[i] for i, a, b in zip(which, *bounds, strict=True)
               if (b - a) <= PARTIAL_SHARE * (first[i + 1] - first[i])}
        messages: dict[int, tuple[Any, pa.Buffer, pa.Buffer | None]] = {}
        compressed: dict[int, tuple[Any, pa.Buffer | None]] = {}  # only their columns' buffers are decoded
        if few:
            spans = self.blocks[list(few)]
            metas = ([self._map.slice(int(a), int(b - a)) for a, b in spans] if self._map is not None else
                     self._ranges([(int(a), int(a + self.meta[i])) for i, (a, _) in zip(few, spans, strict=True)]))
            for i, data in zip(few, metas, strict=True):
                meta = data.slice(0, int(self.meta[i]))
                msg = self._message(i, meta)
                touched = len(few[i]) * int(np.count_nonzero(msg.buffers[:, 1]))
                mapped = data.slice(len(meta)) if self._map is not None else None
                if msg.compressed:  # a compressed buffer is read whole
                    compressed[i] = (msg, mapped)
                elif touched <= PARTIAL_BLOCKS * (len(msg.table) - len(msg.buffers)):
                    messages[i] = (msg, meta, data if self._map is not None else None)
        many = [int(i) for i in which if int(i) not in messages and int(i) not in compressed]
        parts: dict[int, pa.Table] = {}
        for i, got in zip(many, self._batches(np.asarray(many, dtype=np.int64), list(wanted)), strict=True):
            local = rows[batch == i] - first[i]
            parts[i] = project(pa.Table.from_batches([got], schema=self.schema), columns).take(numpy_array(local))
        for i, (msg, mapped) in compressed.items():
            start = int(self.blocks[i, 0] + self.meta[i])
            table = read_columns(self.schema, msg, start, mapped, self._ranges, list(wanted),
                                              self._where(i), self._key(i))
            parts[i] = project(table, columns if columns is not None else None).take(numpy_array(few[i]))
        for i, (msg, meta, mapped) in messages.items():
            try:
                parts[i] = read_batch_rows(self.schema, msg, meta, int(self.blocks[i, 0]), mapped, self._ranges,
                                               few[i], wanted, self._where(i), self._key(i))
            except (pa.ArrowException, ValueError) as exc:
                raise IntegrityError(f"{self._where(i)} is corrupt: {exc}") from exc
        tables = [parts[int(i)] for i in which]
        if not tables:
            return project(self.schema.empty_table(), columns)
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def refresh(self) -> bool:
        if self._map is None:
            return False
        local = self.site.local_path(self.path)
        if local is None:
            return False
        try:
            with pa.memory_map(str(local)) as mm:
                if mm.size() != self.size:  # not the file this reader checked: opened anew, or not kept
                    return False
                self._map = mm.read_buffer()
        except (OSError, pa.ArrowException):
            return False
        self._tail = (self._tail[0], self._map.slice(self._tail[0], self.size - self._tail[0]))
        return True

    def close(self) -> None:
        self._map = None
        if self._file is not None and hasattr(self._file, "close"):
            self._file.close()


