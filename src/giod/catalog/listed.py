"""Records from the listing's rows: a database's own columns at once, the rest on first read.

The listing (``queries.load_databases``) fetches, for a chunk of databases,
their rows, their containers' rows and their tag statistics' rows as the
driver's plain tuples. Building every container record and parsing its JSON
texts up front cost ~20 µs a database, more than fetching the rows; most
callers of a listing of many databases read a few fields of each. So a
record is made here with its own columns checked and set, and its
``containers``, ``bytes`` and ``tag_stats`` are built from its rows, and
checked, when one of them is first read (``records._Built``): a row that does
not parse is a ``CatalogError`` then, before anything uses it. JSON texts
that many rows share (``{}``, ``[10]``) and the site lists of good copies are
parsed once per listing (``Parsed``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from giod.catalog.kept import GoodCopies, parse_record
from giod.catalog.records import (
    ContainerRecord,
    DatabaseRecord,
    check_container,
    check_head,
    row_bounds,
    row_list,
    row_object,
)
from giod.errors import CatalogError

__all__ = ["Parsed", "container_record", "database_records", "deferred_fields", "kept_records"]

_new = object.__new__
_set = object.__setattr__
_CONTAINER_FIELDS = (
    "id", "database_id", "name", "path", "checksum", "size", "cluster_entries", "schema_id", "created_version",
    "site_ids", "program", "program_version", "parameters", "created", "format", "cluster_checksums",
)  # fmt: skip


#: a JSON list of non-negative integers as giod writes it (``json.dumps``): read without the decoder
# at most 18 digits: below 2^63 (a longer number goes through ``row_list``, which checks its range)
_PLAIN_LIST = re.compile(r"\[(?:0|[1-9][0-9]{0,17})(?:, (?:0|[1-9][0-9]{0,17}))*\]")
#: texts kept per listing at most: shared texts repeat within a chunk; a text each row has must not pile up
_KEPT = 4_096


class Parsed:
    """The JSON texts and site lists of one listing, each shared text parsed (and checked) once."""

    __slots__ = ("_lists", "_objects", "_sites")

    def __init__(self) -> None:
        self._lists: dict[str, tuple[int, ...]] = {}
        self._objects: dict[str, dict[str, Any]] = {}
        self._sites: dict[str | None, tuple[int, ...]] = {}

    def int_list(self, text: str, what: str, row_id: Any, *, shared: bool = True) -> tuple[int, ...]:
        """A JSON list of integers (immutable: shared by every row that has it); ``shared`` False for a
        text each row has its own of (cluster checksums), which is not kept."""
        found = self._lists.get(text)
        if found is None:
            if type(text) is str and _PLAIN_LIST.fullmatch(text):
                found = tuple(map(int, text[1:-1].split(",")))
            elif text == "[]":
                found = ()
            else:
                found = row_list(text, f"{what} of container {row_id}")
            if shared:
                _keep(self._lists, text, found)
        return found

    def object(self, text: str, what: str) -> dict[str, Any]:
        """A JSON object, a copy each: records share no mutable state."""
        found = self._objects.get(text)
        if found is None:
            found = row_object(text, what)
            _keep(self._objects, text, found)
        return dict(found)

    def sites(self, text: str | None, row_id: Any) -> tuple[int, ...]:
        """The ids of the sites of a container's good copies, from their comma-separated list."""
        if text is None:
            return ()
        found = self._sites.get(text)
        if found is None:
            try:
                found = tuple(sorted(int(x) for x in str(text).split(",")))
            except ValueError:
                raise CatalogError(f"malformed catalog row: the sites of container {row_id} are not ids: "
                                   f"{str(text)[:80]!r}") from None
            _keep(self._sites, text, found)
        return found


def _keep(kept: dict[Any, Any], key: Any, value: Any) -> None:
    if len(kept) >= _KEPT:
        kept.clear()
    kept[key] = value


def container_record(row: Sequence[Any], parsed: Parsed) -> ContainerRecord:
    """The container of a row as the listing selects it (id, database id, name, path, checksum, size,
    cluster entries, schema id, version, sites of good copies, program, program version, parameters,
    created, format, cluster checksums); CatalogError when a JSON text does not parse."""
    rid = row[0]
    check_container(row)
    record = _new(ContainerRecord)
    record.__dict__.update(zip(_CONTAINER_FIELDS, (
        rid, row[1], row[2], row[3], row[4], row[5], parsed.int_list(row[6], "cluster entries", rid), row[7],
        row[8], parsed.sites(row[9], rid), row[10], row[11], parsed.object(row[12], f"parameters of container {rid}"),
        row[13], row[14], parsed.int_list(row[15], "cluster checksums", rid, shared=False),
    ), strict=True))  # fmt: skip
    return record


