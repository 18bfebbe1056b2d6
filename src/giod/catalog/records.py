"""Plain value objects that cross the catalog's API boundary.

The catalog hands these out and takes them in; nothing above the catalog
sees SQLAlchemy rows.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from giod.errors import CatalogError, ConfigError
from giod.storage.formats import FORMATS


@dataclass(frozen=True)
class SchemaRecord:
    id: int
    name: str
    fingerprint: str  # sha256 of the canonical model
    text: str  # the YAML text as registered


@dataclass(frozen=True)
class DatasetRecord:
    id: int
    name: str
    schema_id: int
    created_version: int
    created: float  # unix time
    container_format: str | None = None  # the format every writer uses; None: each writer's setting


@dataclass(frozen=True)
class SiteRecord:
    id: int
    name: str
    url: str
    distance: int




#: the file formats a container may have: those registered with giod.storage.formats (arrow, parquet, and any
#: other this process has), as they are when a commit names one
CONTAINER_FORMATS = FORMATS


@dataclass(frozen=True)
class ContainerSpec:
    """A container file written by a writer, to be registered at commit."""

    name: str  # e.g. "raw.tracker", "reco", "tag"
    path: str  # relative to the site root, '/'-separated
    checksum: str  # "crc32c:xxxxxxxx"
    size: int  # bytes
    cluster_entries: tuple[int, ...]  # number of events in each row group
    schema_id: int  # the schema the file was written with
    # Provenance: the program that wrote the file. In commit_database an
    # empty field takes the database's value (DatabaseCommit.program, ...).
    program: str = ""
    program_version: str = ""
    parameters: dict[str, Any] = field(default_factory=dict, hash=False)
    format: str = "parquet"  # "arrow" (Arrow IPC file) or "parquet"
    cluster_checksums: tuple[int, ...] = ()  # Arrow files: CRC-32C of each record batch, then of the footer


@dataclass(frozen=True)
class ContainerRecord:
    id: int
    database_id: int
    name: str
    path: str
    checksum: str
    size: int
    cluster_entries: tuple[int, ...]
    schema_id: int
    created_version: int
    site_ids: tuple[int, ...] = ()  # sites holding a good replica
    program: str = ""  # the program that wrote the file ("" when not recorded)
    program_version: str = ""
    parameters: dict[str, Any] = field(default_factory=dict, hash=False)
    created: float = 0.0  # unix time of the registration
    format: str = "parquet"  # "arrow" (Arrow IPC file) or "parquet" (every container before level 5)
    cluster_checksums: tuple[int, ...] = ()  # Arrow files: CRC-32C of each record batch, then of the footer


@dataclass(frozen=True)
class DatabaseCommit:
    """Everything one writer registers in one catalog transaction."""

    dataset: str
    n_events: int
    site: str  # name of the site the containers were written to
    containers: tuple[ContainerSpec, ...]
    tag_stats: dict[str, tuple[float, float]] = field(default_factory=dict)  # field -> (min, max)
    writer: str = ""  # host:pid or a user-chosen name
    program: str = ""  # program that wrote it, e.g. "giod.physics.simulate"
    program_version: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    parents: tuple[int, ...] = ()  # database ids it was derived from
    idempotency_key: str | None = None


@dataclass(frozen=True)
class CommitResult:
    database_id: int
    first_entry: int
    version: int  # the federation version this commit created (or created earlier)
    duplicate: bool = False  # True when the idempotency key had already landed


@dataclass(frozen=True)
class DatabaseRecord:
    id: int
    dataset_id: int
    first_entry: int
    n_events: int
    bytes: int
    created: float
    created_version: int
    writer: str
    program: str
    program_version: str
    parameters: dict[str, Any]
    parents: tuple[int, ...]
    idempotency_key: str | None
    containers: tuple[ContainerRecord, ...]  # visible at the version asked for
    tag_stats: dict[str, tuple[float, float]]

    @property
    def stop_entry(self) -> int:
        return self.first_entry + self.n_events

    def container(self, name: str) -> ContainerRecord | None:
        for c in self.containers:
            if c.name == name:
                return c
        return None

    def __getstate__(self) -> dict[str, Any]:
        # every field built (see _Built): a pickled or copied record holds values, never rows
        return {name: getattr(self, name) for name in _DATABASE_FIELDS}


class _Built:
    """A field of a listed ``DatabaseRecord`` made from the rows the listing fetched when first read.

    The listing of a large dataset fetches every database's containers and
    statistics but most callers read the fields of a few: building (and
    checking) them record by record up front was most of its cost. A record
    the listing makes holds, under ``_rows``, a callable that returns the
    deferred fields; the first read of one calls it (raising ``CatalogError``
    for a row that does not parse, then and at every read after) and keeps
    the values in the instance, where later reads find them directly, as for
    a record made by the constructor. A non-data descriptor, like
    ``functools.cached_property``: an instance's own value always wins.
    """

    def __init__(self, name: str):
        self.name = name

    def __get__(self, record: Any, owner: type | None = None) -> Any:
        if record is None:
            raise AttributeError(self.name)
        values = record.__dict__
        make = values.get("_rows")
        if make is not None:
            values.update(make())
            values.pop("_rows", None)
        try:
            return values[self.name]
        except KeyError:
            raise AttributeError(self.name) from None


def built(record: DatabaseRecord) -> bool:
    """Whether ``record``'s deferred fields are built (read once, or made by the constructor)."""
    return "_rows" not in record.__dict__


