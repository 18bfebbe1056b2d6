"""The kinds of difference between two versions of a model, allowed or refused (:mod:`giod.schema.evolution`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from giod.schema.definitions import FieldDef, RelationDef

__all__ = [
    "Change",
    "CollectionAdded",
    "CollectionMoved",
    "CollectionRemoved",
    "CollectionRetyped",
    "ContainerAdded",
    "ContainerRemoved",
    "DocChanged",
    "DtypeChanged",
    "FieldAdded",
    "FieldRemoved",
    "FieldRenamed",
    "FieldWidened",
    "FieldWithoutDefault",
    "ModelRenamed",
    "RelationAdded",
    "RelationChanged",
    "RelationRemoved",
    "RenameAmbiguous",
    "ShapeChanged",
    "TypeAdded",
    "TypeRemoved",
]


@dataclass(frozen=True)
class Change:
    """One difference between two versions of a model."""

    allowed: ClassVar[bool] = True

    def describe(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def __str__(self) -> str:
        return self.describe()


# -- allowed ------------------------------------------------------------------


@dataclass(frozen=True)
class TypeAdded(Change):
    name: str

    def describe(self) -> str:
        return f"added type {self.name}"


@dataclass(frozen=True)
class TypeRemoved(Change):
    name: str

    def describe(self) -> str:
        return f"removed type {self.name}"


@dataclass(frozen=True)
class CollectionAdded(Change):
    name: str
    type: str
    container: str

    def describe(self) -> str:
        return f"added collection {self.name} ({self.type}) in container {self.container}"


@dataclass(frozen=True)
class CollectionRemoved(Change):
    name: str

    def describe(self) -> str:
        return f"removed collection {self.name} (old data keeps it; readers drop it)"


@dataclass(frozen=True)
class CollectionRetyped(Change):
    name: str
    old_type: str
    new_type: str

    def describe(self) -> str:
        return f"collection {self.name} now has type {self.new_type} (was {self.old_type})"


@dataclass(frozen=True)
class ContainerAdded(Change):
    name: str

    def describe(self) -> str:
        return f"added container {self.name}"


@dataclass(frozen=True)
class ContainerRemoved(Change):
    name: str

    def describe(self) -> str:
        return f"removed container {self.name}"


@dataclass(frozen=True)
class FieldAdded(Change):
    kind: str  # "field" or "tag"
    label: str  # "Track.chi2" or "ht"
    field: FieldDef

    def describe(self) -> str:
        return f"added {self.kind} {self.label}: {self.field.type_string} = {self.field.default!r}"


@dataclass(frozen=True)
class FieldRemoved(Change):
    kind: str
    label: str

    def describe(self) -> str:
        return f"removed {self.kind} {self.label} (old data keeps it; readers drop it)"


@dataclass(frozen=True)
class FieldRenamed(Change):
    kind: str
    label: str
    old_name: str

    def describe(self) -> str:
        return f"renamed {self.kind} {self.old_name} to {self.label}"


@dataclass(frozen=True)
class FieldWidened(Change):
    kind: str
    label: str
    old_dtype: str
    new_dtype: str

    def describe(self) -> str:
        return f"widened {self.kind} {self.label} from {self.old_dtype} to {self.new_dtype}"


@dataclass(frozen=True)
class RelationAdded(Change):
    label: str
    relation: RelationDef

    def describe(self) -> str:
        kind = (
            "one-to-many, old objects get []"
            if self.relation.many
            else "one-to-one, old objects get -1"
        )
        return f"added relation {self.label} -> {self.relation.target} ({kind})"


@dataclass(frozen=True)
class RelationRemoved(Change):
    label: str

    def describe(self) -> str:
        return f"removed relation {self.label} (old data keeps it; readers drop it)"


@dataclass(frozen=True)
class DocChanged(Change):
    element: str  # "the model", "type Track", "field Track.pt", ...
    what: str  # "description", "doc", "default" or "counter"

    def describe(self) -> str:
        return f"changed the {self.what} of {self.element}"


# -- refused ------------------------------------------------------------------


@dataclass(frozen=True)
class ModelRenamed(Change):
    allowed: ClassVar[bool] = False
    old_name: str
    new_name: str

    def describe(self) -> str:
        return (
            f"the model name changed from '{self.old_name}' to '{self.new_name}' "
            "(a model keeps its name)"
        )


@dataclass(frozen=True)
class DtypeChanged(Change):
    allowed: ClassVar[bool] = False
    kind: str
    label: str
    old_dtype: str
    new_dtype: str

    def describe(self) -> str:
        return (
            f"{self.kind} {self.label}: {self.old_dtype} -> {self.new_dtype} is not a widening "
            "(old values could not all be represented)"
        )


@dataclass(frozen=True)
class ShapeChanged(Change):
    allowed: ClassVar[bool] = False
    kind: str
    label: str
    old_type: str
    new_type: str

    def describe(self) -> str:
        change = f"{self.old_type} -> {self.new_type}"
        return f"{self.kind} {self.label}: fixed-array shape changed ({change})"


@dataclass(frozen=True)
class FieldWithoutDefault(Change):
    allowed: ClassVar[bool] = False
    kind: str
    label: str

    def describe(self) -> str:
        return f"{self.kind} {self.label} is new but has no default (old data has no value for it)"


@dataclass(frozen=True)
class RenameAmbiguous(Change):
    allowed: ClassVar[bool] = False
    kind: str
    label: str
    candidates: tuple[str, ...]

    def describe(self) -> str:
        names = ", ".join(self.candidates)
        return (
            f"{self.kind} {self.label}: more than one old {self.kind} matches its name "
            f"and aliases ({names})"
        )


@dataclass(frozen=True)
class RelationChanged(Change):
    allowed: ClassVar[bool] = False
    label: str
    what: str  # "target" or "multiplicity"
    old: str
    new: str

    def describe(self) -> str:
        return f"relation {self.label}: {self.what} changed from {self.old} to {self.new}"


@dataclass(frozen=True)
class CollectionMoved(Change):
    allowed: ClassVar[bool] = False
    name: str
    old_container: str
    new_container: str

    def describe(self) -> str:
        return (
            f"collection {self.name} moved from container {self.old_container} to "
            f"{self.new_container} (a collection stays in its container)"
        )
