"""Parse and validate a data model (plain data with line numbers) into its parts.

The steps are fixed: top-level keys, then types (fields, relations), then
collections, containers and tags, then cross-references (relation targets).
The first problem found raises one :class:`giod.errors.SchemaError` that
names the element, says what is wrong and what was expected, and carries the
source and line when the model came from YAML.

Every model passes here, so the bounds on its size are kept here too (see
docs/schema.md, "Bounds"): the bytes and nesting of its text are checked
before the text is composed, and each count before the elements it counts
are built.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Any

from giod.errors import SchemaError
from giod.schema.definitions import (
    DTYPES,
    STRING,
    TAG_CONTAINER,
    CollectionDef,
    FieldDef,
    RelationDef,
    TypeDef,
    check_default,
    parse_dtype,
)
from giod.schema.yamlsource import Located, ModelPath, dotted, load_yaml

__all__ = [
    "DEFAULT_CONTAINER",
    "FORMAT_VERSIONS",
    "MAX_ARRAY_DIMS",
    "MAX_ARRAY_ELEMENTS",
    "MAX_COLLECTIONS",
    "MAX_DEPTH",
    "MAX_MEMBERS",
    "MAX_MODEL_BYTES",
    "MAX_MODEL_MEMBERS",
    "MAX_TAGS",
    "MAX_TYPES",
    "ModelParts",
    "parse_model",
    "parse_text",
]

#: The schema_version values this giod understands.
FORMAT_VERSIONS = (1,)

#: Where collections go when the model has no ``containers`` key.
DEFAULT_CONTAINER = "events"

# Bounds on one model. A large real model (EDM4hep-sized) is some tens of kB
# with a few hundred members; these leave ample room while keeping what one
# model costs to parse, and what one object of it weighs, small.
#: UTF-8 bytes of a model's YAML text.
MAX_MODEL_BYTES = 256 << 10
#: Nesting of mappings and lists in the YAML text (a model needs about 6, 14 with array defaults).
MAX_DEPTH = 32
#: Types of one model.
MAX_TYPES = 1000
#: Fields plus relations of one type.
MAX_MEMBERS = 1000
#: Collections of one model.
MAX_COLLECTIONS = 1000
#: Tags of one model.
MAX_TAGS = 1000
#: Fields, relations and tags of one model together.
MAX_MODEL_MEMBERS = 10_000
#: Dimensions of a fixed-size array field (``float32[3][3]`` has 2).
MAX_ARRAY_DIMS = 8
#: Elements of one fixed-size array field (the product of its dimensions).
MAX_ARRAY_ELEMENTS = 1 << 24

_TYPE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_CONTAINER = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")
_RESERVED_SUFFIX = "_index"

_TOP_KEYS = ("schema_version", "name", "description", "types", "collections", "containers", "tags")
_TYPE_KEYS = ("description", "fields", "relations")
_FIELD_KEYS = ("type", "default", "aliases", "doc", "precision")
_RELATION_KEYS = ("to", "many", "doc")
_COLLECTION_KEYS = ("type", "doc", "counter")

_DTYPE_HELP = (f"expected one of {', '.join(DTYPES)}, optionally with [N] for a fixed-size array, "
               f"or {STRING}")


@dataclass(frozen=True)
class ModelParts:
    """Everything a Schema is built from, validated."""

    format_version: int
    name: str
    description: str
    types: dict[str, TypeDef]
    collections: dict[str, CollectionDef]
    tags: dict[str, FieldDef]


def parse_model(located: Located) -> ModelParts:
    """Validate ``located.data`` and build the model's parts; SchemaError on the first problem."""
    return _Parser(located).parse()


def parse_text(text: str, source: str) -> ModelParts:
    """Validate a model's YAML text and build its parts; SchemaError on the first problem.

    The text's size is checked before it is read as YAML, and anchors,
    aliases and nesting deeper than :data:`MAX_DEPTH` while it is composed.
    """
    check_size(len(text) if len(text) > MAX_MODEL_BYTES else len(text.encode("utf-8")), source)
    return parse_model(load_yaml(text, source, max_depth=MAX_DEPTH))


