"""Arrow arrays of numbers as numpy, read from their buffers.

``pa.Array.to_numpy`` imports pandas on its first call in a process (about half a second, paid by a
first ``giod show``, ``ds.read`` or ``ds.event``); a flat array of numbers or booleans without nulls is
its data buffer, so :func:`values` gives the same array (the same dtype and values, a read-only view for
numbers) without it. Anything else (nulls, strings, nested types) still goes through ``to_numpy``.
Likewise ``np.unique`` imports ``numpy.ma`` on its first call (~15 ms of a new process's first count):
:func:`unique` gives its answer for the integer arrays giod asks it of, without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from giod.errors import IntegrityError

__all__ = ["chunked_values", "numpy_array", "offsets", "unique", "values"]


def values(array: pa.Array) -> np.ndarray:
    """``array.to_numpy(zero_copy_only=False)`` for any array, from its buffer when it is numbers or
    booleans without nulls."""
    t, n = array.type, len(array)
    plain = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
    if not plain or array.null_count:
        return np.asarray(array.to_numpy(zero_copy_only=False))
    if pa.types.is_boolean(t):
        bits = array.buffers()[1]
        if not n or bits is None:
            return np.zeros(0, dtype=bool)
        need = (array.offset + n + 7) // 8
        _check_size(bits, need, n)  # and only those bytes unpacked: a buffer may be longer
        return np.unpackbits(np.frombuffer(bits, np.uint8, count=need), bitorder="little")[array.offset:] \
            [:n].astype(bool)
    kind = "f" if pa.types.is_floating(t) else "i" if pa.types.is_signed_integer(t) else "u"
    dtype = np.dtype(f"={kind}{t.bit_width // 8}")
    data = array.buffers()[1]
    if not n or data is None:
        return np.zeros(0, dtype=dtype)
    # a buffer may be longer than its values, by any number of bytes (Arrow allows it; a file may say so)
    _check_size(data, (array.offset + n) * dtype.itemsize, n)
    return np.frombuffer(data, dtype=dtype, count=array.offset + n)[array.offset:]


def _check_size(buffer: pa.Buffer, need: int, n: int) -> None:
    """IntegrityError when ``buffer`` is shorter than the ``need`` bytes its ``n`` values take."""
    if buffer.size < need:
        raise IntegrityError(f"an array of {n} values has a buffer of {buffer.size} bytes, {need} needed")


def chunked_values(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """:func:`values` of every chunk, one array (a view when there is one chunk)."""
    if isinstance(column, pa.Array):
        return values(column)
    parts = [values(chunk) for chunk in column.chunks]
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return values(pa.nulls(0, column.type))
    return np.concatenate(parts)


def offsets(array: pa.Array) -> np.ndarray:
    """``array.offsets.to_numpy()`` of a list array (its offsets as they stand, from its buffer)."""
    return values(array.offsets)


#: the Arrow type of each native number dtype met (a dozen at most): asked for every column a write makes
_ARROW_OF: dict[np.dtype[Any], pa.DataType] = {}


def numpy_array(values: np.ndarray, arrow_type: pa.DataType | None = None) -> pa.Array:
    """``pa.array(values, type=arrow_type)``, a flat numpy array of numbers or booleans wrapped as it is when
    its dtype is the type's: ``pa.array`` imports pandas on its first call (0.6 s, paid by a process's first
    write or read)."""
    if isinstance(values, np.ndarray) and values.ndim == 1:
        if values.dtype.kind in "iuf" and values.dtype.isnative:
            own = _ARROW_OF.get(values.dtype)
            if own is None:
                own = _ARROW_OF.setdefault(values.dtype, pa.from_numpy_dtype(values.dtype))
            if arrow_type is None or arrow_type is own or arrow_type == own:
                return pa.Array.from_buffers(own, len(values), [None, pa.py_buffer(np.ascontiguousarray(values))])
        elif values.dtype == np.bool_ and (arrow_type is None or arrow_type == pa.bool_()):
            bits = np.packbits(values, bitorder="little")
            return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])
    return pa.array(values, type=arrow_type)


def unique(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-D integer array, as ``np.unique`` gives them, without importing
    ``numpy.ma`` (which ``np.unique`` does on its first call)."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]
