"""Schema evolution: which changes are allowed, and reading old data with a new model.

:func:`diff` lists every difference between an old and a new model as small
:class:`Change` objects, each of one kind and each either allowed or refused.
:func:`check` raises one SchemaError naming every refused change.

Allowed: adding a type, collection, container, relation, or a field/tag with
a default; removing a field, tag, relation, collection or type (old data
keeps the column, readers drop it); renaming a field or tag with ``aliases:
[old_name]``; widening a dtype (see :func:`giod.schema.definitions.widens`);
any change of description, doc, default or a collection's counter. Refused: narrowing or otherwise
changing a dtype, changing a fixed-array shape, adding a field or tag
without a default, changing a relation's target or multiplicity, moving a
collection to another container, renaming the model.

:func:`giod.schema.adapt.adapt_table` reads old data with a new model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from giod.errors import SchemaError
from giod.schema import changes
from giod.schema.changes import (
    Change,
    CollectionAdded,
    CollectionMoved,
    CollectionRemoved,
    CollectionRetyped,
    ContainerAdded,
    ContainerRemoved,
    DocChanged,
    DtypeChanged,
    FieldAdded,
    FieldRemoved,
    FieldRenamed,
    FieldWidened,
    FieldWithoutDefault,
    ModelRenamed,
    RelationAdded,
    RelationChanged,
    RelationRemoved,
    RenameAmbiguous,
    ShapeChanged,
    TypeAdded,
    TypeRemoved,
)
from giod.schema.definitions import FieldDef, RelationDef, TypeDef, widens

if TYPE_CHECKING:
    from giod.schema.view import ModelView

__all__ = [*changes.__all__, "check", "diff", "source_field"]  # the kinds of change are re-exported


# -- comparing ----------------------------------------------------------------


def source_field(
    new: FieldDef, old_fields: Mapping[str, FieldDef]
) -> FieldDef | tuple[str, ...] | None:
    """The old field that ``new`` reads its values from: same name, else one of its aliases.

    Returns None when there is none (a new field), or the tuple of candidate
    names when more than one old field matches.
    """
    candidates = tuple(n for n in (new.name, *new.aliases) if n in old_fields)
    if len(candidates) > 1:
        return candidates
    return old_fields[candidates[0]] if candidates else None


def _compare_members(
    kind: str, prefix: str, old: Mapping[str, FieldDef], new: Mapping[str, FieldDef]
) -> list[Change]:
    changes: list[Change] = []
    used: set[str] = set()
    for field in new.values():
        label = prefix + field.name
        src = source_field(field, old)
        if isinstance(src, tuple):
            changes.append(RenameAmbiguous(kind, label, src))
            used.update(src)
            continue
        if src is None:
            if field.default is None:
                changes.append(FieldWithoutDefault(kind, label))
            else:
                changes.append(FieldAdded(kind, label, field))
            continue
        used.add(src.name)
        if src.name != field.name:
            changes.append(FieldRenamed(kind, label, prefix + src.name))
        if src.shape != field.shape:
            changes.append(ShapeChanged(kind, label, src.type_string, field.type_string))
        elif src.dtype != field.dtype:
            cls = FieldWidened if widens(src.dtype, field.dtype) else DtypeChanged
            changes.append(cls(kind, label, src.dtype, field.dtype))
        if src.doc != field.doc:
            changes.append(DocChanged(f"{kind} {label}", "doc"))
        if src.default != field.default:
            changes.append(DocChanged(f"{kind} {label}", "default"))
    changes.extend(FieldRemoved(kind, prefix + n) for n in old if n not in used)
    return changes


def _compare_types(old: TypeDef, new: TypeDef) -> list[Change]:
    prefix = new.name + "."
    changes: list[Change] = []
    if old.description != new.description:
        changes.append(DocChanged(f"type {new.name}", "description"))
    changes.extend(_compare_members("field", prefix, old.fields, new.fields))
    for rel in new.relations.values():
        label = prefix + rel.name
        before = old.relations.get(rel.name)
        if before is None:
            changes.append(RelationAdded(label, rel))
            continue
        if before.target != rel.target:
            changes.append(RelationChanged(label, "target", before.target, rel.target))
        if before.many != rel.many:
            changes.append(
                RelationChanged(label, "multiplicity", _multiplicity(before), _multiplicity(rel))
            )
        if before.doc != rel.doc:
            changes.append(DocChanged(f"relation {label}", "doc"))
    changes.extend(RelationRemoved(prefix + n) for n in old.relations if n not in new.relations)
    return changes


def _multiplicity(rel: RelationDef) -> str:
    return "one-to-many" if rel.many else "one-to-one"


def diff(old: ModelView, new: ModelView) -> list[Change]:
    """Every difference from ``old`` to ``new``, allowed or not, in a fixed order."""
    changes: list[Change] = []
    if old.name != new.name:
        changes.append(ModelRenamed(old.name, new.name))
    if old.description != new.description:
        changes.append(DocChanged("the model", "description"))

    pairs = {(n, n) for n in old.types.keys() & new.types.keys()}
    for name in old.collections.keys() & new.collections.keys():
        pairs.add((old.collections[name].type, new.collections[name].type))
    for name in sorted(old.types.keys() | new.types.keys()):
        if name not in old.types:
            changes.append(TypeAdded(name))
        elif name not in new.types:
            changes.append(TypeRemoved(name))
    for old_type, new_type in sorted(pairs, key=lambda p: (p[1], p[0])):
        changes.extend(_compare_types(old.types[old_type], new.types[new_type]))

    for name in sorted(old.collections.keys() | new.collections.keys()):
        before, after = old.collections.get(name), new.collections.get(name)
        if before is None:
            assert after is not None
            changes.append(CollectionAdded(name, after.type, after.container))
        elif after is None:
            changes.append(CollectionRemoved(name))
        else:
            if before.container != after.container:
                changes.append(CollectionMoved(name, before.container, after.container))
            if before.type != after.type:
                changes.append(CollectionRetyped(name, before.type, after.type))
            if before.doc != after.doc:
                changes.append(DocChanged(f"collection {name}", "doc"))
            if before.counter != after.counter:  # a name for selections: nothing stored changes
                changes.append(DocChanged(f"collection {name}", "counter"))

    old_containers, new_containers = old.containers.keys(), new.containers.keys()
    changes.extend(ContainerAdded(c) for c in sorted(new_containers - old_containers))
    changes.extend(ContainerRemoved(c) for c in sorted(old_containers - new_containers))
    changes.extend(_compare_members("tag", "", old.tags, new.tags))
    return changes


def check(old: ModelView, new: ModelView) -> list[str]:
    """Describe the changes from ``old`` to ``new``; SchemaError if any is refused."""
    changes = diff(old, new)
    refused = [c.describe() for c in changes if not c.allowed]
    if refused:
        raise SchemaError(
            f"model '{new.name}' cannot evolve from the old version: " + "; ".join(refused)
        )
    return [c.describe() for c in changes]
