"""Safe YAML loading that remembers where each element came from.

``yaml.safe_load`` forgets line numbers and silently keeps the last of two
equal keys. Here the text is composed into nodes with the safe loader, then
turned into plain dicts, lists and scalars while recording, for every path
(``("types", "Track", "fields", "pt")``), the 1-based line where the element
starts. Mapping keys are kept as the text written (so ``on:`` is the name
``"on"``, not ``True``); duplicate keys are an error.

Anchors and aliases are refused, and nesting is bounded, while the text is
composed: an alias costs a few bytes but stands for its whole anchored node,
so a few hundred bytes could otherwise expand to millions of elements, and
a deeply nested text would exhaust the composer's recursion.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from giod.errors import SchemaError

__all__ = ["Located", "ModelPath", "dotted", "load_yaml"]

ModelPath = tuple[str | int, ...]

# A fixed-array dtype written unquoted inside a flow collection, which YAML rejects.
_FLOW_ARRAY = re.compile(r"[{\[].*:\s*[a-z0-9]+\[\d+\]")


def dotted(path: ModelPath) -> str:
    """Render a path as the user would write it: ``containers.reco[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "top level"


@dataclass(frozen=True)
class Located:
    """Plain data plus the line where each path starts (empty for a dict given in code)."""

    data: Any
    source: str
    lines: Mapping[ModelPath, int] = field(default_factory=dict)

    def line(self, path: ModelPath) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one."""
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return None
            path = path[:-1]

    def error(self, path: ModelPath, message: str, label: str | None = None) -> SchemaError:
        """A SchemaError located at ``path``'s line, prefixed with ``label`` (default: the path)."""
        prefix = dotted(path) if label is None else label
        text = f"{prefix}: {message}" if prefix else message
        return SchemaError(text, source=self.source, line=self.line(path))


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader, refusing anchors and aliases and collections nested over ``max_depth``."""

    def __init__(self, text: str, source: str, max_depth: int):
        super().__init__(text)
        self.source, self.max_depth, self.depth = source, max_depth, 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
            raise SchemaError(
                "YAML anchors and aliases (&name, *name) are not allowed in a model: "
                "write each element out",
                source=self.source,
                line=line,
            )
        if not isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            return super().compose_node(parent, index)  # type: ignore[return-value]
        self.depth += 1
        if self.depth > self.max_depth:
            raise SchemaError(
                f"the model is nested deeper than {self.max_depth} levels",
                source=self.source,
                line=line,
            )
        try:
            return super().compose_node(parent, index)  # type: ignore[return-value]
        finally:
            self.depth -= 1


def load_yaml(text: str, source: str, *, max_depth: int) -> Located:
    """Compose ``text`` with the safe loader and convert it, keeping line numbers.

    Anchors, aliases and collections nested deeper than ``max_depth`` are a
    SchemaError, found before anything past them is composed.
    """
    try:
        # the reader refuses unprintable characters as soon as it is made
        loader = _BoundedLoader(text, source, max_depth)
    except yaml.YAMLError as exc:
        raise SchemaError(f"invalid YAML: {exc}", source=source) from exc
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        line = _mark_line(exc)
        message = f"invalid YAML: {_yaml_problem(exc)}{_flow_array_hint(text, line)}"
        raise SchemaError(message, source=source, line=line) from exc
    except yaml.YAMLError as exc:
        raise SchemaError(f"invalid YAML: {exc}", source=source) from exc
    finally:
        loader.dispose()
    if root is None:
        raise SchemaError(
            "the model is empty (expected a mapping with schema_version, name, types "
            "and collections)",
            source=source,
            line=1,
        )
    lines: dict[ModelPath, int] = {(): root.start_mark.line + 1}
    converter = _Converter(source, lines)
    return Located(converter.convert(root, ()), source, lines)


def _flow_array_hint(text: str, line: int | None) -> str:
    lines = text.splitlines()
    if line is None or not 1 <= line <= len(lines) or not _FLOW_ARRAY.search(lines[line - 1]):
        return ""
    return " (inside {...} or [...], quote a fixed-array dtype: 'float32[6]')"


def _yaml_problem(exc: yaml.MarkedYAMLError) -> str:
    parts = [p for p in (exc.context, exc.problem) if p]
    return ", ".join(parts) if parts else "malformed document"


def _mark_line(exc: yaml.MarkedYAMLError) -> int | None:
    mark = exc.problem_mark or exc.context_mark
    return mark.line + 1 if mark is not None else None


class _Converter:
    def __init__(self, source: str, lines: dict[ModelPath, int]):
        self.source = source
        self.lines = lines
        self.constructor = yaml.constructor.SafeConstructor()

    def fail(self, node: yaml.Node, message: str) -> SchemaError:
        return SchemaError(message, source=self.source, line=node.start_mark.line + 1)

    def convert(self, node: yaml.Node, path: ModelPath) -> Any:
        if isinstance(node, yaml.ScalarNode):
            try:
                return self.constructor.construct_object(node, deep=True)
            except yaml.YAMLError as exc:
                problem = getattr(exc, "problem", None) or str(exc)
                raise self.fail(node, f"{dotted(path)}: invalid value: {problem}") from exc
        if isinstance(node, yaml.SequenceNode):
            return self._sequence(node, path)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        raise self.fail(node, f"{dotted(path)}: unsupported YAML node")  # pragma: no cover

    def _sequence(self, node: yaml.SequenceNode, path: ModelPath) -> list[Any]:
        out = []
        for i, item in enumerate(node.value):
            self.lines[(*path, i)] = item.start_mark.line + 1
            out.append(self.convert(item, (*path, i)))
        return out

    def _mapping(self, node: yaml.MappingNode, path: ModelPath) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if (
                not isinstance(key_node, yaml.ScalarNode)
                or key_node.tag == "tag:yaml.org,2002:merge"
            ):
                raise self.fail(key_node, f"{dotted(path)}: mapping keys must be plain names")
            key = key_node.value
            if key in out:
                raise self.fail(
                    key_node,
                    f"{dotted((*path, key))}: duplicate key '{key}' "
                    f"(first given at line {first_line[key]})",
                )
            first_line[key] = line
            self.lines[(*path, key)] = line
            out[key] = self.convert(value_node, (*path, key))
        return out
