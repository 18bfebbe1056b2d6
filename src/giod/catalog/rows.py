"""Catalog rows are untrusted: each is parsed once, where its record is built.

A row written by an older giod, by hand or by another tool may hold what no
record can: a site's distance ``'far'`` (SQLite keeps text in a number
column), a URL with an unbalanced ``[``, a token's date that is not a time.
:func:`site_record` and :func:`token_record` check every column and raise
:class:`RowError` naming the table, the row and what is wrong. Listings skip
such a row with one warning per catalog (:func:`skip`), so that every
ordinary command still works; ``giod fsck`` reports them all
(:func:`bad_rows`), and ``giod site rm`` / ``giod token rm`` remove them.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from sqlalchemy import Connection, select

from giod.catalog.records import TOKEN_SCOPES, SiteRecord, TokenRecord
from giod.catalog.tables import sites, tokens
from giod.errors import CatalogError

__all__ = ["BadRow", "RowError", "bad_rows", "parse_rows", "site_record", "token_record"]

log = logging.getLogger("giod.catalog")

R = TypeVar("R")


@dataclass(frozen=True)
class BadRow:
    """A catalog row that does not parse: its table, how it is named, what is wrong, and the remedy."""

    table: str
    key: str  # "name 'far'", "id 3"
    problem: str
    remedy: str  # the command that removes it

    def __str__(self) -> str:
        return f"table {self.table} {self.key}: {self.problem}"


class RowError(CatalogError):
    """A catalog row that does not parse (see :class:`BadRow`)."""

    def __init__(self, bad: BadRow):
        super().__init__(f"catalog row {bad} ({bad.remedy} removes it)")
        self.bad = bad


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _time(value: Any) -> bool:
    """A unix time: a real number, not NaN (a finite time beyond any date is listed as not a date)."""
    return (_integer(value) or isinstance(value, float)) and not math.isnan(value)


def _url_problem(url: Any) -> str | None:
    if not isinstance(url, str) or not url:
        return f"url {url!r} is not a text"
    if any(ord(c) < 32 or ord(c) == 127 for c in url):
        return f"url {url!r} holds control characters"
    if "://" not in url:
        return None  # a directory
    try:
        urlsplit(url).port  # noqa: B018 - raises on an unbalanced '[' and on a port out of range
    except ValueError as exc:
        return f"url {url!r} is not a URL ({exc})"
    return None


def site_record(row: Any) -> SiteRecord:
    """The site of a ``sites`` row; RowError when a column holds what a site cannot have."""
    name = row.name if isinstance(row.name, str) and row.name else None
    key = f"name {row.name!r}" if name is not None else f"id {row.id!r}"
    remedy = f"giod site rm {name}" if name is not None else "SQL"
    if name is None:
        problem: str | None = f"name {row.name!r} is not a text"
    elif not _integer(row.distance):
        problem = f"distance {row.distance!r} is not an integer"
    else:
        problem = _url_problem(row.url)
    if name is None or problem is not None:
        raise RowError(BadRow("sites", key, problem or "", remedy))
    return SiteRecord(int(row.id), name, row.url, int(row.distance))


def token_record(row: Any) -> TokenRecord:
    """The token of a ``tokens`` row; RowError when a column holds what a token cannot have."""
    problem = None
    if row.scope not in TOKEN_SCOPES:
        problem = f"scope {row.scope!r} is not one of {', '.join(TOKEN_SCOPES)}"
    elif row.dataset is not None and not isinstance(row.dataset, str):
        problem = f"dataset {row.dataset!r} is not a name"
    elif not isinstance(row.note, str):
        problem = f"note {row.note!r} is not a text"
    else:
        for column in ("created", "expires", "revoked"):
            value = getattr(row, column)
            if (value is not None or column == "created") and not _time(value):
                problem = f"{column} {value!r} is not a time"
                break
    if problem is not None:
        raise RowError(BadRow("tokens", f"id {row.id}", problem, f"giod token rm {row.id}"))
    return TokenRecord(
        id=int(row.id),
        scope=row.scope,
        dataset=row.dataset,
        note=row.note,
        created=float(row.created),
        expires=None if row.expires is None else float(row.expires),
        revoked=None if row.revoked is None else float(row.revoked),
    )


# what this process has warned of, by the catalog's address: a command lists sites many times, through
# more than one catalog object of the same catalog, and says so once
_WARNED: set[tuple[str, BadRow]] = set()
_LOCK = threading.Lock()


def skip(catalog: str, bad: BadRow) -> None:
    """Warn, once per catalog (its URL) and process, that a row is left out."""
    key = (catalog, bad)
    with _LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    log.warning("skipped catalog row: %s (giod fsck lists every such row; %s removes it)", bad, bad.remedy)


def parse_rows(catalog: str, rows: Iterable[Any], parse: Callable[[Any], R]) -> Iterator[R]:
    """``parse`` of each row, leaving out (with a warning) those that do not parse."""
    for row in rows:
        try:
            yield parse(row)
        except RowError as exc:
            skip(catalog, exc.bad)


def bad_rows(conn: Connection) -> list[BadRow]:
    """Every row of the sites and tokens tables that does not parse, by table and id."""
    found = []
    for table, parse in ((sites, site_record), (tokens, token_record)):
        for row in conn.execute(select(table).order_by(table.c.id)):
            try:
                parse(row)
            except RowError as exc:
                found.append(exc.bad)
    return found
