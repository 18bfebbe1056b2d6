"""Which database of a pinned snapshot holds an entry: the snapshot's entry map, kept per version.

A dataset's databases own contiguous entry ranges. For a pinned version
(whose databases never change) their first entries are sorted once into an
array and kept in the process, per store; finding the database of any number
of entries is then one ``numpy.searchsorted``, however many databases there
are, instead of a walk over the records. A selection builds that map; one
event (``database_of``) never does, since building it lists every database
(a second at a thousand, a minute at a hundred thousand): it asks the
catalog's index for its entry (``Catalog.database_at``) and keeps the record
it gets, so that the next event of a database already seen asks nothing.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from giod.catalog.records import DatabaseRecord
from giod.errors import NotFound

if TYPE_CHECKING:
    from giod.store.snapshot import Snapshot, Store

__all__ = ["FOUND_RECORDS", "MAPS", "database_of", "locate", "located"]

#: entry maps (dataset, version) kept per store
MAPS = 64
#: records found one entry at a time, kept per store and version (the oldest version's dropped first)
FOUND_RECORDS = 4_096

_Map = tuple[list[DatabaseRecord], np.ndarray]
_MAPS: weakref.WeakKeyDictionary[Store, OrderedDict[tuple[str, int], _Map]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
# per store and (dataset, version): first entries, sorted, and the records found at them
_Found = tuple[list[int], list[DatabaseRecord]]
_FOUND: weakref.WeakKeyDictionary[Store, OrderedDict[tuple[str, int], _Found]] = weakref.WeakKeyDictionary()


def _held(found: _Found, entry: int) -> DatabaseRecord | None:
    at = bisect.bisect_right(found[0], entry) - 1
    if at >= 0 and entry < found[1][at].stop_entry:
        return found[1][at]
    return None


def database_of(snapshot: Snapshot, entry: int) -> DatabaseRecord | None:
    """The database of a pinned ``snapshot`` holding ``entry`` (None when none does).

    From the snapshot's entry map when a selection built it, else from the records found before
    at this version, else from the catalog's index (two lookups, however many databases).
    """
    assert snapshot.version is not None
    key = (snapshot.name, snapshot.version)
    with _LOCK:
        maps = _MAPS.get(snapshot.store)
        mapped = None if maps is None else maps.get(key)
        found = _FOUND.setdefault(snapshot.store, OrderedDict()).get(key)
        held = None if found is None else _held(found, entry)
    if mapped is not None:
        dbs, where = _search(mapped, np.array([entry], dtype=np.int64))
        return dbs[int(where[0])] if where[0] >= 0 else None
    if held is not None:
        return held
    try:
        db = snapshot.store.catalog.database_at(snapshot.name, entry, snapshot.version)
    except NotFound:
        return None
    with _LOCK:
        kept = _FOUND.setdefault(snapshot.store, OrderedDict())
        found = kept.setdefault(key, ([], []))
        kept.move_to_end(key)
        if _held(found, db.first_entry) is None:
            place = bisect.bisect_right(found[0], db.first_entry)
            found[0].insert(place, db.first_entry)
            found[1].insert(place, db)
        while sum(len(f[0]) for f in kept.values()) > FOUND_RECORDS and len(kept) > 1:
            kept.popitem(last=False)
        if len(found[0]) > FOUND_RECORDS:  # one version alone past the bound: start it again
            del found[0][:], found[1][:]
    return db


def _search(mapped: _Map, entries: np.ndarray) -> tuple[list[DatabaseRecord], np.ndarray]:
    dbs, bounds = mapped
    at = np.searchsorted(bounds[:, 0], entries, side="right") - 1
    ok = (at >= 0) & (entries < bounds[np.maximum(at, 0), 1]) if len(bounds) else np.zeros(len(entries), bool)
    return dbs, np.where(ok, at, -1)


def locate(snapshot: Snapshot, entries: np.ndarray) -> tuple[list[DatabaseRecord], np.ndarray]:
    """The databases of a pinned ``snapshot`` in entry order, and for each of ``entries`` the position of the
    database holding it among them (-1 when none does)."""
    dbs, at, _ = located(snapshot, entries)
    return dbs, at


def located(snapshot: Snapshot, entries: np.ndarray) -> tuple[list[DatabaseRecord], np.ndarray, np.ndarray]:
    """:func:`locate`'s answer and the databases' entry ranges ``[first, stop)`` in the same order (shape
    (databases, 2)), so that the caller needs no step per database to number entries within them."""
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
    dbs, at = _search(found, entries)
    return dbs, at, found[1]
