"""The structure of an Arrow record batch checked from its metadata alone, before anything is decoded.

:func:`check_layout` looks at a batch's message before a buffer is
decompressed or an array built: the field nodes and buffers match the
schema, lengths and null counts are possible, the root length is the
batch's, buffers lie within the body and hold what their node's length
needs, and a compressed buffer claims no more bytes than its codec can make
of it — so a length in metadata cannot make the reader allocate more than
the file can hold. The decoded arrays are then checked by
``giod.storage.validation.check_columns``, as every format's are.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pyarrow as pa

from giod.errors import IntegrityError
from giod.storage import validation  # its SEEN, as tests may replace it
from giod.storage.formats.arrow.blocks import Message, Node, layout

__all__ = ["MAX_RATIO", "buffer_prefixes", "buffer_sizes", "check_layout"]

#: the most bytes one compressed byte can become, per codec (zstd: a 128 kB block from a 4-byte RLE block;
#: LZ4: 255 bytes of match per length byte)
MAX_RATIO = {"zstd": 1 << 15, "lz4": 1 << 8}
#: bytes a compressed buffer may claim beyond its ratio (frame headers of a tiny buffer)
_SLACK = 1 << 16




def _width(t: pa.DataType) -> int | None:
    """Bytes per value of a fixed-width type (None: bits, for booleans)."""
    return None if pa.types.is_boolean(t) else t.bit_width // 8


def check_layout(schema: pa.Schema, msg: Message, sizes: np.ndarray, where: str,
                 key: Hashable | None = None) -> list[Node]:
    """Check a record batch's metadata against ``schema`` before anything is decoded.

    ``sizes`` are the buffers' bytes once decompressed (their stored lengths when the batch is not
    compressed; -1 where that is not known yet). Returns the node tree of the batch.
    """
    roots = layout(schema, len(msg.nodes), len(msg.buffers))
    if key is not None and (key, "layout") in validation.SEEN:
        return roots
    spans = msg.buffers
    if msg.length < 0 or msg.body_length < 0 or (msg.nodes < 0).any() or (spans < 0).any():
        raise IntegrityError(f"{where}: negative lengths in the record batch metadata")
    if len(spans) and int((spans[:, 0] + spans[:, 1]).max()) > msg.body_length:
        raise IntegrityError(f"{where}: buffers lie outside the record batch")
    if msg.codec is not None:
        stored = spans[:, 1] - 8
        bound = np.maximum(stored, 0) * MAX_RATIO.get(msg.codec, 1) + _SLACK
        if ((sizes > bound) & (spans[:, 1] > 0)).any():
            b = int(np.flatnonzero((sizes > bound) & (spans[:, 1] > 0))[0])
            raise IntegrityError(f"{where}: buffer {b} claims {int(sizes[b]):,} bytes, more than its "
                                 f"{int(spans[b, 1]):,} compressed bytes can hold")
    nodes = msg.nodes.tolist()
    size_of = sizes.tolist()

    def need(b: int, n: int, column: str, what: str, length: int) -> None:
        if size_of[b] >= 0 and size_of[b] < n:
            raise IntegrityError(f"{where}, column {column}: the {what} buffer has {size_of[b]:,} bytes, "
                                 f"its {length:,} values need {n:,}")

    def visit(node: Node, column: str, at_least: int | None) -> None:
        length, nulls = nodes[node.index]
        if nulls > length:
            raise IntegrityError(f"{where}, column {column}: {nulls} nulls in {length} values")
        if at_least is not None and length < at_least:
            raise IntegrityError(f"{where}, column {column}: {length} values where its parent needs "
                                 f"{at_least}")
        t = node.type
        validity = node.buffers[0]
        if nulls and not int(spans[validity, 1]):
            raise IntegrityError(f"{where}, column {column}: {nulls} nulls and no validity bitmap")
        if spans[validity, 1]:
            need(validity, -(-length // 8), column, "validity", length)
        if pa.types.is_struct(t):
            for child in node.children:
                visit(child, f"{column}.{child.name}", length)
        elif pa.types.is_fixed_size_list(t):
            visit(node.children[0], column, length * t.list_size)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_string(t) or pa.types.is_binary(t):
            w = 8 if pa.types.is_large_list(t) else 4
            if length:
                need(node.buffers[1], (length + 1) * w, column, "offsets", length)
            for child in node.children:
                visit(child, column, None)  # its length is checked against the offsets once decoded
        else:
            width = _width(t)
            need(node.buffers[1], -(-length // 8) if width is None else length * width, column, "values", length)

    for root in roots:
        if nodes[root.index][0] != msg.length:
            raise IntegrityError(f"{where}, column {root.name}: {nodes[root.index][0]} values in a batch of "
                                 f"{msg.length} events")
        visit(root, root.name, None)
    if key is not None:
        validation.SEEN.add((key, "layout"))
    return roots



def buffer_sizes(msg: Message, body: pa.Buffer | None, where: str) -> np.ndarray:
    """The bytes of each buffer of a batch once decompressed, from the length each compressed buffer
    starts with (``body``: the batch's body; None for an uncompressed batch, whose sizes are its spans)."""
    if msg.codec is None:
        return np.asarray(msg.buffers[:, 1], dtype=np.int64)
    assert body is not None
    return buffer_prefixes(msg, body, where)[0]


def buffer_prefixes(msg: Message, body: pa.Buffer, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Of a compressed batch: each buffer's bytes once decompressed, and which buffers the writer stored
    raw (length prefix -1), read from every prefix of ``body`` at once."""
    spans = msg.buffers
    end = min(msg.body_length, len(body))
    if len(spans) and (int(spans.min()) < 0 or int((spans[:, 0] + spans[:, 1]).max()) > end):
        raise IntegrityError(f"{where}: buffers lie outside the record batch")
    data = np.frombuffer(body, dtype=np.uint8)
    sizes = np.zeros(len(spans), dtype=np.int64)
    raw = np.zeros(len(spans), dtype=bool)
    present = np.flatnonzero(spans[:, 1])
    if (spans[present, 1] < 8).any():
        raise IntegrityError(f"{where}: a compressed buffer shorter than its length prefix")
    if len(present):
        heads = data[spans[present, 0][:, None] + np.arange(8)].copy().view("<i8").reshape(-1)
        if (heads < -1).any():
            raise IntegrityError(f"{where}: a compressed buffer claims a negative length")
        sizes[present] = np.where(heads == -1, spans[present, 1] - 8, heads)
        raw[present] = heads == -1
    return sizes, raw
