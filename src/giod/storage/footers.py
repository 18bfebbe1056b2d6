"""The footers a remote reader plans from: an Arrow container's, and a Parquet file's column ranges.

Each is read through ``read(start, stop)`` (the remote site's own range read), so the
planning is the same whatever the transport. Nothing here is trusted: an unreadable
footer is an :class:`IntegrityError`, and the reader checks every byte it uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa

from giod.errors import IntegrityError
from giod.storage.formats.arrow.frame import MAGIC
from giod.storage.formats.arrow.plan import Footer, footer_of

__all__ = ["TAIL", "parquet_column_ranges", "remote_footer"]

TAIL = 64 << 10  # bytes read from the end of a file to find its footer


def remote_footer(read: Callable[[int, int], bytes], path: str, size: int) -> Footer | None:
    """The footer of an Arrow container (None: another format), from the tail fetched ahead."""
    tail = read(max(0, size - TAIL), size)
    if not tail.endswith(MAGIC):
        return None
    try:
        got = footer_of(tail, size)
        if isinstance(got, int):
            got = footer_of(read(got, size), size)
    except (ValueError, pa.ArrowException) as exc:
        raise IntegrityError(f"{path}: unreadable footer: {exc}") from exc
    if isinstance(got, int):
        raise IntegrityError(f"{path}: unreadable footer")
    return got


def parquet_column_ranges(read: Callable[[int, int], bytes], path: str, size: int,
                          columns: Sequence[str]) -> list[tuple[int, int]]:
    """The byte ranges of ``columns`` in a Parquet file (its footer first), from its footer read by ``read``."""
    import pyarrow.parquet as pq

    tail = read(max(0, size - TAIL), size)
    n = int.from_bytes(tail[-8:-4], "little") if len(tail) >= 8 else 0
    if n + 8 > len(tail):
        tail = read(max(0, size - n - 8), size)
    try:
        md = pq.read_metadata(pa.BufferReader(tail))
    except (pa.ArrowException, OSError) as exc:
        raise IntegrityError(f"{path}: unreadable footer: {exc}") from exc
    wanted = [tuple(c.split(".")) for c in columns]
    out: list[tuple[int, int]] = [(max(0, size - len(tail)), size)]
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        for j in range(rg.num_columns):
            cc = rg.column(j)
            leaf = tuple(p for p in cc.path_in_schema.split(".") if p not in ("list", "element", "item"))
            if not any(leaf[: len(w)] == w for w in wanted):
                continue
            start = cc.data_page_offset
            if cc.has_dictionary_page and cc.dictionary_page_offset is not None and cc.dictionary_page_offset > 0:
                start = min(start, cc.dictionary_page_offset)
            out.append((start, start + cc.total_compressed_size))
    return out
