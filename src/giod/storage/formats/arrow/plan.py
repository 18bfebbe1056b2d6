"""The byte ranges a projected read of an Arrow container needs, planned before it is read.

A reader far from its file pays a round trip for every step it cannot plan.
The footer gives each record batch's place and its metadata's length; each
batch's metadata (its Message flatbuffer) gives the offset and length of
every buffer in its body. From those two steps the exact buffers of the
projected columns are known for every batch of the file at once, so they
travel together, coalesced, with many requests in flight, and nothing of
the other columns crosses the link. The reader
(``giod.storage.formats.arrow.reader``) asks for exactly these ranges, so a
site that fetched them ahead answers it from what arrived.

This is only a plan: nothing here is trusted; the reader checks every byte
it uses (catalog CRC-32C of footer and metadata, block checksums of buffers).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from giod.errors import IntegrityError
from giod.storage.formats.arrow.blocks import Message, parse_message
from giod.storage.formats.arrow.columns import body_ranges, plan_columns
from giod.storage.formats.arrow.frame import MAGIC, parse_footer, schema_of

__all__ = ["Footer", "batch_ranges", "footer_of", "projected"]


class Footer:
    """What a file's footer says: the schema and, per record batch, its offset and metadata length."""

    def __init__(self, footer: bytes | memoryview, size: int):
        blocks = parse_footer(footer)
        self.schema: pa.Schema = schema_of(footer)
        self.offsets = blocks["offset"].astype(np.int64)
        self.meta = blocks["meta"].astype(np.int64)
        ends = self.offsets + self.meta + blocks["body"].astype(np.int64)
        if len(blocks) and (self.offsets.min() < 8 or ends.max() > size):
            raise IntegrityError("record batches lie outside the file")

    def meta_ranges(self) -> list[tuple[int, int]]:
        """Where each batch's metadata lies."""
        return [(int(a), int(a + m)) for a, m in zip(self.offsets, self.meta, strict=True)]


def footer_of(tail: bytes | memoryview, size: int) -> Footer | int:
    """The footer in ``tail`` (the last bytes of a file of ``size``), or where the tail must start to hold it."""
    tail = memoryview(tail)
    if len(tail) < 10 or bytes(tail[-6:]) != MAGIC:
        raise IntegrityError("not an Arrow file")
    n = int.from_bytes(bytes(tail[-10:-6]), "little", signed=True)
    if not 0 < n <= size - 18:
        raise IntegrityError(f"footer length {n} is impossible")
    if n + 10 > len(tail):
        return size - n - 10
    return Footer(tail[len(tail) - 10 - n:len(tail) - 10], size)


def batch_ranges(msg: Message, schema: pa.Schema, names: Sequence[str], body_start: int, where: str
                 ) -> list[tuple[int, int]]:
    """The absolute ranges a remote read of columns ``names`` of one batch fetches (the reader's own plan)."""
    plan = plan_columns(msg, schema, names, where)
    return [(body_start + a, body_start + b) for a, b in body_ranges(plan, msg)]


def projected(footer: Footer, metas: Sequence[bytes | memoryview], columns: Sequence[str]
              ) -> list[tuple[int, int]] | None:
    """The ranges of the buffers of ``columns`` (Parquet-style paths) in every batch, from their metadata;
    None when the read takes every column (whole batches are read)."""
    names = list(dict.fromkeys(c.partition(".")[0] for c in columns))
    if set(names) >= set(footer.schema.names):
        return None
    out: list[tuple[int, int]] = []
    for i, meta in enumerate(metas):
        msg = parse_message(bytes(meta))
        body = int(footer.offsets[i] + footer.meta[i])
        out += batch_ranges(msg, footer.schema, names, body, f"record batch {i}")
    return out
