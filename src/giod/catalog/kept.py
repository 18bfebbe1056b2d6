"""A database's whole listing record as one text, kept beside its summary line (level 17).

The listing fetched ~15 rows a database (its own, its containers' with the
sites of their good copies, its tag statistics): on SQLite the driver's fetch
was ~60 % of a listing's CPU, on PostgreSQL the server's lookups bound it.
Each summary row (``database_summaries``) now also keeps, in ``record``, the
containers and tag statistics visible while it is, and in ``container_ids``
the ids of those containers: the listing reads one row a database, and the
sites of the good copies (not versioned) for a whole chunk by ranges of
container ids (``GoodCopies``: a range where every container has one good
copy, at one site, is that site alone; the others' copies one text a range).

``record`` is a JSON list ``[containers, statistics]``: a container is
``[name, path, checksum, size, cluster entries, schema id, program, program
version, parameters, format, cluster checksums, created version, created]``
(the two last ``null``: the database's own, as a commit writes them), a
statistic ``[field, min, max]`` (``null``: unknown). Containers are in the
order of their names by code point, and ``container_ids`` (comma-separated)
in the same order. The text is parsed, and checked, when a record's
containers, bytes or statistics are first read (``listed``): a catalog row is
a trust boundary, and a text that does not parse is a ``CatalogError`` then.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from giod.catalog.records import INT64_MAX, ContainerRecord
from giod.errors import CatalogError

__all__ = ["GoodCopies", "container_ids", "parse_record", "record_text", "sites_of"]

_new = object.__new__
_set = object.__setattr__
_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_INF = math.inf
_string = json.encoder.encode_basestring  # what ``_dumps`` makes of a str, without its set-up per call
_float_text = float.__repr__  # what ``_dumps`` makes of a finite float


def _text(value: Any) -> str:
    """``_dumps(value)``: a str directly (the encoder's set-up cost ~3 µs a call, 14 calls a container)."""
    return _string(value) if type(value) is str else _dumps(value)


def _float(value: Any) -> str:
    """``_dumps(float(value))``, or null for None; a value that is not finite goes through ``_dumps``, which
    refuses it as before."""
    if value is None:
        return "null"
    number = float(value)
    return _float_text(number) if -_INF < number < _INF else _dumps(number)


def record_text(held: Iterable[Mapping[str, Any]], stats: Iterable[Mapping[str, Any]]) -> str:
    """The ``record`` of a summary row: ``held``, the visible containers as rows (name, path, checksum, size,
    cluster_entries, schema_id, program, program_version, parameters, format, cluster_checksums: the JSON
    texts as the containers table keeps them; created_version and created, when absent or None the
    database's own), ``stats`` the visible statistics (field, min, max)."""
    parts = []
    for c in sorted(held, key=_name):
        version = c.get("created_version")
        parts.append(
            f"[{_text(c['name'])},{_text(c['path'])},{_text(c['checksum'])},{int(c['size'])},"
            f"{c['cluster_entries']},{int(c['schema_id'])},{_text(c['program'])},{_text(c['program_version'])},"
            f"{c['parameters']},{_text(c['format'])},{c['cluster_checksums']},"
            f"{'null' if version is None else int(version)},{_float(c.get('created'))}]"
        )
    fields = ",".join(f"[{_text(s['field'])},{_float(s['min'])},{_float(s['max'])}]"
                      for s in sorted(stats, key=_field))
    return f"[[{','.join(parts)}],[{fields}]]"


def container_ids(held: Iterable[tuple[int, str]]) -> str:
    """The ``container_ids`` of a summary row from the (id, name) of its visible containers."""
    return ",".join(str(int(i)) for i, _ in sorted(held, key=_second))


def _name(c: Mapping[str, Any]) -> str:
    return str(c["name"])


def _field(s: Mapping[str, Any]) -> str:
    return str(s["field"])


def _second(pair: tuple[int, str]) -> str:
    return pair[1]


def _bad(db_id: Any, why: str, text: Any) -> CatalogError:
    return CatalogError(f"malformed catalog row: the listing record of database {db_id} {why}: {str(text)[:80]!r}")


#: the types of a list of integers (``bool``, JSON's true and false, is not one)
_INTS = frozenset({int})
_MAX = INT64_MAX


def parse_record(text: Any, ids: Any, db_id: int, version: int, created: float,
                 sites: Mapping[int, tuple[int, ...]]) -> dict[str, Any]:
    """A database's ``containers``, ``bytes`` and ``tag_stats`` from its summary's ``record`` and
    ``container_ids`` (``version``, ``created``: the database's own; ``sites``: the sites of the good
    copies by container id); CatalogError when the texts are not as ``record_text`` writes them. Each field's
    type is checked in one expression a container (a check a field through a table of functions cost ~3 times
    as much), each container set as one new ``__dict__``."""
    try:
        got = json.loads(text)
    except (TypeError, ValueError):
        raise _bad(db_id, "is not JSON", text) from None
    if type(got) is not list or len(got) != 2 or type(got[0]) is not list or type(got[1]) is not list:
        raise _bad(db_id, "is not a list of containers and statistics", text)
    held, stats = got
    try:
        numbers = [int(x) for x in ids.split(",")] if ids else []
    except (AttributeError, ValueError):
        raise _bad(db_id, "has container ids that are not integers", ids) from None
    if len(numbers) != len(held):
        raise _bad(db_id, f"names {len(held)} containers and {len(numbers)} ids", ids)
    built = []
    last = None
    new, kind, assign, copies, ints = _new, ContainerRecord, _set, sites.get, _INTS
    for cid, c in zip(numbers, held, strict=True):
        if type(c) is not list or len(c) != 13:
            raise _bad(db_id, "has a container that is not as written", c)
        name, path, checksum, size, entries, schema, program, program_version, params, fmt, crcs, at, when = c
        if not (type(name) is str and type(path) is str and type(checksum) is str and type(size) is int
                and size >= 0 and type(entries) is list and type(schema) is int and type(program) is str
                and type(program_version) is str and type(params) is dict and type(fmt) is str
                and type(crcs) is list and (at is None or type(at) is int)
                and (when is None or type(when) is float or type(when) is int)
                and (last is None or name > last)
                and set(map(type, entries)) <= ints and set(map(type, crcs)) <= ints
                and size <= _MAX and (not entries or 0 <= min(entries) <= max(entries) <= _MAX)
                and (not crcs or 0 <= min(crcs) <= max(crcs) <= _MAX)):
            raise _bad(db_id, "has a container that is not as written", c)
        last = name
        record = new(kind)
        assign(record, "__dict__", {
            "id": cid, "database_id": db_id, "name": name, "path": path, "checksum": checksum, "size": size,
            "cluster_entries": tuple(entries), "schema_id": schema,
            "created_version": version if at is None else at, "site_ids": copies(cid, ()), "program": program,
            "program_version": program_version, "parameters": params,
            "created": created if when is None else float(when), "format": fmt, "cluster_checksums": tuple(crcs),
        })
        built.append(record)
    bounds = {}
    for s in stats:
        if type(s) is not list or len(s) != 3:
            raise _bad(db_id, "has a statistic that is not as written", s)
        field, lo, hi = s
        if not (type(field) is str and (lo is None or type(lo) is float or type(lo) is int)
                and (hi is None or type(hi) is float or type(hi) is int)) or field in bounds:
            raise _bad(db_id, "has a statistic that is not as written", s)
        bounds[field] = (-_INF if lo is None else float(lo), _INF if hi is None else float(hi))
    built.sort(key=_id)
    return {"containers": tuple(built), "bytes": sum(c.size for c in built), "tag_stats": bounds}


def _id(c: ContainerRecord) -> int:
    return c.id


def sites_of(rows: Sequence[Sequence[Any]]) -> dict[int, tuple[int, ...]]:
    """{container id: its sites, sorted} from rows of one text each, ``container:site,…`` (or None); CatalogError
    when a text is not one."""
    found: dict[int, list[int]] = {}
    for (text,) in rows:
        if text is None:
            continue
        try:
            for pair in str(text).split(","):
                cid, _, site = pair.partition(":")
                found.setdefault(int(cid), []).append(int(site))
        except ValueError:
            raise CatalogError(f"malformed catalog row: the good copies of containers are not ids: "
                               f"{str(text)[:80]!r}") from None
    return {cid: tuple(sorted(s)) for cid, s in found.items()}


class GoodCopies(Mapping[int, tuple[int, ...]]):
    """{container id: the sites of its good copies, sorted} of one chunk of the listing, as read: ``texts``, rows
    of one text each as ``sites_of`` reads them (split at the first ``resolve``), and ``uniform``, ranges of
    container ids (first, last, site) in which every id has exactly one good copy, at that site (from the
    copies' count and their sites' least and greatest, no text made or split). The ranges are disjoint from
    the texts' and in order of their first ids."""

    __slots__ = ("_texts", "_found", "_first", "_last", "_site")

    def __init__(self, texts: Sequence[Sequence[Any]] = (), uniform: Sequence[tuple[int, int, int]] = ()):
        self._texts = texts
        self._found: dict[int, tuple[int, ...]] | None = None if texts else {}
        self._first = [r[0] for r in uniform]
        self._last = [r[1] for r in uniform]
        self._site = [(r[2],) for r in uniform]

    def resolve(self) -> dict[int, tuple[int, ...]]:
        """The texts' copies by container id; CatalogError (at every call) when a text is not as written."""
        found = self._found
        if found is None:
            found = self._found = sites_of(self._texts)
        return found

    def get(self, cid: int, default: Any = None) -> Any:
        got = self.resolve().get(cid)
        if got is not None:
            return got
        k = bisect_right(self._first, cid) - 1
        if k >= 0 and cid <= self._last[k]:
            return self._site[k]
        return default

    def __getitem__(self, cid: int) -> tuple[int, ...]:
        got: tuple[int, ...] | None = self.get(cid)
        if got is None:
            raise KeyError(cid)
        return got

    def __iter__(self) -> Iterator[int]:
        yield from self.resolve()
        for first, last in zip(self._first, self._last, strict=True):
            yield from range(first, last + 1)

    def __len__(self) -> int:
        return len(self.resolve()) + sum(last - first + 1 for first, last in zip(self._first, self._last, strict=True))
