"""The catalog layer: the federation's metadata in SQLite or PostgreSQL.

``Catalog.open(url)`` gives one API over both backends; the records in
``giod.catalog.records`` are the values it takes and returns.
"""

from giod.catalog.catalog import Catalog
from giod.catalog.records import (
    CommitResult,
    ContainerRecord,
    ContainerSpec,
    DatabaseCommit,
    DatabaseRecord,
    DatasetRecord,
    SchemaRecord,
    SiteRecord,
    VersionRecord,
)

__all__ = [
    "Catalog",
    "CommitResult",
    "ContainerRecord",
    "ContainerSpec",
    "DatabaseCommit",
    "DatabaseRecord",
    "DatasetRecord",
    "SchemaRecord",
    "SiteRecord",
    "VersionRecord",
]
