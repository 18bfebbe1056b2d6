"""What the data model says a stored container file must be: its relations and its Arrow schema.

The checks before anything is registered (``giod.storage.admission.check_files``), run by
``giod recover``, the server's upload routes and ``giod copy``, take these from the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

import pyarrow as pa

from giod.schema import TAG_CONTAINER, Schema
from giod.storage.validation import Relation

__all__ = ["StoredFile", "stored_relations", "stored_schemas"]


class StoredFile(Protocol):
    """What a commit says of a container file (a catalog's ``ContainerSpec``)."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def schema_id(self) -> int: ...


def stored_schemas(files: Iterable[StoredFile], schema_of: Callable[[int], Schema]) -> dict[str, pa.Schema]:
    """The Arrow schema each file of ``files`` must have, by path: its container's in the model it was
    written with (``schema_of(schema_id)``); files of no container of the model (the tag index) are left
    out."""
    out: dict[str, pa.Schema] = {}
    for f in files:
        model = schema_of(f.schema_id)
        if f.name in model.containers or f.name == TAG_CONTAINER:
            out[f.path] = model.arrow_schema(f.name)
    return out


def stored_relations(schema: Schema) -> list[Relation]:
    """Every relation of ``schema`` as stored: source collection, member, target collection, many."""
    return [Relation(name, rname, rdef.target, rdef.many) for name in sorted(schema.collections)
            for rname, rdef in schema.collection_type(name).relations.items()]
