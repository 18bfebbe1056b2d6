"""giod: a federated object store for particle-physics event data."""

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

__version__ = "0.1.0"

__all__ = [
    "AuthError",
    "CatalogError",
    "ConfigError",
    "ConflictError",
    "DataError",
    "ExpressionError",
    "GiodError",
    "IntegrityError",
    "MissingDependency",
    "NotFound",
    "SchemaError",
    "StorageError",
    "__version__",
]
