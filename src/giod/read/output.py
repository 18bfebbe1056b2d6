"""What a read hands back: the ``library`` of its arrays, its ``step_size``, and record behaviours.

As in uproot, ``library`` chooses the output: ``"ak"`` (awkward, the default),
``"pa"`` (a pyarrow Table) or ``"np"`` (a dict of numpy arrays, one per leaf,
keyed ``"ht"``, ``"jets.pt"``: flat leaves are plain arrays; jagged ones,
as uproot gives them, object arrays of one array per event). ``"pa"`` and
``"np"`` give the stored form: a relation is its column of indices (the name
in the schema), not a view of the target objects.

``step_size`` is a number of events, or a memory size as uproot takes it
(``"100 MB"``, ``"1 GiB"``: kB, MB, GB, TB are powers of 1000, KiB, MiB,
GiB, TiB of 1024), turned into events from the in-memory size of a sample of
the selected events.

Records of a collection whose type has ``pt``, ``eta``, ``phi`` and ``mass``
(and no other of vector's coordinates: NanoAOD's ``SV`` also has ``x``, ``y``,
``z``) get vector's ``Momentum4D`` behaviour under their own name (``Muon``), when
vector is installed (``giod[plots]``): ``ev.Muon[:, 0] + ev.Muon[:, 1]``,
``.px``, ``.deltaR`` work on every awkward read, relation views included.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import awkward as ak
import numpy as np

from giod.errors import ConfigError, DataError
from giod.read.objects import unlink
from giod.read.projection import Projection, assemble, read_database
from giod.schema import Schema

if TYPE_CHECKING:
    from giod.catalog.records import DatabaseRecord
    from giod.store.snapshot import Snapshot

__all__ = ["LIBRARIES", "MOMENTUM_FIELDS", "Behaviour", "behaviour", "check_library", "convert", "memory_size",
           "step_events", "to_numpy", "with_behaviour"]

#: the names ``library=`` takes, and what each means
LIBRARIES = {"ak": "ak", "awkward": "ak", "pa": "pa", "pyarrow": "pa", "arrow": "pa", "np": "np", "numpy": "np"}
#: the fields that make a record a four-momentum (vector's ``Momentum4D``)
MOMENTUM_FIELDS = frozenset({"pt", "eta", "phi", "mass"})
#: vector's other coordinate names: a record with one of them too (NanoAOD's SV has x, y, z) is ambiguous
OTHER_COORDINATES = frozenset({"x", "y", "rho", "px", "py", "z", "theta", "pz", "t", "tau", "E", "e", "energy",
                               "M", "m"})
SAMPLE_EVENTS = 1000  # events read to learn the bytes per event of a step given in bytes

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kKMGTP]i?B|B)?\s*$")
_UNITS = {"B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4, "PB": 1000**5,
          "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4, "PIB": 1024**5}


def check_library(library: str) -> str:
    """``library`` as one of ``"ak"``, ``"pa"``, ``"np"``; ConfigError for anything else."""
    found = LIBRARIES.get(library) if isinstance(library, str) else None
    if found is None:
        raise ConfigError(f"library must be 'ak' (awkward), 'pa' (pyarrow) or 'np' (numpy), not {library!r}")
    return found


def convert(events: ak.Array, schema: Schema, library: str = "ak") -> Any:
    """Events as read (awkward, relations linked) in ``library``, with behaviours for ``"ak"``."""
    kind = check_library(library)
    if kind == "ak":
        return with_behaviour(events, schema)
    stored = unlink(events, schema)
    if kind == "pa":
        return ak.to_arrow_table(stored, extensionarray=False)
    return to_numpy(stored)


def to_numpy(events: ak.Array) -> dict[str, np.ndarray]:
    """One numpy array per leaf, keyed by its dotted path; jagged leaves as object arrays of per-event arrays."""
    out: dict[str, np.ndarray] = {}

    def leaves(content: ak.contents.Content, path: str) -> None:
        if isinstance(content, ak.contents.RecordArray) and not content.is_tuple:
            for name in content.fields:
                leaves(content.content(name), f"{path}.{name}" if path else name)
            return
        if isinstance(content, ak.contents.ListOffsetArray) and isinstance(content.content, ak.contents.RecordArray):
            # a collection: each of its fields is a jagged leaf with the collection's offsets
            rec = content.content
            for name in rec.fields:
                leaves(ak.contents.ListOffsetArray(content.offsets, rec.content(name)), f"{path}.{name}")
            return
        out[path] = _numpy(content, path)

    layout = ak.to_packed(events).layout
    if isinstance(layout, ak.contents.RecordArray):
        leaves(layout, "")
    return out


def _numpy(content: ak.contents.Content, path: str) -> np.ndarray:
    if isinstance(content, (ak.contents.ListOffsetArray, ak.contents.ListArray)) \
            and content.parameter("__array__") not in ("string", "bytestring"):
        packed = ak.to_packed(content, highlevel=False)
        assert isinstance(packed, ak.contents.ListOffsetArray)
        offsets = np.asarray(packed.offsets.data)
        inner = _numpy(packed.content, path)
        # one view per event (no copy, no loop over objects)
        return np.fromiter(np.split(inner[: offsets[-1]], offsets[1:-1]), dtype=object, count=len(offsets) - 1)
    try:
        return np.asarray(ak.to_numpy(ak.Array(content), allow_missing=True))
    except (ValueError, TypeError) as exc:
        raise DataError(f"{path} has no numpy form ({exc}); read it with library='ak'") from exc


def memory_size(text: str) -> int:
    """``"100 MB"`` as bytes (uproot's units: kB, MB, ... powers of 1000; KiB, MiB, ... of 1024)."""
    m = _SIZE.match(text)
    unit = (m.group(2) or "B").upper() if m else ""
    if m is None or unit not in _UNITS:
        raise DataError(f"step_size must be a number of events or a memory size such as '100 MB', not {text!r}")
    return int(float(m.group(1)) * _UNITS[unit])


def step_events(step_size: int | str, dataset: Snapshot, proj: Projection,
                plan: Sequence[tuple[DatabaseRecord, np.ndarray | None]]) -> int:
    """``step_size`` as a number of events: itself when a number, else a memory size over the bytes per event
    of a sample of the selection (its first ``SAMPLE_EVENTS`` selected events)."""
    if isinstance(step_size, str):
        limit = memory_size(step_size)
        if limit <= 0:
            raise DataError(f"step_size must be positive, not {step_size!r}")
        per_event = _bytes_per_event(dataset, proj, plan)
        return max(1, int(limit // per_event)) if per_event > 0 else 1 << 62
    if isinstance(step_size, bool) or not isinstance(step_size, (int, np.integer)):
        raise DataError(f"step_size must be a number of events or a memory size such as '100 MB', not {step_size!r}")
    if step_size <= 0:
        raise DataError("step_size must be positive")
    return int(step_size)


def _bytes_per_event(dataset: Snapshot, proj: Projection,
                     plan: Sequence[tuple[DatabaseRecord, np.ndarray | None]]) -> float:
    for db, sel in plan:
        local = np.arange(min(db.n_events, SAMPLE_EVENTS)) if sel is None else sel[:SAMPLE_EVENTS]
        if len(local):
            sample = assemble(dataset.schema, proj, read_database(dataset, db, proj, local))
            return float(ak.to_packed(unlink(sample, dataset.schema)).nbytes) / len(local)
    return 0.0


# ---------------------------------------------------------------- behaviours


def momentum_types(schema: Schema, events: Any = None) -> tuple[str, ...]:
    """The record names (types) of the schema's collections that are four-momenta.

    With ``events``, only those whose every collection read there has all four fields: a record
    read with ``pt`` alone is no four-vector, and vector would refuse even to print it.
    """
    names = {schema.collections[c].type for c in schema.collections}
    found = {n for n in names if _momentum(schema.types[n].fields)}
    if events is not None:
        # the fields of each collection from the layout: ``events[field]`` costs ~70 µs a field
        layout = events.layout
        top = layout.array if isinstance(layout, ak.record.Record) else layout
        for field in ak.fields(events):
            if field in schema.collections:
                inner = top.content(field).fields if isinstance(top, ak.contents.RecordArray) \
                    else ak.fields(events[field])
                if not _momentum(inner):
                    found.discard(schema.collections[field].type)
    return tuple(sorted(found))


class Behaviour(dict[Any, Any]):
    """An awkward behaviour that pickles as its record names, to be made again where it is unpickled.

    vector's own behaviour holds lambdas, which pickle refuses: without this, no array read with
    it could travel to or from a worker process.
    """

    def __init__(self, names: tuple[str, ...], items: Mapping[Any, Any]):
        super().__init__(items)
        self.names = names

    def __reduce__(self) -> tuple[Any, ...]:
        return (behaviour, (self.names,))


def _momentum(fields: Iterable[str]) -> bool:
    """Whether records of these fields are one four-momentum to vector: pt, eta, phi, mass and no other coordinate."""
    names = set(fields)
    return MOMENTUM_FIELDS <= names and not names & OTHER_COORDINATES


@functools.cache
def behaviour(names: tuple[str, ...]) -> Behaviour | None:
    """An awkward behaviour giving the records ``names`` vector's ``Momentum4D``; None without vector.

    Arithmetic works between any two of them (``Muon + Electron``), as between two of one name.
    """
    if not names:
        return None
    try:
        import vector.backends.awkward as vba
    except ImportError:
        return None
    out: dict[Any, Any] = dict(vba.behavior)
    for name in names:
        out[name] = type(name, (vba.MomentumRecord4D,), {"__module__": __name__})
        out["*", name] = type(f"{name}Array", (vba.MomentumArray4D,), {"__module__": __name__})
    every = ("Momentum4D", *names)
    for key, value in vba.behavior.items():
        # ufunc overloads only: names like ("__typestr__", "Momentum4D") would rename the records' type
        if not isinstance(key, tuple) or isinstance(key[0], str) or "Momentum4D" not in key[1:]:
            continue
        slots = [i for i, k in enumerate(key) if k == "Momentum4D" and i > 0]
        for choice in _choices(every, len(slots)):
            new = list(key)
            for i, name in zip(slots, choice, strict=True):
                new[i] = name
            out.setdefault(tuple(new), value)
    return Behaviour(names, out)


def _choices(names: tuple[str, ...], k: int) -> list[tuple[str, ...]]:
    if k == 0:
        return [()]
    return [(n, *rest) for n in names for rest in _choices(names, k - 1)]


def with_behaviour(events: Any, schema: Schema) -> Any:
    """``events`` (an awkward Array or Record) with the behaviours of its schema's record names."""
    found = behaviour(momentum_types(schema, events))
    if found is None:
        return events
    if isinstance(events, ak.Record):
        return ak.Record(events, behavior=found)
    return ak.Array(events, behavior=found)