def check_size(n_bytes: int, source: str) -> None:
    """SchemaError when a model text of ``n_bytes`` is over :data:`MAX_MODEL_BYTES`."""
    if n_bytes > MAX_MODEL_BYTES:
        raise SchemaError(
            f"the model's YAML text is over {MAX_MODEL_BYTES:,} bytes, the bound on one model",
            source=source,
        )


def _listing(names: Any) -> str:
    names = sorted(names)
    return ", ".join(names) if names else "none"


class _Parser:
    def __init__(self, located: Located):
        self.loc = located
        self.members = 0  # fields, relations and tags so far, against MAX_MODEL_MEMBERS

    def error(self, path: ModelPath, message: str, label: str | None = None) -> SchemaError:
        return self.loc.error(path, message, label)

    # -- generic checks -------------------------------------------------

    def mapping(
        self, value: Any, path: ModelPath, allowed: tuple[str, ...], what: str
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(path, f"expected {what}, got {_kind(value)}")
        for key in value:
            if key not in allowed:
                hint = difflib.get_close_matches(str(key), allowed, n=1)
                suggestion = f"; did you mean '{hint[0]}'?" if hint else ""
                raise self.error(
                    (*path, key),
                    f"unknown key '{key}' (expected one of: {', '.join(allowed)}){suggestion}",
                )
        return value

    def named_mapping(
        self, value: Any, path: ModelPath, what: str, *, most: int, members: bool = False
    ) -> dict[Any, Any]:
        """A mapping whose keys are user-chosen names (types, fields, collections, ...).

        It may hold at most ``most`` entries; ``members`` counts them against
        the model's total of fields, relations and tags.
        """
        if not isinstance(value, dict):
            raise self.error(path, f"expected a mapping of {what}, got {_kind(value)}")
        if len(value) > most:
            raise self.error(path, f"{len(value):,} entries; at most {most:,} are allowed")
        if members:
            self.members += len(value)
            if self.members > MAX_MODEL_MEMBERS:
                raise self.error(
                    path,
                    f"the model has more than {MAX_MODEL_MEMBERS:,} fields, relations and tags",
                )
        return value

    def text(self, value: Any, path: ModelPath) -> str:
        if not isinstance(value, str):
            raise self.error(path, f"expected text, got {_kind(value)}")
        return value

    def name(self, key: Any, path: ModelPath, pattern: re.Pattern[str], what: str) -> str:
        if not isinstance(key, str) or not pattern.match(key):
            raise self.error(path, f"invalid {what} name '{key}' (expected {_describe(pattern)})")
        return key

    def member_name(self, key: Any, path: ModelPath, what: str) -> str:
        name = self.name(key, path, _NAME, what)
        if name.endswith(_RESERVED_SUFFIX):
            raise self.error(
                path, f"{what} name '{name}' ends in '{_RESERVED_SUFFIX}', which is reserved"
            )
        return name

    # -- the model --------------------------------------------------------

    def parse(self) -> ModelParts:
        root = self.mapping(self.loc.data, (), _TOP_KEYS, "a mapping")
        for key in ("schema_version", "name"):
            if key not in root:
                raise self.error((), f"required key '{key}' is missing")
        version = root["schema_version"]
        if type(version) is not int or version not in FORMAT_VERSIONS:
            known = ", ".join(str(v) for v in FORMAT_VERSIONS)
            raise self.error(
                ("schema_version",), f"unknown format version {version!r} (expected {known})"
            )
        name = self.name(root["name"], ("name",), _TYPE_NAME, "model")
        description = self.text(root.get("description", ""), ("description",))
        types = self.types(root.get("types", {}))
        collections = self.collections(root.get("collections", {}), types)
        if "containers" in root:
            containers = self.containers(root["containers"], collections)
        else:
            containers = {c: DEFAULT_CONTAINER for c in collections}
        tags = self.tags(root.get("tags", {}), collections)
        if not collections and not tags:
            raise self.error((), "a model needs at least one collection or tag")
        self.check_targets(types, collections)
        return ModelParts(
            format_version=version,
            name=name,
            description=description,
            types=types,
            collections={
                c: CollectionDef(c, d.type, containers[c], d.doc, d.counter) for c, d in collections.items()
            },
            tags=tags,
        )

    def types(self, value: Any) -> dict[str, TypeDef]:
        path: ModelPath = ("types",)
        value = self.named_mapping(
            value, path, "type names to type definitions", most=MAX_TYPES
        )
        return {
            self.name(k, (*path, k), _TYPE_NAME, "type"): self.type(k, v, (*path, k))
            for k, v in value.items()
        }

    def type(self, name: str, value: Any, path: ModelPath) -> TypeDef:
        body = self.mapping(value, path, _TYPE_KEYS, "a mapping with 'fields' and/or 'relations'")
        description = self.text(body.get("description", ""), (*path, "description"))
        fields_path = (*path, "fields")
        raw_fields = self.named_mapping(
            body.get("fields", {}), fields_path, "field names to dtypes", most=MAX_MEMBERS,
            members=True,
        )
        rel_path = (*path, "relations")
        raw_rel = self.named_mapping(
            body.get("relations", {}), rel_path, "relation definitions", most=MAX_MEMBERS,
            members=True,
        )
        if len(raw_fields) + len(raw_rel) > MAX_MEMBERS:
            raise self.error(
                path,
                f"{len(raw_fields):,} fields and {len(raw_rel):,} relations; at most "
                f"{MAX_MEMBERS:,} members are allowed per type",
            )
        fields = {
            self.member_name(k, (*fields_path, k), "field"): self.field(k, v, (*fields_path, k))
            for k, v in raw_fields.items()
        }
        relations = {}
        for key, spec in raw_rel.items():
            rel_name = self.member_name(key, (*rel_path, key), "relation")
            if rel_name in fields:
                raise self.error(
                    (*rel_path, key),
                    f"relation '{rel_name}' has the same name as a field of {name}",
                )
            relations[rel_name] = self.relation(rel_name, spec, (*rel_path, key))
        if not fields and not relations:
            raise self.error(path, "a type needs at least one field or relation")
        self.check_aliases(fields, relations, fields_path)
        return TypeDef(name, fields, relations, description)

    def field(
        self, name: str, value: Any, path: ModelPath, *, scalar_only: bool = False
    ) -> FieldDef:
        if isinstance(value, str):
            spec: dict[str, Any] = {"type": value}
            type_path = path
        else:
            spec = self.mapping(value, path, _FIELD_KEYS, "a dtype or a mapping with 'type'")
            if "type" not in spec:
                raise self.error(path, "required key 'type' is missing")
            type_path = (*path, "type")
        type_text = spec["type"]
        if not isinstance(type_text, str):
            raise self.error(type_path, f"expected a dtype, got {_kind(type_text)} ({_DTYPE_HELP})")
        try:
            dtype, shape = parse_dtype(type_text)
        except ValueError:
            raise self.error(type_path, f"unknown dtype '{type_text}' ({_DTYPE_HELP})") from None
        self.check_shape(type_text, shape, type_path)
        if scalar_only and shape:
            raise self.error(
                type_path, f"tags are scalars, but '{type_text}' is a fixed-size array"
            )
        default = None
        if "default" in spec:
            try:
                default = check_default(spec["default"], dtype, shape)
            except (TypeError, ValueError) as exc:
                raise self.error(
                    (*path, "default"), f"invalid default {spec['default']!r}: {exc}"
                ) from None
        aliases_raw = spec.get("aliases", [])
        if not isinstance(aliases_raw, list):
            raise self.error(
                (*path, "aliases"), f"expected a list of names, got {_kind(aliases_raw)}"
            )
        aliases = tuple(
            self.member_name(a, (*path, "aliases", i), "alias") for i, a in enumerate(aliases_raw)
        )
        doc = self.text(spec.get("doc", ""), (*path, "doc"))
        precision = self.precision(spec["precision"], dtype, (*path, "precision")) if "precision" in spec else None
        return FieldDef(name, dtype, shape, default, aliases, doc, precision)

    def precision(self, value: Any, dtype: str, path: ModelPath) -> int:
        """Mantissa bits a float field keeps: 1 to all of its dtype's."""
        from giod.schema.precision import MANTISSA_BITS

        if dtype not in MANTISSA_BITS:
            raise self.error(path, f"precision applies to float32 and float64 fields, not {dtype}")
        most = MANTISSA_BITS[dtype]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise self.error(path, f"precision is the number of mantissa bits kept: a whole number from 1 to "
                                   f"{most} for {dtype}, got {value!r}")
        return value

    def check_shape(self, type_text: str, shape: tuple[int, ...], path: ModelPath) -> None:
        # before the default is checked against the shape, and long before any array is made
        if len(shape) > MAX_ARRAY_DIMS:
            raise self.error(
                path,
                f"'{type_text}' has {len(shape)} dimensions; at most {MAX_ARRAY_DIMS} are allowed",
            )
        if math.prod(shape) > MAX_ARRAY_ELEMENTS:
            raise self.error(
                path,
                f"'{type_text}' has {math.prod(shape):,} elements; at most "
                f"{MAX_ARRAY_ELEMENTS:,} are allowed per field",
            )

    def relation(self, name: str, value: Any, path: ModelPath) -> RelationDef:
        spec = self.mapping(value, path, _RELATION_KEYS, "a mapping {to: COLLECTION, many: BOOL}")
        if "to" not in spec:
            raise self.error(path, "required key 'to' is missing (the target collection)")
        target = self.name(spec["to"], (*path, "to"), _NAME, "collection")
        many = spec.get("many", False)
        if not isinstance(many, bool):
            raise self.error((*path, "many"), f"expected true or false, got {_kind(many)}")
        doc = self.text(spec.get("doc", ""), (*path, "doc"))
        return RelationDef(name, target, many, doc)

    def check_aliases(
        self, fields: dict[str, FieldDef], relations: dict[str, Any], path: ModelPath
    ) -> None:
        owner: dict[str, str] = {}
        for f in fields.values():
            for i, alias in enumerate(f.aliases):
                where = (*path, f.name, "aliases", i)
                if alias in fields or alias in relations:
                    raise self.error(where, f"alias '{alias}' is also the name of a member")
                if alias in owner:
                    raise self.error(
                        where, f"alias '{alias}' is already an alias of '{owner[alias]}'"
                    )
                owner[alias] = f.name

    def collections(self, value: Any, types: dict[str, TypeDef]) -> dict[str, CollectionDef]:
        path: ModelPath = ("collections",)
        value = self.named_mapping(
            value, path, "collection names to type names", most=MAX_COLLECTIONS
        )
        out = {}
        for key, spec in value.items():
            cpath = (*path, key)
            name = self.name(key, cpath, _NAME, "collection")
            counter = ""
            if isinstance(spec, str):
                type_name, doc, type_path = spec, "", cpath
            else:
                body = self.mapping(
                    spec, cpath, _COLLECTION_KEYS, "a type name or {type: T, doc: ...}"
                )
                if "type" not in body:
                    raise self.error(cpath, "required key 'type' is missing")
                type_name, type_path = body["type"], (*cpath, "type")
                doc = self.text(body.get("doc", ""), (*cpath, "doc"))
                if "counter" in body:
                    counter = self.name(body["counter"], (*cpath, "counter"), _NAME, "counter")
            if type_name not in types:
                raise self.error(
                    type_path,
                    f"type '{type_name}' is not defined (defined types: {_listing(types)})",
                    label=dotted(cpath),
                )
            out[name] = CollectionDef(name, type_name, "", doc, counter)
        counted: dict[str, str] = {}  # a counter names one collection's size, and nothing else
        for name, cdef in out.items():
            if cdef.counter and (cdef.counter in out or cdef.counter in counted):
                other = f"collection '{counted[cdef.counter]}'s counter" if cdef.counter in counted else "a collection"
                raise self.error((*path, name, "counter"), f"counter '{cdef.counter}' is already the name of {other}")
            if cdef.counter:
                counted[cdef.counter] = name
        return out

    def containers(self, value: Any, collections: dict[str, CollectionDef]) -> dict[str, str]:
        path: ModelPath = ("containers",)
        value = self.named_mapping(
            value, path, "container names to lists of collections", most=MAX_COLLECTIONS
        )
        where: dict[str, str] = {}
        for key, members in value.items():
            cpath = (*path, key)
            name = self.name(key, cpath, _CONTAINER, "container")
            if name == TAG_CONTAINER:
                raise self.error(
                    cpath, f"the container name '{TAG_CONTAINER}' is reserved for tags"
                )
            if not isinstance(members, list) or not members:
                raise self.error(cpath, "expected a non-empty list of collection names")
            for i, member in enumerate(members):
                if member not in collections:
                    raise self.error(
                        (*cpath, i),
                        f"collection '{member}' does not exist "
                        f"(defined collections: {_listing(collections)})",
                    )
                if member in where:
                    if where[member] == name:
                        raise self.error(
                            (*cpath, i), f"collection '{member}' is listed twice in '{name}'"
                        )
                    raise self.error(
                        (*cpath, i),
                        f"collection '{member}' is in both '{where[member]}' and '{name}'",
                        label="containers",
                    )
                where[member] = name
        missing = [c for c in collections if c not in where]
        if missing:
            raise self.error(
                path,
                f"collection '{missing[0]}' is in no container "
                "(every collection must be listed in exactly one)",
            )
        return where

    def tags(self, value: Any, collections: dict[str, CollectionDef]) -> dict[str, FieldDef]:
        path: ModelPath = ("tags",)
        value = self.named_mapping(value, path, "tag names to dtypes", most=MAX_TAGS, members=True)
        out = {}
        for key, spec in value.items():
            tpath = (*path, key)
            name = self.member_name(key, tpath, "tag")
            if name in collections:
                raise self.error(tpath, f"tag '{name}' has the same name as a collection")
            counts = [c for c, d in collections.items() if d.counter == name]
            if counts:
                raise self.error(tpath, f"tag '{name}' has the same name as the counter of collection '{counts[0]}'")
            out[name] = self.field(name, spec, tpath, scalar_only=True)
        self.check_aliases(out, {}, path)
        return out

    def check_targets(
        self, types: dict[str, TypeDef], collections: dict[str, CollectionDef]
    ) -> None:
        for type_def in types.values():
            for rel in type_def.relations.values():
                if rel.target not in collections:
                    raise self.error(
                        ("types", type_def.name, "relations", rel.name, "to"),
                        f"relation {type_def.name}.{rel.name}: target collection "
                        f"'{rel.target}' does not exist "
                        f"(defined collections: {_listing(collections)})",
                        label="",
                    )


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the text '{value}'"
    return f"{type(value).__name__} {value!r}"


def _describe(pattern: re.Pattern[str]) -> str:
    return {
        _TYPE_NAME.pattern: "letters, digits and '_', not starting with a digit",
        _NAME.pattern: "a letter, then letters, digits or '_'",
        _CONTAINER.pattern: "lower-case words of [a-z0-9_] joined by '.', starting with a letter",
    }[pattern.pattern]
