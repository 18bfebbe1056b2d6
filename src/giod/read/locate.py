"""Which database of a pinned snapshot holds an entry: the snapshot's entry map, kept per version.

A dataset's databases own contiguous entry ranges. For a pinned version
(whose databases never change) their first entries are sorted once into an
array and kept in the process, per store; finding the database of any number
of entries is then one ``numpy.searchsorted``, however many databases there
are, instead of a walk over the records.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from giod.catalog.records import DatabaseRecord
from giod.errors import NotFound

if TYPE_CHECKING:
    from giod.store.snapshot import Snapshot, Store

__all__ = ["MAPS", "MAP_DATABASES", "database_of", "locate"]

#: entry maps (dataset, version) kept per store
MAPS = 64
#: above this many databases one event is found by the catalog's index (two lookups), not by a
#: map whose building lists every database (seconds at a million)
MAP_DATABASES = 20_000

_Map = tuple[list[DatabaseRecord], np.ndarray]
_MAPS: weakref.WeakKeyDictionary[Store, OrderedDict[tuple[str, int], _Map]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
_LARGE: weakref.WeakKeyDictionary[Store, OrderedDict[tuple[str, int], bool]] = weakref.WeakKeyDictionary()


def database_of(snapshot: Snapshot, entry: int) -> DatabaseRecord | None:
    """The database of a pinned ``snapshot`` holding ``entry`` (None when none does).

    A dataset of up to :data:`MAP_DATABASES` databases is answered from its entry map (built
    once per version); a larger one asks the catalog's index for this one entry, so one event
    never costs a listing of the whole dataset.
    """
    assert snapshot.version is not None
    key = (snapshot.name, snapshot.version)
    with _LOCK:
        large = _LARGE.setdefault(snapshot.store, OrderedDict()).get(key)
    if large is None:
        n = int(snapshot.store.catalog.dataset_summary(snapshot.name, snapshot.version)["n_databases"])
        large = n > MAP_DATABASES
        with _LOCK:
            kept = _LARGE.setdefault(snapshot.store, OrderedDict())
            kept[key] = large
            while len(kept) > MAPS:
                kept.popitem(last=False)
    if large:
        try:
            return snapshot.store.catalog.database_at(snapshot.name, entry, snapshot.version)
        except NotFound:
            return None
    dbs, at = locate(snapshot, np.array([entry], dtype=np.int64))
    return dbs[int(at[0])] if at[0] >= 0 else None


def locate(snapshot: Snapshot, entries: np.ndarray) -> tuple[list[DatabaseRecord], np.ndarray]:
    """The databases of a pinned ``snapshot`` in entry order, and for each of ``entries`` the position of the
    database holding it among them (-1 when none does)."""
    assert snapshot.version is not None
    with _LOCK:
        cache = _MAPS.setdefault(snapshot.store, OrderedDict())
        key = (snapshot.name, snapshot.version)
        found = cache.get(key)
    if found is None:
        dbs = sorted(snapshot.databases(), key=lambda db: db.first_entry)
        bounds = np.array([[db.first_entry, db.stop_entry] for db in dbs], dtype=np.int64).reshape(-1, 2)
        found = (dbs, bounds)
        with _LOCK:
            cache[key] = found
            while len(cache) > MAPS:
                cache.popitem(last=False)
    dbs, bounds = found
    at = np.searchsorted(bounds[:, 0], entries, side="right") - 1
    ok = (at >= 0) & (entries < bounds[np.maximum(at, 0), 1]) if len(bounds) else np.zeros(len(entries), bool)
    return dbs, np.where(ok, at, -1)
