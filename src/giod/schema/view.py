"""What the Arrow layout, evolution and adaptation read of a data model.

:class:`ModelView` is the part of :class:`giod.schema.Schema` those modules use. They take
it instead of the ``Schema`` class, which calls them: ``model.py`` stands above them and
nothing below imports it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import pyarrow as pa

from giod.schema.definitions import CollectionDef, FieldDef, TypeDef

__all__ = ["ModelView"]


class ModelView(Protocol):
    """A validated data model, read only; ``Schema`` is one."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def types(self) -> Mapping[str, TypeDef]: ...
    @property
    def collections(self) -> Mapping[str, CollectionDef]: ...
    @property
    def tags(self) -> Mapping[str, FieldDef]: ...
    @property
    def containers(self) -> Mapping[str, tuple[str, ...]]: ...

    def collection_type(self, collection: str) -> TypeDef: ...
    def arrow_type(self, collection: str) -> pa.DataType: ...
    def arrow_schema(self, container: str) -> pa.Schema: ...
    def to_yaml(self) -> str: ...
