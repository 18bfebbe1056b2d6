"""Named Arrow tables in one body: how a server sends a selection made at the source.

The body is ``GIODSEL1`` then, per table, its name (a 2-byte little-endian
length and UTF-8 text), its size (8 bytes, little-endian) and an Arrow IPC
stream of that size. Decoding never trusts the sizes: a size past the end of
the body, a name that is not text, a second table of one name or a stream
Arrow cannot read is a :class:`~giod.errors.CatalogError`, and so is anything
after the last table.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import pyarrow as pa

from giod.errors import CatalogError

__all__ = ["MAGIC", "MEDIA_TYPE", "decode", "encode", "runs_table"]

MAGIC = b"GIODSEL1"
MEDIA_TYPE = "application/vnd.giod.selection"
_NAME = struct.Struct("<H")
_SIZE = struct.Struct("<Q")


def encode(tables: Iterable[tuple[str, pa.Table]], *, compression: str | None = "zstd") -> bytes:
    """``tables`` (name, table) framed in one body, each as an Arrow IPC stream."""
    options = pa.ipc.IpcWriteOptions(compression=compression)
    out = [MAGIC]
    for name, table in tables:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
            writer.write_table(table)
        data = sink.getvalue().to_pybytes()
        raw = name.encode()
        out += [_NAME.pack(len(raw)), raw, _SIZE.pack(len(data)), data]
    return b"".join(out)


def decode(body: bytes, what: str) -> dict[str, pa.Table]:
    """The tables of a body made by :func:`encode`, by name, in order; CatalogError when malformed."""
    view = memoryview(body)
    if bytes(view[: len(MAGIC)]) != MAGIC:
        raise CatalogError(f"{what}: the answer is not a selection (no {MAGIC.decode()} mark)")
    at = len(MAGIC)
    tables: dict[str, pa.Table] = {}
    while at < len(view):
        if at + _NAME.size > len(view):
            raise CatalogError(f"{what}: the answer ends inside a table's name")
        (n,) = _NAME.unpack_from(view, at)
        at += _NAME.size
        if at + n + _SIZE.size > len(view):
            raise CatalogError(f"{what}: the answer ends inside a table's name or size")
        try:
            name = bytes(view[at : at + n]).decode()
        except UnicodeDecodeError:
            raise CatalogError(f"{what}: a table's name is not text") from None
        at += n
        (size,) = _SIZE.unpack_from(view, at)
        at += _SIZE.size
        if size > len(view) - at:
            raise CatalogError(f"{what}: table {name!r} says {size:,} bytes; {len(view) - at:,} are left")
        if name in tables:
            raise CatalogError(f"{what}: table {name!r} sent twice")
        try:
            table = pa.ipc.open_stream(pa.py_buffer(view[at : at + size])).read_all()
            # the IPC reader checks buffer sizes, not the values of offsets: a list's offsets past its values
            # would read memory beyond them (the server is untrusted, its checksums prove transport only)
            table.validate(full=True)
        except (pa.ArrowException, ValueError, OSError) as exc:
            raise CatalogError(f"{what}: table {name!r} is malformed: {exc}") from exc
        tables[name] = table
        at += size
    return tables


def runs_table(runs: object) -> pa.Table:
    """Runs of entries ``[start, stop)`` (an (n, 2) int64 array) as a table of two columns."""
    import numpy as np

    arr = np.asarray(runs, dtype=np.int64).reshape(-1, 2)
    return pa.table({"start": pa.array(arr[:, 0]), "stop": pa.array(arr[:, 1])})
