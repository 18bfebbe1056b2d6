"""The data model layer: YAML models, their Arrow layout, and schema evolution.

>>> from giod.schema import Schema
>>> schema = Schema.from_yaml("model.yaml")            # doctest: +SKIP
>>> schema.arrow_schema("reco")                         # doctest: +SKIP
"""

from giod.schema.definitions import (
    DTYPES,
    STRING,
    TAG_CONTAINER,
    TAG_INDEX,
    CollectionDef,
    FieldDef,
    RelationDef,
    TypeDef,
)
from giod.schema.model import Schema, schema_from_arrow_metadata

__all__ = [
    "DTYPES",
    "STRING",
    "TAG_CONTAINER",
    "TAG_INDEX",
    "CollectionDef",
    "FieldDef",
    "RelationDef",
    "Schema",
    "TypeDef",
    "schema_from_arrow_metadata",
]