class _Chunk:
    """The containers' and statistics' rows of one call of the listing, grouped by database when a
    record of it is first read (a listing read for its databases' own columns never groups them)."""

    __slots__ = ("_held", "_parsed", "_stats", "_grouped")

    def __init__(self, held: list[Any], stats: list[Any], parsed: Parsed):
        self._held, self._stats, self._parsed = held, stats, parsed
        self._grouped: tuple[dict[Any, list[Any]], dict[Any, list[Any]]] | None = None

    def fields(self, db_id: Any) -> dict[str, Any]:
        """The deferred fields of database ``db_id`` (see ``deferred_fields``)."""
        grouped = self._grouped
        if grouped is None:
            held: dict[Any, list[Any]] = {}
            for c in self._held:
                held.setdefault(c[1], []).append(c)
            stats: dict[Any, list[Any]] = {}
            for s in self._stats:
                stats.setdefault(s[0], []).append(s)
            grouped = self._grouped = (held, stats)
        return deferred_fields(grouped[0].get(db_id, ()), grouped[1].get(db_id, ()), self._parsed)


def deferred_fields(held: Iterable[Sequence[Any]], stats: Iterable[Sequence[Any]], parsed: Parsed
                    ) -> dict[str, Any]:
    """A database's ``containers`` (by id), ``bytes`` and ``tag_stats`` from its rows (a statistics row:
    database id, field, min, max; unknown bounds, NULL, read as -inf/+inf)."""
    built = tuple(container_record(row, parsed) for row in sorted(held, key=_first))
    return {
        "containers": built,
        "bytes": sum(c.size for c in built),
        "tag_stats": {s[1]: row_bounds(s[1], s[2], s[3], f"database {s[0]}") for s in stats},
    }


def _first(row: Sequence[Any]) -> Any:
    return row[0]


class _KeptChunk:
    """The sites of the good copies of one call's containers (level 17), their texts split at the first read."""

    __slots__ = ("_copies",)

    def __init__(self, copies: GoodCopies):
        self._copies = copies

    def fields(self, row: Sequence[Any]) -> dict[str, Any]:
        """The deferred fields of the database of ``row`` (see ``kept_records``) from its summary's texts
        (``kept.parse_record``)."""
        copies = self._copies
        copies.resolve()  # a text not as written is an error of every record of the call, as it was read
        return parse_record(row[11], row[12], row[0], row[5], row[4], copies)


def kept_records(rows: Sequence[Sequence[Any]], parents: Mapping[Any, tuple[Any, ...]], copies: GoodCopies,
                 parsed: Parsed) -> list[DatabaseRecord]:
    """The records of ``rows``, one a database: as ``database_records``' heads without the parent, each
    followed by its summary's ``record`` and ``container_ids`` (level 17); ``parents``: the parents, in
    order, of those that have any; ``copies``: the sites of the good copies of their containers (and maybe
    others). Their containers and statistics are parsed on first read. A record's fields are set as one
    new ``__dict__`` (~1.5 µs a record; ``update`` with keywords cost 4 µs), the parameters parsed once per
    text of the call and copied."""
    out: list[DatabaseRecord] = []
    fields = _KeptChunk(copies).fields
    objects: dict[str, dict[str, Any]] = {}
    new, kind, assign, parents_of = _new, DatabaseRecord, _set, parents.get
    for row in rows:
        db_id = row[0]
        check_head(row)
        text = row[9]
        params = objects.get(text)
        if params is None:
            params = objects[text] = parsed.object(text, f"parameters of database {db_id}")
        record = new(kind)
        assign(record, "__dict__", {
            "id": db_id, "dataset_id": row[1], "first_entry": row[2], "n_events": row[3], "created": row[4],
            "created_version": row[5], "writer": row[6], "program": row[7], "program_version": row[8],
            "parameters": dict(params) if params else {}, "parents": parents_of(db_id, ()),
            "idempotency_key": row[10], "_rows": partial(fields, row),
        })
        out.append(record)
    return out


def database_records(heads: Sequence[Sequence[Any]], held: list[Any], stats: list[Any], parsed: Parsed
                     ) -> list[DatabaseRecord]:
    """The records of the databases in ``heads``, in its order.

    ``heads``: (id, dataset id, first entry, events, created, version, writer, program, program version,
    parameters, idempotency key, parent id) per database and parent, a database's rows together, its
    parents in order (parent id NULL: none); ``held``: the containers' rows as ``container_record``
    reads them; ``stats``: (database id, field, min, max). Their own columns are set at once (the
    parameters checked), the rest on first read (``records._Built``).
    """
    order: list[tuple[Sequence[Any], list[Any]]] = []
    last: Any = None
    parents: list[Any] = []
    for row in heads:
        if row[0] != last or not order:
            last, parents = row[0], []
            order.append((row, parents))
        if row[11] is not None:
            parents.append(row[11])
    chunk = _Chunk(held, stats, parsed)
    out = []
    for row, parents in order:
        db_id = row[0]
        check_head(row)
        record = _new(DatabaseRecord)
        record.__dict__.update(
            id=db_id, dataset_id=row[1], first_entry=row[2], n_events=row[3], created=row[4],
            created_version=row[5], writer=row[6], program=row[7], program_version=row[8],
            parameters=parsed.object(row[9], f"parameters of database {db_id}"), parents=tuple(parents),
            idempotency_key=row[10], _rows=partial(chunk.fields, db_id),
        )
        out.append(record)
    return out
