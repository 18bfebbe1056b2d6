"""Tag-selection expressions: ``ds.select("njets >= 2 and ht > 500")``.

The text is split by our own tokenizer and parsed by a precedence-climbing
parser into a typed syntax tree; nothing of it is ever handed to ``eval`` or
to Python's ``ast`` module. An ``Expression`` can then be

- evaluated over tag columns with numpy (``evaluate``),
- checked against a database's per-field (min, max) statistics, to skip whole
  databases that cannot hold a match (``may_match``),
- translated into a pyarrow dataset filter (``to_pyarrow``).

The language is described in ``docs/selection.md``.
"""

from __future__ import annotations

import math

from collections.abc import Mapping
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from giod.expression.arrow import to_arrow
from giod.expression.bounds import may_match_tree, necessary_box
from giod.expression.evaluate import evaluate_tree
from giod.expression.lexer import MAX_LENGTH
from giod.expression.nodes import Constant, Kind, Node, fields_of, render
from giod.expression.parser import MAX_DEPTH, parse_tree

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "Expression", "match_all", "parse"]

Column: TypeAlias = np.ndarray | pa.Array | pa.ChunkedArray


class Expression:
    """A parsed, type-checked selection over tag fields; build it with ``parse``.

    ``text`` is the text it was parsed from, ``fields`` the tag fields it reads.
    Expressions are immutable, hashable and picklable; two are equal when their
    canonical forms (``str(expression)``) are.
    """

    __slots__ = ("_kinds", "_tree", "fields", "text")

    text: str
    fields: frozenset[str]

    def __init__(self, text: str, tree: Node, kinds: Mapping[str, Kind]) -> None:
        self.text = text
        self.fields = fields_of(tree)
        self._tree = tree
        self._kinds = dict(kinds)

    def evaluate(self, columns: Mapping[str, Column], *, size: int | None = None) -> np.ndarray:
        """The boolean mask of the events that match, one entry per event.

        ``columns`` maps each field in ``fields`` to its values (numpy or
        pyarrow; other columns are ignored). Events where a field read is null
        never match. ``size`` gives the number of events when the expression
        reads no field and ``columns`` is empty. Raises ``DataError`` for a
        missing, ragged or wrongly typed column.
        """
        return evaluate_tree(self._tree, self._kinds, columns, size)

    def may_match(self, stats: Mapping[str, tuple[float | None, float | None]]) -> bool:
        """Whether any event of a database with these per-field (min, max) can match.

        False only when no event can match, so a database may be skipped; True
        means "maybe". A missing field or a None bound counts as unknown.
        """
        return may_match_tree(self._tree, self._kinds, stats)

    def necessary_box(self) -> dict[str, tuple[float, float]]:
        """Closed ``{field: (lo, hi)}`` ranges that every matching event lies in.

        A database whose (min, max) of some field lies outside its range
        cannot match: the catalog prunes by this box in SQL, ``may_match``
        then tests what is left.
        """
        return {name: (lo, hi) for name, (lo, hi) in necessary_box(self._tree).items()
                if lo != -math.inf or hi != math.inf}

    def to_pyarrow(self) -> pc.Expression:
        """The same predicate as a ``pyarrow.compute.Expression``, for dataset scans."""
        return to_arrow(self._tree)

    def __str__(self) -> str:
        return render(self._tree)

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Expression):
            return NotImplemented
        return str(self) == str(other) and self._kinds == other._kinds

    def __hash__(self) -> int:
        return hash(str(self))

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, "_kinds"):
            raise AttributeError("Expression objects are immutable")
        object.__setattr__(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Expression, (self.text, self._tree, self._kinds))


def parse(text: str, fields: Mapping[str, str]) -> Expression:
    """Parse and type-check a selection over tag fields.

    ``fields`` maps each tag field to its dtype (``"int32"``, ``"float32"``,
    ``"bool"``, … in numpy or Arrow spelling). Raises ``ExpressionError`` with
    the position of the problem for bad syntax, unknown fields or functions,
    type errors, a result that is not a condition, empty text, or text longer
    than ``MAX_LENGTH`` characters or nested deeper than ``MAX_DEPTH``.
    """
    tree, kinds = parse_tree(text, fields)
    return Expression(text, tree, kinds)


def match_all() -> Expression:
    """The expression that selects every event (``ds.select()`` without text)."""
    return Expression("true", Constant("bool", 0, 4, 1, True), {})
