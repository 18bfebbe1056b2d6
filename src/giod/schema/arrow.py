"""The Arrow layout of a data model: one row per event.

A collection is one column of type ``list<struct<fields..., relations...>>``;
a fixed-size array field is a (nested) ``fixed_size_list``; a one-to-many
relation is ``list<int32>`` and a one-to-one relation is ``int32`` (-1 when
there is no object). Relation values index the target collection of the same
event. Every level is non-nullable. A member's, tag's or collection's ``doc``
is in its field's metadata (``doc``). A container's Arrow schema has one column
per collection (sorted by name), or one flat column per tag for the tag
container, and carries the model's YAML in its metadata so that a Parquet
file describes itself (:func:`giod.schema.model.schema_from_arrow_metadata` reads it back).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from giod.errors import NotFound
from giod.schema.definitions import TAG_CONTAINER, FieldDef, RelationDef, TypeDef

if TYPE_CHECKING:
    from giod.schema.view import ModelView

__all__ = [
    "CONTAINER_KEY",
    "DOC_KEY",
    "SCHEMA_KEY",
    "collection_arrow_type",
    "container_arrow_schema",
    "member_arrow_field",
    "relation_arrow_type",
    "struct_arrow_type",
]

#: Arrow schema metadata key holding the model as YAML text.
SCHEMA_KEY = b"giod.schema"
#: Arrow schema metadata key holding the container name.
CONTAINER_KEY = b"giod.container"
#: Arrow field metadata key holding a field's, tag's or collection's ``doc``.
DOC_KEY = b"doc"

_INDEX = pa.int32()


def relation_arrow_type(relation: RelationDef) -> pa.DataType:
    """``list<int32>`` for one-to-many, ``int32`` for one-to-one."""
    if relation.many:
        return pa.list_(pa.field("item", _INDEX, nullable=False))
    return _INDEX


def _doc(doc: str) -> dict[bytes, bytes] | None:
    return {DOC_KEY: doc.encode()} if doc else None


def member_arrow_field(member: FieldDef | RelationDef) -> pa.Field:
    """The non-nullable Arrow field of one field or relation; its ``doc`` in the field's metadata."""
    if isinstance(member, RelationDef):
        return pa.field(member.name, relation_arrow_type(member), nullable=False, metadata=_doc(member.doc))
    return pa.field(member.name, member.arrow_type, nullable=False, metadata=_doc(member.doc))


def struct_arrow_type(type_def: TypeDef) -> pa.StructType:
    """The struct of one object: fields then relations, each in declaration order."""
    members: list[FieldDef | RelationDef] = [
        *type_def.fields.values(),
        *type_def.relations.values(),
    ]
    return pa.struct([member_arrow_field(m) for m in members])


def collection_arrow_type(type_def: TypeDef) -> pa.ListType:
    """The column type of a collection of ``type_def`` objects."""
    return pa.list_(pa.field("item", struct_arrow_type(type_def), nullable=False))


def container_arrow_schema(schema: ModelView, container: str) -> pa.Schema:
    """The Arrow schema of one container file of ``schema``, with the model in its metadata."""
    members = schema.containers.get(container)
    if members is None:
        raise NotFound(
            f"model '{schema.name}' has no container '{container}' "
            f"(containers: {', '.join(schema.containers) or 'none'})"
        )
    if container == TAG_CONTAINER:
        fields = [member_arrow_field(tag) for tag in schema.tags.values()]
    else:
        fields = [pa.field(name, schema.arrow_type(name), nullable=False, metadata=_doc(schema.collections[name].doc))
                  for name in members]
    metadata = {SCHEMA_KEY: schema.to_yaml().encode(), CONTAINER_KEY: container.encode()}
    return pa.schema(fields, metadata=metadata)
