"""A source federation's records, checked before a copy writes anything.

Nothing a source says is trusted (DESIGN.md, "The trust boundary"): before
a copy creates its target dataset or places a single file, every database it
is about to copy is checked here, so a refused copy leaves nothing behind:

- its records can be read at all (a record nested past what the catalog's
  JSON reader walks is refused, not a ``RecursionError``);
- its parameters and provenance parse (``giod.exchange.provenance``);
- each container is one the model knows, once per database, at a path
  below the source dataset's own directory (the project's one path grammar,
  ``giod.names``); its place at the destination is derived from that path
  and checked by the same grammar below the target's directory;
- no such place holds a file the destination has registered, unless it is
  this very copy's, landed before: a copy never replaces another
  database's file.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from giod.catalog.records import ContainerRecord, DatabaseRecord
from giod.catalog.remote import Unavailable
from giod.errors import CatalogError, ConfigError, DataError, NotFound
from giod.exchange.provenance import check_parameters
from giod.names import check_container_path
from giod.read import tagindex
from giod.schema import TAG_CONTAINER, Schema

__all__ = ["destination_path", "folders", "read_records", "registered", "skim_containers", "vet"]


def read_records(what: str, listing: Callable[[], list[DatabaseRecord]]) -> list[DatabaseRecord]:
    """``listing()``, with a source record that cannot even be read turned into a DataError."""
    try:
        return listing()
    except (RecursionError, ValueError) as exc:  # JSON nested past the reader's stack, or not JSON at all
        raise DataError(f"the source's records of {what} cannot be read: {type(exc).__name__}: "
                        f"{str(exc)[:200]}") from exc


def destination_path(source_dataset: str, target: str, c: ContainerRecord) -> str:
    """Where container ``c`` of the source dataset goes at the destination; DataError for a path the grammar
    refuses (outside the source dataset's directory, or not a clean relative path)."""
    try:
        check_container_path(source_dataset, c.path)
        path = f"{target}/{c.path[len(source_dataset) + 1:]}"
        return check_container_path(target, path)
    except CatalogError as exc:
        raise DataError(f"source container {c.name} of database {c.database_id} refused: {exc}") from exc


def skim_containers(schema: Schema, chosen: Sequence[str] | None) -> None:
    """ConfigError unless the chosen containers hold every relation's target: a skim writes its events anew,
    and a writer needs the objects a relation points to."""
    if chosen is None:
        return
    have = set(chosen)
    missing: dict[str, list[str]] = {}  # container needed -> the relations that need it
    todo = list(have)
    while todo:
        container = todo.pop()
        for collection in schema.containers.get(container, ()):
            for rname, rdef in schema.collection_type(collection).relations.items():
                needed = schema.container_of(rdef.target)
                if needed not in have:
                    missing.setdefault(needed, []).append(f"{collection}.{rname}")
                    have.add(needed)
                    todo.append(needed)
    if missing:
        why = "; ".join(f"{', '.join(rels)} point{'s' if len(rels) == 1 else ''} into {c}"
                        for c, rels in sorted(missing.items()))
        raise ConfigError(f"a skim writes its events anew, and relations need their targets ({why}): "
                          f"add {','.join(sorted(missing))} to --containers")


def registered(dst: Any, path: str) -> str | None:
    """The checksum the destination's catalog records for a file at ``path`` (None: no row names it).

    A server's catalog does not say; a server never replaces a registered
    file itself (its ``DELETE`` of one is refused), so there is nothing to
    check here.
    """
    try:
        value = dst.catalog.checksum_of(path)
    except Unavailable:
        return None
    return None if value is None else str(value)


def vet(schema: Schema, plan: Any, databases: Iterable[tuple[int, DatabaseRecord, list[ContainerRecord]]],
        dst: Any, landed: dict[str, DatabaseRecord], chosen: Callable[[str], bool]) -> dict[int, dict[str, Any]]:
    """Check every database a copy is about to copy (see the module docstring); returns each one's parsed
    parameters by id. ``landed``, this copy's databases already at the destination by key, is completed
    with any that a concurrent copy registers meanwhile."""
    known = {*schema.containers, TAG_CONTAINER, tagindex.TAG_INDEX}
    parameters: dict[int, dict[str, Any]] = {}
    for _, db, added in databases:
        where = f"source database {db.id}"
        if db.id not in parameters:
            parameters[db.id] = check_parameters(db.parameters, where)
        for c in db.containers:
            check_parameters(c.parameters, f"{where}, container {c.name}")
        names = [c.name for c in db.containers]
        for name in names:
            if name not in known:
                raise DataError(f"{where} refused: container {name!r} is no container of model {schema.name}")
            if names.count(name) > 1:
                raise DataError(f"{where} refused: it names container {name!r} twice")
        wanted = [c for c in (added or db.containers) if chosen(c.name)]
        paths = [destination_path(plan.dataset, plan.target, c) for c in wanted]
        if len(set(paths)) != len(paths):
            raise DataError(f"{where} refused: two of its containers name the same file")
        mine = landed.get(plan.key(db))
        if plan.select is not None or (mine is not None and not added) or (mine is None and added):
            continue  # a skim writes files of its own; a database landed before is not copied again
        own = set() if mine is None else {c.path for c in mine.containers}
        for c, path in zip(wanted, paths, strict=True):
            if path in own or registered(dst, path) is None:
                continue
            if added:
                raise DataError(f"{where} refused: its container {c.name} would be placed at {path}, a file "
                                "already registered in the destination by another database (never replaced)")
            again = _landed_now(dst, plan.target, plan.key(db))
            if again is not None:  # a concurrent copy registered it a moment ago
                landed[plan.key(db)] = again
                break
            raise DataError(f"{where} refused: its container {c.name} would be placed at {path}, a file already "
                            "registered in the destination by another database (never replaced)")
    return parameters


def _landed_now(dst: Any, target: str, key: str) -> DatabaseRecord | None:
    try:
        found = dst.catalog.databases(target, keys=[key])
    except NotFound:
        return None
    return found[0] if found else None


def folders(paths: Iterable[str]) -> list[str]:
    """The directories (with their ``/``) that hold ``paths``: what a copy's lease covers."""
    return sorted({posixpath.dirname(p) + "/" for p in paths})
