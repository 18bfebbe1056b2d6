"""A projected read planned where the file is: the ranges a far reader of some columns will ask for.

A giod server answers ``GET /files/<site>/<path>?columns=…`` with these ranges
in one multipart answer, so that a reader far away gets the footer, every
batch's metadata and the buffers of its columns in one round trip, instead
of one round trip for each of the three steps (``.plan``). The reader checks
every byte as it would after reading them itself; nothing here is trusted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa

from giod.errors import IntegrityError
from giod.storage.formats.arrow.plan import footer_of, projected
from giod.storage.ranges import coalesce

__all__ = ["TAIL", "served_ranges"]

TAIL = 64 << 10  # bytes of the end of a file a reader reads first, for its footer (the reader's own)
GAP = 64  # the padding between one column's buffers: fetched, so that their ranges travel as one


def served_ranges(read_at: Callable[[int, int], bytes], size: int, columns: Sequence[str], max_bytes: int
                  ) -> tuple[list[tuple[int, int]], bool]:
    """The ranges a read of ``columns`` of an Arrow file of ``size`` bytes asks for (tail, batches' metadata,
    the columns' buffers), sorted and coalesced, and whether the buffers are among them: they are left out
    when they exceed ``max_bytes`` (the reader then plans them itself from the metadata sent).

    ``read_at(start, stop)`` reads the file. IntegrityError when the file is no Arrow file giod can plan.
    """
    tail_at = max(0, size - TAIL)
    tail = read_at(tail_at, size)
    try:
        footer = footer_of(tail, size)
        if isinstance(footer, int):
            tail_at = footer
            footer = footer_of(read_at(footer, size), size)
        if isinstance(footer, int):
            raise IntegrityError("unreadable footer")
        metas = footer.meta_ranges()
        if max_bytes <= 0:  # footer and metadata alone: the reader plans the rest (and checks all of it)
            return coalesce([(tail_at, size), *metas], GAP), False
        wanted = projected(footer, [read_at(a, b) for a, b in metas], columns)
    except (ValueError, pa.ArrowException) as exc:
        raise IntegrityError(f"unreadable footer or batch metadata: {exc}") from exc
    head = [(tail_at, size), *metas]
    body = [(0, size)] if wanted is None else wanted
    every = coalesce([*head, *body], GAP)
    if sum(b - a for a, b in every) <= max_bytes:
        return every, True
    return coalesce(head, GAP), False
