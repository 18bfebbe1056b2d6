"""The data model of a dataset: types, collections, containers and tags.

A :class:`Schema` is built from YAML (or a dict) in fixed steps: safe load
keeping line numbers (:mod:`giod.schema.yamlsource`) -> parse and validate
(:mod:`giod.schema.parse`) -> build. It is immutable; equality and the
fingerprint are defined on its canonical dict form, :meth:`Schema.to_dict`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from giod.errors import NotFound, SchemaError
from giod.schema import adapt, arrow, evolution
from giod.schema.definitions import TAG_CONTAINER, CollectionDef, FieldDef, TypeDef
from giod.schema.parse import MAX_MODEL_BYTES, ModelParts, check_size, parse_model, parse_text
from giod.schema.yamlsource import Located

__all__ = ["Schema", "schema_from_arrow_metadata"]


class Schema:
    """A validated data model.

    Build one with :meth:`from_yaml`, :meth:`from_text` or :meth:`from_dict`;
    the constructor takes the parts and validates them the same way.
    """

    name: str
    description: str
    format_version: int
    types: dict[str, TypeDef]
    collections: dict[str, CollectionDef]
    tags: dict[str, FieldDef]

    def __init__(
        self,
        *,
        name: str,
        types: Mapping[str, TypeDef],
        collections: Mapping[str, CollectionDef],
        tags: Mapping[str, FieldDef] | None = None,
        description: str = "",
        format_version: int = 1,
    ):
        parts = ModelParts(
            format_version, name, description, dict(types), dict(collections), dict(tags or {})
        )
        # Validate by the same path as YAML, so that hand-built parts obey the same rules.
        checked = parse_model(Located(_parts_to_dict(parts), "<Schema>"))
        self._assign(checked)

    @classmethod
    def _from_parts(cls, parts: ModelParts) -> Schema:
        schema = cls.__new__(cls)
        schema._assign(parts)
        return schema

    def _assign(self, parts: ModelParts) -> None:
        self.name = parts.name
        self.description = parts.description
        self.format_version = parts.format_version
        self.types = parts.types
        self.collections = parts.collections
        self.tags = parts.tags

    # -- building -------------------------------------------------------------

    @classmethod
    def from_yaml(cls, source: str | os.PathLike[str]) -> Schema:
        """Load a model from a YAML file path, or from YAML text if ``source`` has a newline."""
        if isinstance(source, str) and "\n" in source:
            return cls.from_text(source)
        name = os.fspath(source)
        try:
            with Path(name).open("rb") as f:
                data = f.read(MAX_MODEL_BYTES + 1)  # a file over the bound is not read whole
        except OSError as exc:
            raise SchemaError(
                f"cannot read the model file: {exc.strerror or exc}", source=name
            ) from exc
        check_size(len(data), name)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SchemaError("the model file is not UTF-8 text", source=name) from exc
        return cls.from_text(text, source=name)

    @classmethod
    def from_text(cls, text: str, source: str = "<string>") -> Schema:
        """Load a model from YAML text; ``source`` names it in error messages."""
        return cls._from_parts(parse_text(text, source))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "<dict>") -> Schema:
        """Build a model from plain data shaped like the YAML format."""
        data = dict(d) if isinstance(d, Mapping) else d
        return cls._from_parts(parse_model(Located(data, source)))

    # -- canonical forms ---------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The canonical plain form: what YAML would say, with every choice made explicit.

        Types, collections and containers are sorted by name; fields,
        relations and tags keep their declaration order, which is the column
        order in Arrow.
        """
        return _parts_to_dict(
            ModelParts(
                self.format_version,
                self.name,
                self.description,
                self.types,
                self.collections,
                self.tags,
            )
        )

    def to_yaml(self) -> str:
        """The model as YAML text; ``Schema.from_yaml(s.to_yaml()) == s``."""
        return self._yaml

    @cached_property
    def _yaml(self) -> str:
        # made once: every container's metadata and every commit carries it, and a NanoAOD model
        # with its documentation is some 80 kB; libyaml's emitter, when present, writes the same text faster
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        text: str = yaml.dump(
            self.to_dict(), Dumper=dumper, sort_keys=False, default_flow_style=None, allow_unicode=True, width=100
        )
        return text

    @cached_property
    def _canonical_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    @property
    def fingerprint(self) -> str:
        """sha256 hex digest of the canonical JSON of :meth:`to_dict`."""
        return hashlib.sha256(self._canonical_json.encode()).hexdigest()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schema):
            return NotImplemented
        # The JSON text, not the dicts: field order matters and dict equality ignores it.
        return self._canonical_json == other._canonical_json

    def __hash__(self) -> int:
        return hash(self._canonical_json)

    def __repr__(self) -> str:
        return f"Schema(name={self.name!r}, fingerprint={self.fingerprint[:12]!r})"

    # -- looking things up ---------------------------------------------------------

    @cached_property
    def containers(self) -> dict[str, tuple[str, ...]]:
        """Container name -> its collections (sorted); the tag container when there are tags."""
        grouped: dict[str, list[str]] = {}
        for name, coll in self.collections.items():
            grouped.setdefault(coll.container, []).append(name)
        out = {c: tuple(sorted(grouped[c])) for c in sorted(grouped)}
        if self.tags:
            out[TAG_CONTAINER] = ()
        return out

    def _collection(self, collection: str) -> CollectionDef:
        try:
            return self.collections[collection]
        except KeyError:
            raise NotFound(
                f"model '{self.name}' has no collection '{collection}' "
                f"(collections: {', '.join(sorted(self.collections))})"
            ) from None

    def collection_type(self, collection: str) -> TypeDef:
        """The type of the objects of ``collection``."""
        return self.types[self._collection(collection).type]

    def container_of(self, collection: str) -> str:
        """The container that stores ``collection``."""
        return self._collection(collection).container

    # -- Arrow and evolution -----------------------------------------------------------

    def arrow_schema(self, container: str) -> pa.Schema:
        """The Arrow schema of ``container``, with this model in its metadata."""
        cache = self.__dict__.setdefault("_arrow_schemas", {})
        if container not in cache:
            cache[container] = arrow.container_arrow_schema(self, container)
        return cache[container]

    def arrow_type(self, collection: str) -> pa.DataType:
        """The ``list<struct>`` column type of ``collection``."""
        cache = self.__dict__.setdefault("_arrow_types", {})  # asked for each collection of every write
        if collection not in cache:
            cache[collection] = arrow.collection_arrow_type(self.collection_type(collection))
        return cache[collection]

    def check_evolution(self, old: Schema) -> list[str]:
        """List how this model differs from ``old``; SchemaError if old data would be unreadable."""
        return evolution.check(old, self)

    def adapt_table(
        self,
        table: pa.Table,
        container: str,
        written_with: Schema,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """Convert a container table written with ``written_with`` to this model's layout.

        Only the columns the table holds are converted, unless it holds all
        of the old container (then new collections and tags are added, empty
        or at their defaults) or ``columns`` names the new columns wanted.
        See :func:`giod.schema.adapt.adapt_table`.
        """
        return adapt.adapt_table(self, table, container, written_with, columns)


def _parts_to_dict(parts: ModelParts) -> dict[str, Any]:
    out: dict[str, Any] = {"schema_version": parts.format_version, "name": parts.name}
    if parts.description:
        out["description"] = parts.description
    out["types"] = {name: parts.types[name].to_dict() for name in sorted(parts.types)}
    out["collections"] = {
        name: parts.collections[name].to_dict() for name in sorted(parts.collections)
    }
    grouped: dict[str, list[str]] = {}
    for name in sorted(parts.collections):
        grouped.setdefault(parts.collections[name].container, []).append(name)
    out["containers"] = {c: grouped[c] for c in sorted(grouped)}
    if parts.tags:
        out["tags"] = {name: tag.to_dict() for name, tag in parts.tags.items()}
    return out


def schema_from_arrow_metadata(arrow_schema: pa.Schema) -> Schema | None:
    """The model stored in an Arrow schema's metadata, or None when there is none."""
    text = (arrow_schema.metadata or {}).get(arrow.SCHEMA_KEY)
    if text is None:
        return None
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError("the stored model is not UTF-8 text", source="<arrow metadata>") from exc
    return Schema.from_text(decoded, source="<arrow metadata>")
