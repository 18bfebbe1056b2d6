"""giod: a federated object store for particle-physics event data."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from giod import config
from giod.errors import (
    AuthError,
    CatalogError,
    ConfigError,
    ConflictError,
    DataError,
    ExpressionError,
    GiodError,
    IntegrityError,
    MissingDependency,
    NotFound,
    SchemaError,
    StorageError,
)

if TYPE_CHECKING:
    from giod.federation import Dataset, Federation
    from giod.read.objects import OID
    from giod.read.selection import Selection
    from giod.schema import Schema

__version__ = "0.1.0"


def open(target: str | os.PathLike[str] | None = None, *, create: bool = False,  # noqa: A001
         token: str | None = None, verify: bool | str = True) -> Federation:
    """Open the federation at a directory, a catalog URL or a giod server.

    Without ``target``, the one the ``giod`` command opens when none is named: the
    ``GIOD_FEDERATION`` environment variable, else ``giod-data`` in the current
    directory; a missing one is a NotFound that says which was tried and why.

    A missing federation is a NotFound naming ``giod init``; ``create=True``
    creates it (a directory with a SQLite catalog and a local site, or the
    tables in an empty catalog database), as ``giod init`` does. A path whose
    first part is a URL's scheme (``postgresql:/host/db``: a URL made a ``Path``,
    which drops a slash) is a ConfigError, not a new folder.

    For a server (``http(s)://host:port``), ``token`` is the bearer token
    (default: the ``GIOD_TOKEN`` environment variable) and ``verify`` the TLS
    check: True, False, or the path of a CA/certificate file.
    """
    from giod.federation import Federation

    if target is not None:
        return Federation.open(target, create=create, token=token, verify=verify)
    chosen, why = config.default_federation()
    try:
        return Federation.open(chosen, create=create, token=token, verify=verify)
    except NotFound as exc:
        raise NotFound(f"{exc}; giod.open() was given no path ({why})") from exc


def __getattr__(name: str) -> object:
    # the heavy modules load on first use, so `import giod` stays fast
    if name in ("Federation", "Dataset"):
        from giod import federation

        return getattr(federation, name)
    if name == "Schema":
        from giod.schema import Schema

        return Schema
    if name in ("Selection",):
        from giod.read.selection import Selection

        return Selection
    if name in ("OID",):
        from giod.read.objects import OID

        return OID
    raise AttributeError(f"module 'giod' has no attribute {name!r}")

__all__ = [
    "AuthError",
    "CatalogError",
    "ConfigError",
    "ConflictError",
    "DataError",
    "Dataset",
    "ExpressionError",
    "Federation",
    "GiodError",
    "IntegrityError",
    "MissingDependency",
    "NotFound",
    "OID",
    "Schema",
    "SchemaError",
    "Selection",
    "StorageError",
    "__version__",
    "open",
]