_DATABASE_FIELDS = tuple(f.name for f in fields(DatabaseRecord))
#: the fields a listed record builds on first read (``giod.catalog.listed``)
DEFERRED_FIELDS = ("bytes", "containers", "tag_stats")
for _name in DEFERRED_FIELDS:
    setattr(DatabaseRecord, _name, _Built(_name))


class DatabaseRow(NamedTuple):
    """One line of a dataset's streamed listing (``Catalog.database_rows``): no container records."""

    id: int
    first_entry: int
    n_events: int
    bytes: int  # of the containers visible at the version listed
    created_version: int
    program: str
    containers: str  # the names of its visible containers, comma-separated

    @property
    def stop_entry(self) -> int:
        return self.first_entry + self.n_events


@dataclass(frozen=True)
class VersionRecord:
    version: int
    created: float
    description: str


# Weakest first: each scope implies the ones before it (admin ⊃ write ⊃ read).
TOKEN_SCOPES = ("read", "write", "admin")


@dataclass(frozen=True)
class TokenRecord:
    """A bearer token as the catalog keeps it (never its secret).

    ``dataset`` None: the token covers every dataset. Whether the token is
    still valid (not revoked, not expired) is ``Catalog.verify_token``'s
    business; ``allows`` only judges its scope.
    """

    id: int
    scope: str  # one of TOKEN_SCOPES
    dataset: str | None  # the only dataset it covers; None: all of them
    note: str
    created: float  # unix time
    expires: float | None  # unix time; None: never
    revoked: float | None  # unix time of the revocation; None: not revoked

    def allows(self, scope: str, dataset: str | None) -> bool:
        """Whether this token may do an action needing ``scope`` on ``dataset``.

        ``dataset`` None is a federation-wide action (list datasets or sites,
        add a site). A token restricted to dataset D may do the *read*
        federation-wide actions (listings: names are not data) and read or,
        with write scope, write D's data, nothing of any other dataset.
        Admin actions need an unrestricted admin token.
        """
        if scope not in TOKEN_SCOPES:
            raise ConfigError(f"token scope {scope!r} is not one of {', '.join(TOKEN_SCOPES)}")
        if self.scope not in TOKEN_SCOPES or TOKEN_SCOPES.index(self.scope) < TOKEN_SCOPES.index(scope):
            return False
        if self.dataset is None:
            return True
        if scope == "admin":
            return False
        if dataset is None:
            return scope == "read"
        return dataset == self.dataset

    def state(self, now: float | None = None) -> str:
        """``"revoked"``, ``"expired"`` (at ``now``, default the current time) or ``"active"``."""
        if self.revoked is not None:
            return "revoked"
        if self.expires is not None and self.expires <= (time.time() if now is None else now):
            return "expired"
        return "active"


@dataclass(frozen=True)
class RuleRecord:
    """A replication rule: every matching container of ``dataset`` keeps ``copies`` good replicas.

    ``sites`` None: any site counts (and may receive copies); otherwise only
    those sites. ``containers`` None: every container of the dataset.
    """

    id: int
    dataset: str
    copies: int
    sites: tuple[str, ...] | None
    containers: tuple[str, ...] | None
    created: float  # unix time


@dataclass(frozen=True)
class ReplicaRecord:
    """One copy of a live container: where it is, in which state, when it was last checked."""

    container_id: int
    site: str
    state: str  # one of tables.REPLICA_STATES
    checked: float | None  # unix time


Bounds = dict[str, tuple[float, float]]


