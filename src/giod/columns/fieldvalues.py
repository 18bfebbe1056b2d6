"""Field values on their way from awkward to Arrow: dtype checks and casts, fixed-size arrays, offsets.

``Objects`` gives the objects of one collection straight from its layout, without a Python loop.
"""

from __future__ import annotations

import awkward as ak
import numpy as np
import pyarrow as pa

from giod.errors import DataError
from giod.schema import DTYPES, STRING, FieldDef
from giod.storage.numpyview import numpy_array as numpy_array  # where writers have found it


def field_width(fdef: FieldDef) -> int:
    """Bytes per object of a field in memory."""
    itemsize = np.dtype(fdef.dtype).itemsize if fdef.dtype in DTYPES else 8  # numpy knows the names
    return itemsize * int(np.prod(fdef.shape or (1,)))


def cast_field(values: np.ndarray, fdef: FieldDef, where: str) -> np.ndarray:
    """``values`` as the field's dtype, or a DataError when a value would change.

    Integer and bool fields keep values exactly (a float is refused even with a
    zero fraction: it usually means a wrong field). Float fields keep the nearest
    value of their precision, every number read as a float64 first, and refuse
    finite values that would overflow to infinity. A bool is refused by every
    number field: ``True`` stored as ``1`` is a wrong field, not a number.
    """
    target = np.dtype(fdef.dtype)
    src = values.dtype
    if src == target:
        return values
    if target.kind == "b":
        if src.kind != "b":
            raise DataError(f"{where}: expected bool values, got {src}")
        return values
    if src.kind == "b":
        raise DataError(f"{where}: expected {fdef.dtype}, got bool")
    if target.kind in "iu" and src.kind not in "iu":
        raise DataError(f"{where}: expected {fdef.dtype}, got {src} (would lose the fraction)")
    if src.kind not in "iuf":
        raise DataError(f"{where}: expected {fdef.dtype}, got {src}")
    if target.kind in "iu" and values.size:
        info = np.iinfo(target)
        lo, hi = int(values.min()), int(values.max())  # Python ints compare across every width
        if lo < info.min or hi > info.max:
            raise DataError(range_message(where, lo, hi, fdef.dtype))
        return values.astype(target)
    if target.kind == "f" and src.kind in "iu" and target != np.float64:
        values = values.astype(np.float64)  # one rule for every input: a number becomes a float64 first
    with np.errstate(over="ignore"):
        out = values.astype(target)
    if src.kind == "f" and values.size:
        overflow = np.isinf(out) & np.isfinite(values)
        if overflow.any():
            finite = values[np.isfinite(values)]
            raise DataError(range_message(where, finite.min(), finite.max(), fdef.dtype))
    return out


def range_message(where: str, lo: object, hi: object, dtype: str) -> str:
    if lo == hi:
        return f"{where}: value {lo} does not fit in {dtype}"
    return f"{where}: values {lo}..{hi} do not fit in {dtype}"


def flat_numpy(arr: ak.Array, where: str, expected: str = "numbers") -> np.ndarray:
    _refuse_layout(arr.layout, where, expected)
    try:
        out: np.ndarray = ak.to_numpy(arr, allow_missing=False)
    except Exception as exc:
        raise DataError(f"{where}: values are missing or not numeric ({exc})") from exc
    if out.dtype.kind not in "biuf":
        raise DataError(f"{where}: expected {expected}, got {arr.type}")
    return out


def _refuse_layout(layout: ak.contents.Content, where: str, expected: str) -> None:
    """A DataError for values that are missing, of mixed types, strings or records, in the same words
    whichever form (awkward, dicts, Arrow) the events came in."""
    if layout.is_option:
        raise DataError(f"{where}: values are missing (None or an absent key)")
    if layout.is_union:
        kinds = ", ".join(str(c.form.type) for c in layout.contents)
        raise DataError(f"{where}: values of mixed types ({kinds}); expected {expected}")
    if layout.parameter("__array__") in ("string", "bytestring", "char", "byte"):
        raise DataError(f"{where}: expected {expected}, got strings")
    if layout.is_record:
        raise DataError(f"{where}: expected {expected}, got records")
    if layout.is_list or layout.is_regular or layout.is_indexed:
        _refuse_layout(layout.content, where, expected)


def strip_options(layout: ak.contents.Content) -> ak.contents.Content:
    """``layout`` without option nodes that hold no missing value (Arrow's nullable columns): what is
    left optional is really missing."""
    if layout.is_option:
        if isinstance(layout, ak.contents.UnmaskedArray):
            return strip_options(layout.content)
        if not np.asarray(layout.mask_as_bool(valid_when=False)).any():
            return strip_options(layout.project())
        return layout
    if layout.is_record:
        contents = [strip_options(c) for c in layout.contents]
        if all(a is b for a, b in zip(contents, layout.contents, strict=True)):
            return layout
        return ak.contents.RecordArray(contents, None if layout.is_tuple else layout.fields,
                                       length=layout.length, parameters=layout.parameters)
    if layout.is_list or layout.is_regular:
        inner = strip_options(layout.content)
        return layout if inner is layout.content else layout.copy(content=inner)
    return layout


