"""The exceptions giod raises.

Every error that giod lets reach a user is a ``GiodError``; errors from
pyarrow, sqlite3, psycopg, SQLAlchemy or the file system are wrapped with
``raise ... from exc`` so that the cause stays visible to a debugger::

    GiodError
     ├── SchemaError          a data model that is malformed or an evolution that is refused
     ├── DataError            events that do not match their schema
     ├── ExpressionError      a selection expression that does not parse or type-check
     ├── CatalogError         the catalog cannot be reached, migrated or updated
     │    └── ConflictError   a name that already exists, a commit that lost a race
     ├── StorageError         a site or container file cannot be read or written
     │    ├── IntegrityError  a checksum or size mismatch, a truncated or corrupt file
     │    └── TooLarge        a request or upload over a server's published bounds
     │         └── QuotaExceeded  a token holding too many bytes in uploads not yet committed
     ├── NotFound             an unknown dataset, database, entry, object or site
     ├── ConfigError          a bad setting or option
     ├── AuthError            a missing, invalid, revoked or expired token
     │    └── Forbidden       a valid token whose scope does not allow the action
     └── MissingDependency    an optional package that is not installed
"""

from __future__ import annotations

import warnings

__all__ = [
    "AuthError",
    "CatalogError",
    "ConfigError",
    "ConflictError",
    "DataError",
    "ExpressionError",
    "Forbidden",
    "GiodError",
    "IntegrityError",
    "MissingDependency",
    "NotFound",
    "QuotaExceeded",
    "SchemaError",
    "Staging",
    "StorageError",
    "TooLarge",
    "deprecated",
    "needs_extra",
]


class GiodError(Exception):
    """Base class of every error giod raises on purpose."""


class SchemaError(GiodError):
    """A data model is malformed, or a schema change is not allowed.

    ``source`` and ``line`` locate the problem in the YAML file when known.
    """

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None):
        self.message = message
        self.source = source
        self.line = line
        where = ""
        if source is not None:
            where = f"{source}:{line}: " if line is not None else f"{source}: "
        super().__init__(where + message)


class DataError(GiodError):
    """Events handed to a writer do not match the dataset's schema."""


class ExpressionError(GiodError):
    """A selection expression is malformed or names unknown tag fields."""

    def __init__(self, message: str, *, expression: str | None = None, position: int | None = None):
        self.message = message
        self.expression = expression
        self.position = position
        text = message
        if expression is not None and position is not None:
            text = f"{message} at column {position + 1} of {expression!r}"
        super().__init__(text)


class CatalogError(GiodError):
    """The catalog could not be opened, migrated, queried or updated."""


class ConflictError(CatalogError):
    """A name already exists, or a concurrent change made this one impossible."""


class StorageError(GiodError):
    """A site or one of its files could not be read or written."""


class Staging(StorageError):
    """A file is being staged from tape: asked again after ``retry_after_s`` seconds it may be on disk (HTTP 503
    with ``Retry-After``: the server holds no thread for it meanwhile)."""

    def __init__(self, message: str, retry_after_s: float = 1.0):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class IntegrityError(StorageError):
    """A file's checksum or size differs from what the catalog recorded."""


class TooLarge(StorageError):
    """A request or upload over a bound the server publishes (HTTP 413)."""


class QuotaExceeded(TooLarge):
    """An upload that would put a token over its quota of uncommitted bytes (HTTP 429).

    The bytes count again once the files they were uploaded for are committed
    (or removed): commit, then retry.
    """


class NotFound(GiodError, KeyError):
    """A dataset, database, entry, object or site that does not exist."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ConfigError(GiodError):
    """A setting, option or URL that cannot be used."""


class AuthError(GiodError):
    """A token is missing, invalid, revoked or lacks the needed scope."""


class Forbidden(AuthError):
    """The caller is authenticated, but its token's scope or dataset does not allow the action."""


class MissingDependency(GiodError, ImportError):
    """An optional dependency is needed; the message says how to install it."""


def needs_extra(extra: str, what: str, exc: ImportError) -> MissingDependency:
    """The error to raise (``from exc``) when ``what`` cannot import a package of giod's ``extra``.

    ``raise needs_extra("server", "the giod server", exc) from exc`` says which package is missing
    and ``pip install 'giod[server]'``.
    """
    package = exc.name or "a package"
    return MissingDependency(f"{what} needs {package}, which is not installed: pip install 'giod[{extra}]'")


def deprecated(old: str, new: str) -> None:
    """Warn (DeprecationWarning, pointing at the caller's caller) that ``old`` is now spelt ``new``."""
    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=3)
