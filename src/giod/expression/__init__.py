"""Selection expressions: ``ds.select("njets >= 2 and ht > 500")``, ``ds.select("count(Jet.pt > 30) >= 2")``.

The text is split by our own tokenizer and parsed by a precedence-climbing
parser into a typed syntax tree; nothing of it is ever handed to ``eval`` or
to Python's ``ast`` module. An ``Expression`` can then be

- evaluated over tag columns with numpy, and over the objects of collections
  with awkward (``evaluate``),
- checked against a database's per-field (min, max) statistics, to skip whole
  databases that cannot hold a match (``may_match``),
- translated into a pyarrow dataset filter (``to_pyarrow``).

The language is described in ``docs/selection.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from giod.expression.arrow import to_arrow
from giod.expression.bounds import always_matches_tree, matches_tree, may_match_tree, necessary_box
from giod.expression.evaluate import evaluate_tree
from giod.expression.lexer import MAX_LENGTH
from giod.expression.nodes import Constant, Kind, Logical, Node, fields_of, objects_of, render
from giod.expression.parser import MAX_DEPTH, parse_tree

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "Expression", "match_all", "parse"]

Column: TypeAlias = np.ndarray | pa.Array | pa.ChunkedArray


class Expression:
    """A parsed, type-checked selection over tag fields and objects; build it with ``parse``.

    ``text`` is the text it was parsed from, ``fields`` the tag fields it reads,
    ``objects`` the collections it reads, each with the fields of its objects
    it reads (none for a collection it only counts). Expressions are
    immutable, hashable and picklable; two are equal when their canonical
    forms (``str(expression)``) are.
    """

    __slots__ = ("_kinds", "_tree", "fields", "objects", "text")

    text: str
    fields: frozenset[str]
    objects: Mapping[str, frozenset[str]]

    def __init__(self, text: str, tree: Node, kinds: Mapping[str, Kind]) -> None:
        self.text = text
        self.fields = fields_of(tree)
        self.objects = MappingProxyType(objects_of(tree))
        self._tree = tree
        self._kinds = dict(kinds)

    def evaluate(
        self,
        columns: Mapping[str, Column],
        *,
        size: int | None = None,
        objects: Mapping[str, Any] | None = None,
    ) -> np.ndarray:
        """The boolean mask of the events that match, one entry per event.

        ``columns`` maps each field in ``fields`` to its values (numpy or
        pyarrow; other columns are ignored); ``objects`` maps each collection
        in ``objects`` to the events' lists of objects (an awkward array of
        records with at least the fields read). Events where a tag field read
        is null never match. ``size`` gives the number of events when the
        expression reads nothing. Raises ``DataError`` for a missing, ragged
        or wrongly typed column.
        """
        return evaluate_tree(self._tree, self._kinds, columns, size, objects)

    def split(self) -> tuple[Expression, Expression]:
        """``(tags, objects)``: the top-level ``and`` terms of this selection that read tags only,
        and the others (each ``true`` when there are none). An event passes this selection when
        it passes both, so the tag part prunes databases and events before objects are read."""
        if not self.objects:
            return self, match_all()
        terms = self._tree.operands if isinstance(self._tree, Logical) and self._tree.op == "and" else (self._tree,)
        tags = [term for term in terms if not objects_of(term)]
        return self._conjunction(tags), self._conjunction([term for term in terms if objects_of(term)])

    def _conjunction(self, terms: list[Node]) -> Expression:
        if not terms:
            return match_all()
        tree = terms[0] if len(terms) == 1 else Logical(
            "bool", terms[0].start, terms[-1].end, 1 + max(t.depth for t in terms), "and", tuple(terms))
        return Expression(render(tree), tree, {name: self._kinds[name] for name in fields_of(tree)})

    def may_match(self, stats: Mapping[str, tuple[float | None, float | None]], numbers: bool = False) -> bool:
        """Whether any event of a database with these per-field (min, max) can match.

        False only when no event can match, so a database may be skipped; True
        means "maybe". A missing field or a None bound counts as unknown.
        ``numbers``: the events' fields are known to hold numbers (no nan, no
        null), as in a run of a sorted index before its nan.
        """
        return may_match_tree(self._tree, self._kinds, stats, numbers)

    def always_matches(self, stats: Mapping[str, tuple[float | None, float | None]]) -> bool:
        """Whether every event whose fields hold numbers (no nan, no null) within these per-field
        (min, max) matches.

        True only when none can fail, so such events may be counted without
        being read; False means "maybe not". A missing field or a None bound
        counts as unknown.
        """
        return always_matches_tree(self._tree, self._kinds, stats)

    def matches(self, stats: Mapping[str, tuple[float | None, float | None]]) -> tuple[bool, bool]:
        """``(may_match(stats, numbers=True), always_matches(stats))``, found together."""
        return matches_tree(self._tree, self._kinds, stats)

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


def parse(
    text: str, fields: Mapping[str, str], collections: Mapping[str, Mapping[str, str]] | None = None,
    counters: Mapping[str, str] | None = None,
) -> Expression:
    """Parse and type-check a selection over tag fields and the objects of collections.

    ``fields`` maps each tag field to its dtype (``"int32"``, ``"float32"``,
    ``"bool"``, … in numpy or Arrow spelling); ``collections`` maps each
    collection to the fields of its objects and their dtypes; ``counters``
    maps other names of a collection's ``n<Collection>`` to it. Raises
    ``ExpressionError`` with the position of the problem (and suggestions for
    a misspelt name) for bad syntax, unknown fields, collections or functions,
    type errors, a result that is not a condition, empty text, or text longer
    than ``MAX_LENGTH`` characters or nested deeper than ``MAX_DEPTH``.
    """
    tree, kinds = parse_tree(text, fields, collections, counters)
    return Expression(text, tree, kinds)


def match_all() -> Expression:
    """The expression that selects every event (``ds.select()`` without text)."""
    return Expression("true", Constant("bool", 0, 4, 1, True), {})
