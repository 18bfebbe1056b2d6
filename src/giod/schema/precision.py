"""Stored precision of float fields: the mantissa bits a field keeps, as NanoAOD does.

A field declared with ``precision: N`` keeps the ``N`` most significant bits
of its mantissa (float32 has 23, float64 52); the others are rounded away to
the nearest representable value (ties away from zero in magnitude) before the
values are written. Zeroed low bits cost nothing to store once compressed, so
detector quantities known to a few per mille take a fraction of their bytes.
Infinities and NaN are left as they are; a value that rounds past the largest
finite float becomes infinite, as it would in ROOT.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["MANTISSA_BITS", "round_array", "round_mantissa"]

#: mantissa bits of the float dtypes a precision applies to
MANTISSA_BITS = {"float32": 23, "float64": 52}


def round_mantissa(values: np.ndarray, bits: int) -> np.ndarray:
    """``values`` (float32 or float64) with only ``bits`` mantissa bits kept, rounded to nearest."""
    total = MANTISSA_BITS[values.dtype.name]
    drop = total - bits
    if drop <= 0:
        return values
    word = np.uint32 if values.dtype == np.float32 else np.uint64
    ints: np.ndarray = np.ascontiguousarray(values).view(word)
    rounded = np.bitwise_and(ints + word(1 << (drop - 1)), ~word((1 << drop) - 1))
    return np.where(np.isfinite(values), rounded, ints).view(values.dtype)


def round_array(array: pa.Array, bits: int) -> pa.Array:
    """An Arrow float array (or fixed-size list of floats) with ``bits`` mantissa bits kept; nulls stay."""
    if pa.types.is_fixed_size_list(array.type):
        n = array.type.list_size
        inner = round_array(array.values.slice(array.offset * n, len(array) * n), bits)
        return pa.FixedSizeListArray.from_arrays(inner, type=array.type,
                                                 mask=array.is_null() if array.null_count else None)
    values = array.fill_null(0).to_numpy(zero_copy_only=False)
    out = round_mantissa(values, bits)
    return pa.array(out, type=array.type, mask=array.is_null().to_numpy(zero_copy_only=False)
                    if array.null_count else None)