def overlaps(tag_stats: dict[str, tuple[float, float]], bounds: Bounds) -> bool:
    """Whether a database's tag statistics may hold a value in every range of ``bounds``.

    The catalog's rule, done in SQL by ``Catalog.databases(..., overlapping=)``:
    a field whose known (min, max) lies wholly outside its range rules the
    database out; a missing field, an unknown (infinite) bound or
    contradictory statistics (min > max) rule out nothing.
    """
    for name, (lo, hi) in bounds.items():
        got = tag_stats.get(name)
        if got is None:
            continue
        smin, smax = got
        if smin > smax:
            continue
        if smax < lo or smin > hi:
            return False
    return True


def keyed_ranges(databases: Iterable[DatabaseRecord], key: str) -> list[tuple[int, int]]:
    """The ranges ``[start, stop)`` of a stream of events that ``databases`` committed under
    ``<key>:<start>`` hold (``Writer(idempotency_key=key, key_from=...)``), merged and in order."""
    prefix = key + ":"
    spans = []
    for db in databases:
        got = db.idempotency_key or ""
        start = got[len(prefix):]
        if got.startswith(prefix) and start.isascii() and start.isdigit():
            spans.append((int(start), int(start) + db.n_events))
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


#: the largest value of a catalog's integer column (64 bits, signed): what numpy and the drivers take
INT64_MAX = (1 << 63) - 1


def counts(values: list[Any]) -> bool:
    """Whether ``values`` (a parsed JSON list) are integers from 0 to 2^63-1 (``bool`` is not one): cluster
    entries, checksums, ids, as a catalog row or a server gives them."""
    return all(type(x) is int and 0 <= x <= INT64_MAX for x in values)


def check_head(row: Sequence[Any]) -> None:
    """A database row's id, dataset id, first entry, events, created and version (its first six values) as a
    record holds them: a SQLite column keeps whatever was put in it; CatalogError when they are not."""
    first, n = row[2], row[3]
    if not (type(row[0]) is int and type(row[1]) is int and type(first) is int and type(n) is int
            and type(row[5]) is int and (type(row[4]) is float or type(row[4]) is int)
            and 0 <= first <= INT64_MAX and 0 <= n <= INT64_MAX):
        raise CatalogError(f"malformed catalog row: database {str(row[0])[:40]} is not as written: "
                           f"{str(tuple(row[:6]))[:160]}")


def check_container(row: Sequence[Any]) -> None:
    """A container row's id, database id, name, path, checksum, size (its first six values), schema id and
    version (its eighth and ninth) as a record holds them; CatalogError when they are not."""
    size = row[5]
    if not (type(row[0]) is int and type(row[1]) is int and type(row[2]) is str and type(row[3]) is str
            and type(row[4]) is str and type(size) is int and 0 <= size <= INT64_MAX
            and type(row[7]) is int and type(row[8]) is int):
        raise CatalogError(f"malformed catalog row: container {str(row[0])[:40]} is not as written: "
                           f"{str(tuple(row[:9]))[:160]}")


def row_bounds(field: Any, lo: Any, hi: Any, what: str) -> tuple[float, float]:
    """A statistics row's bounds (NULL: unknown, read as -inf/+inf); CatalogError when they are not numbers
    or its field not a name."""
    if type(field) is str and (lo is None or type(lo) is float or type(lo) is int) and (
            hi is None or type(hi) is float or type(hi) is int):
        return (-math.inf if lo is None else float(lo), math.inf if hi is None else float(hi))
    raise CatalogError(f"malformed catalog row: a statistic of {what} is not as written: "
                       f"{str((field, lo, hi))[:120]}")


def row_list(text: str, what: str) -> tuple[int, ...]:
    """A catalog row's JSON list of integers from 0 to 2^63-1 (cluster entries, checksums); CatalogError when
    it is none."""
    try:
        got = json.loads(text)
        if isinstance(got, list) and counts(got):
            return tuple(got)
    except (TypeError, ValueError):
        pass
    raise CatalogError(f"malformed catalog row: {what} is not a JSON list of integers from 0 to 2^63-1: "
                       f"{str(text)[:80]!r}")


def row_object(text: str, what: str) -> dict[str, Any]:
    """A catalog row's JSON object (parameters); CatalogError when it is none."""
    try:
        got = json.loads(text)
        if isinstance(got, dict):
            return got
    except (TypeError, ValueError):
        pass
    raise CatalogError(f"malformed catalog row: {what} is not a JSON object: {str(text)[:80]!r}")