def fixed_width_array(flat: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    """Nest flat values into (possibly multi-dimensional) fixed-size lists of ``arrow_type``."""
    if not pa.types.is_fixed_size_list(arrow_type):
        return numpy_array(flat, arrow_type)
    inner = fixed_width_array(flat, arrow_type.value_type)
    return pa.FixedSizeListArray.from_arrays(inner, type=arrow_type)


def field_array(values: ak.Array, fdef: FieldDef, where: str, arrow_type: pa.DataType) -> pa.Array:
    """Flat values of one field (all objects of all events) as an Arrow array."""
    if fdef.dtype == STRING:
        return _string_array(values, where, arrow_type)
    _refuse_layout(values.layout, where, fdef.type_string)
    if fdef.shape:
        size = int(np.prod(fdef.shape))
        try:
            regular = ak.to_regular(values, axis=-1) if values.ndim > 1 else values
        except Exception as exc:
            raise DataError(f"{where}: expected arrays of shape {list(fdef.shape)}, got {values.type}") from exc
        flat = flat_numpy(regular, where, fdef.type_string)
        if flat.ndim < 2 or int(np.prod(flat.shape[1:])) != size:
            raise DataError(f"{where}: expected arrays of shape {list(fdef.shape)}, got {values.type}")
        return fixed_width_array(cast_field(flat.reshape(-1), fdef, where), arrow_type)
    flat = flat_numpy(values, where, fdef.type_string)
    if flat.ndim != 1:
        raise DataError(f"{where}: expected scalars, got {values.type}")
    return numpy_array(cast_field(flat, fdef, where), arrow_type)


def _string_array(values: ak.Array, where: str, arrow_type: pa.DataType) -> pa.Array:
    """Flat strings (one per object or event) as an Arrow string array; DataError for anything else."""
    layout = values.layout
    if layout.is_option:
        raise DataError(f"{where}: values are missing (None or an absent key)")
    if layout.parameter("__array__") != "string":
        got = "bytes" if layout.parameter("__array__") == "bytestring" else str(values.type)
        raise DataError(f"{where}: expected strings, got {got}")
    try:
        return ak.to_arrow(values, extensionarray=False).cast(arrow_type)
    except Exception as exc:
        raise DataError(f"{where}: cannot store these strings ({exc})") from exc


def offsets_of(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    if out[-1] > np.iinfo(np.int32).max:
        raise DataError("too many objects in one cluster for 32-bit offsets; write smaller batches")
    return out.astype(np.int32)


def leaf_values(content: ak.contents.Content) -> np.ndarray | None:
    """The values of a plain numeric buffer (no option, no nesting, no parameters); None for other layouts."""
    if isinstance(content, ak.contents.NumpyArray) and not content.parameters:
        data = np.asarray(content.data)
        if data.ndim == 1 and data.dtype.kind in "biuf":
            return data
    return None


class Objects:
    """The objects of one collection, all events flattened.

    Fields stored as plain buffers are taken from the layout directly, as
    numpy views; any other layout goes through awkward's generic (slower)
    operations, which also say what is wrong with malformed input.
    """

    def __init__(self, coll: ak.Array | ak.contents.Content):
        # a layout is taken as it is: the high-level array is made only if a generic operation needs it
        self._coll = coll if isinstance(coll, ak.Array) else None
        self._layout = coll.layout if isinstance(coll, ak.Array) else coll
        self._flat: ak.Array | None = None
        self.rec: ak.contents.RecordArray | None = None
        layout = self._layout
        if isinstance(layout, ak.contents.ListOffsetArray) and isinstance(layout.content, ak.contents.RecordArray) \
                and not layout.parameters and not layout.content.parameters.get("__array__"):
            offsets = np.asarray(layout.offsets).astype(np.int64, copy=False)
            self.start, self.stop = int(offsets[0]), int(offsets[-1])
            self.offsets = offsets - self.start  # objects of each event
            self.rec = layout.content

    @property
    def coll(self) -> ak.Array:
        """The collection, one list of objects per event."""
        if self._coll is None:
            self._coll = ak.Array(self._layout)
        return self._coll

    @property
    def flat(self) -> ak.Array:
        if self._flat is None:
            self._flat = ak.flatten(self.coll, axis=1)
        return self._flat

    def fields(self) -> list[str]:
        return list(self.rec.fields) if self.rec is not None else list(ak.fields(self.flat))

    def __len__(self) -> int:
        return self.stop - self.start if self.rec is not None else len(self.flat)

    def values(self, field: str) -> np.ndarray | None:
        """One number per object, when the layout stores them plainly."""
        if self.rec is None:
            return None
        data = leaf_values(self.rec.content(field))
        return None if data is None else data[self.start : self.stop]

    def fixed(self, field: str, size: int) -> np.ndarray | None:
        """The values of a field of ``size`` numbers per object, flat, when the layout stores them plainly:
        regular lists (nested or not) of ``size`` numbers in all over one plain buffer. None for any other
        layout (the generic path reads and checks it)."""
        if self.rec is None:
            return None
        content = self.rec.content(field)
        width, depth = 1, 0
        while isinstance(content, ak.contents.RegularArray) and not content.parameters:
            width, depth = width * content.size, depth + 1
            content = content.content
        data = leaf_values(content)
        if data is None or width != size or depth == 0:  # depth 0: one number per object, not an array
            return None
        return data[self.start * size : self.stop * size]

    def lists(self, field: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(offsets from 0, values) of a list of numbers per object, when the layout stores them plainly."""
        if self.rec is None:
            return None
        content = self.rec.content(field)
        if not isinstance(content, ak.contents.ListOffsetArray) or content.parameters:
            return None
        data = leaf_values(content.content)
        if data is None:
            return None
        inner = np.asarray(content.offsets)[self.start : self.stop + 1].astype(np.int64, copy=False)
        return inner - inner[0], data[inner[0] : inner[-1]]
