"""A precedence-climbing (Pratt) parser that builds and type-checks the syntax tree.

Binding powers, loosest first: ``or`` < ``and`` < ``not`` < comparisons,
``in``, ``between`` < ``+ -`` < ``* / %`` < unary ``-`` < ``**`` (right
associative, as in Python) < the index ``x[0]``. Work is bounded: the text by
``MAX_LENGTH`` and both the parser's recursion and the tree's depth by
``MAX_DEPTH``.

Names are tag fields first: a stored tag ``njets`` wins over the counter of a
collection ``jets``. Then ``n<Collection>`` (or another name the schema gives
that counter, such as a file's ``NJet``) counts a collection's objects and
``Collection.field`` reads a field of its objects; such a per-object value
may meet per-event values and values of the same collection, never those of
another collection, and must be reduced (``count``, ``any``, ``all``, ``sum``,
``min``, ``max``) or indexed before it selects events.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any, NoReturn

from giod.errors import ExpressionError
from giod.expression.fold import fold
from giod.expression.lexer import Token, tokenize
from giod.expression.nodes import (
    COMPARISONS,
    FUNCTIONS,
    REDUCTIONS,
    Arithmetic,
    Between,
    Call,
    Compare,
    Constant,
    Counter,
    Field,
    Index,
    Kind,
    Logical,
    Member,
    Negate,
    Node,
    Not,
    ObjectField,
    Reduce,
    children,
)

MAX_DEPTH = 100

_OR, _AND, _NOT, _COMPARE, _SUM, _PRODUCT, _NEGATE, _POWER = 10, 20, 30, 40, 50, 60, 70, 80
_INFIX_POWER = {
    "or": _OR,
    "and": _AND,
    **dict.fromkeys(COMPARISONS, _COMPARE),
    "in": _COMPARE,
    "between": _COMPARE,
    "+": _SUM,
    "-": _SUM,
    "*": _PRODUCT,
    "/": _PRODUCT,
    "%": _PRODUCT,
    "**": _POWER,
}
_BOOL_TYPES = frozenset({"bool", "boolean", "bool_"})
_INT_TYPES = frozenset(f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64))
_FLOAT_TYPES = frozenset({"float16", "float32", "float64", "half", "halffloat", "float", "double"})
_SHOWN_FIELDS = 30


def field_kind(dtype: Any) -> Kind | None:
    """The value kind of a tag field's dtype (numpy or Arrow spelling), or None if unusable."""
    name = str(dtype).strip().lower()
    if name in _BOOL_TYPES:
        return "bool"
    if name in _INT_TYPES:
        return "int"
    if name in _FLOAT_TYPES:
        return "float"
    return None


def parse_tree(
    text: str, fields: Mapping[str, Any], collections: Mapping[str, Mapping[str, Any]] | None = None,
    counters: Mapping[str, str] | None = None,
) -> tuple[Node, dict[str, Kind]]:
    """Parse and type-check ``text``; return its tree and the kinds of the tag fields it reads.

    ``collections`` maps each collection to its objects' fields and their dtypes;
    ``counters`` maps other names of ``n<Collection>`` (a file's ``NJet``) to the collection.
    """
    if not isinstance(text, str):
        raise ExpressionError(f"a selection must be text, not {type(text).__name__}")
    tokens = tokenize(text)
    if tokens[0].kind == "end":
        raise ExpressionError("empty expression", expression=text, position=0)
    parser = _Parser(text, tokens, fields, collections or {}, counters or {})
    node = parser.expression(0)
    leftover = parser.peek()
    if leftover.text == ")":
        parser.fail("unbalanced parentheses: ')' has no matching '('", leftover.start)
    if leftover.kind != "end":
        parser.fail(
            f"unexpected {_describe(leftover)} after a complete expression (missing an operator?)",
            leftover.start,
        )
    if node.kind != "bool":
        shown = parser.quote(node)
        parser.fail(
            f"a selection must be true or false for each event, but {shown!r} is a number;"
            f" compare it with something, e.g. '{shown} > 0'",
            node.start,
        )
    if (collection := parser.scope(node)) is not None:
        parser.fail(
            f"{parser.quote(node)!r} is a condition on each {collection} object, not on the event;"
            f" say how many objects must pass, e.g. 'any(...)', 'all(...)' or 'count(...) >= 2'",
            node.start,
        )
    return fold(node, text), parser.kinds


def _describe(token: Token) -> str:
    if token.kind == "end":
        return "end of expression"
    return f"{token.text!r}"


class _Parser:
    def __init__(
        self, text: str, tokens: list[Token], fields: Mapping[str, Any], collections: Mapping[str, Mapping[str, Any]],
        counters: Mapping[str, str],
    ) -> None:
        self.text = text
        self.tokens = tokens
        self.fields = fields
        self.collections = collections
        self.counters = {n: c for n, c in counters.items() if c in collections and n not in fields}
        self.index = 0
        self.nesting = 0
        self.kinds: dict[str, Kind] = {}
        # id(node) -> (node, the collection it ranges over); the node is kept so that its id is not reused
        self.scopes: dict[int, tuple[Node, str | None]] = {}

    def scope(self, node: Node) -> str | None:
        """The collection over whose objects ``node`` has one value each; None: one value per event."""
        key = id(node)
        if key not in self.scopes:
            if isinstance(node, ObjectField):
                found: str | None = node.collection
            elif isinstance(node, Reduce | Index):
                found = None
            else:
                found = next((s for c in children(node) if (s := self.scope(c)) is not None), None)
            self.scopes[key] = (node, found)
        return self.scopes[key][1]

    # -- tokens and errors -------------------------------------------------

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        self.index = min(self.index + 1, len(self.tokens) - 1)
        return token

    def fail(self, message: str, position: int) -> NoReturn:
        raise ExpressionError(message, expression=self.text, position=position)

    def quote(self, node: Node) -> str:
        shown = self.text[node.start : node.end]
        return shown if len(shown) <= 40 else shown[:37] + "..."

    def expect_close(self, opening: Token) -> Token:
        token = self.peek()
        if token.text == ")":
            return self.advance()
        if token.kind == "end":
            self.fail("unbalanced parentheses: this '(' is never closed", opening.start)
        self.fail(f"unexpected {_describe(token)}; expected ')' or an operator", token.start)

    def make(self, cls: type[Node], kind: Kind, start: int, end: int, *parts: Any) -> Node:
        """Build a node, refusing trees deeper than ``MAX_DEPTH``."""
        depth = 1 + max((_depth_of(part) for part in parts), default=0)
        if depth > MAX_DEPTH:
            self.fail(f"expression is nested too deeply (more than {MAX_DEPTH} levels)", start)
        nodes = [n for part in parts for n in (part if isinstance(part, tuple) else (part,)) if isinstance(n, Node)]
        seen: dict[str, Node] = {}
        for n in nodes:
            if (collection := self.scope(n)) is not None:
                seen.setdefault(collection, n)
        if len(seen) > 1:
            (a, first), (b, second) = list(seen.items())[:2]
            self.fail(
                f"cannot combine the objects of {a} ({self.quote(first)!r}) with those of {b}"
                f" ({self.quote(second)!r}) object by object; reduce each on its own,"
                f" e.g. 'any({a}...) and any({b}...)'",
                second.start,
            )
        return cls(kind, start, end, depth, *parts)

    # -- the Pratt loop ------------------------------------------------------

    def expression(self, min_power: int) -> Node:
        self.nesting += 1
        try:
            if self.nesting > MAX_DEPTH:
                self.fail(
                    f"expression is nested too deeply (more than {MAX_DEPTH} levels)",
                    self.peek().start,
                )
            left = self.prefix(min_power)
            while True:
                token = self.peek()
                power = self.infix_power(token)
                if power <= min_power:
                    return left
                left = self.infix(left, power)
        finally:
            self.nesting -= 1

    def infix_power(self, token: Token) -> int:
        if token.kind != "op":
            return 0
        if token.text == "not":  # only as "not in" / "not between"
            return _COMPARE if self.peek(1).text in ("in", "between") else 0
        return _INFIX_POWER.get(token.text, 0)

    def prefix(self, min_power: int) -> Node:
        token = self.advance()
        if token.kind == "number":
            assert token.value is not None
            kind: Kind = "int" if isinstance(token.value, int) else "float"
            return Constant(kind, token.start, token.end, 1, token.value)
        if token.kind == "name":
            if self.peek().text == "(":
                return self.indexed(self.call(token))
            return self.indexed(self.field(token))
        match token.text:
            case "true" | "false":
                return Constant("bool", token.start, token.end, 1, token.text == "true")
            case "(":
                inner = self.expression(0)
                closing = self.expect_close(token)
                # The span takes the parentheses in, so that quoted text stays balanced.
                return self.indexed(dataclasses.replace(inner, start=token.start, end=closing.end))
            case "-":
                operand = self.expression(_NEGATE)
                self.need_number(operand, "unary '-'")
                return self.make(Negate, operand.kind, token.start, operand.end, operand)
            case "not":
                if min_power > _NOT:
                    self.fail(
                        "unexpected 'not' here; put the negated condition in parentheses",
                        token.start,
                    )
                operand = self.expression(_NOT)
                self.need_condition(operand, "'not'")
                return self.make(Not, "bool", token.start, operand.end, operand)
        if token.kind == "end":
            self.fail("unexpected end of expression; expected a value", token.start)
        if token.text == ")":
            self.fail("unexpected ')'; expected a value", token.start)
        self.fail(f"unexpected {_describe(token)}; expected a value", token.start)

    def indexed(self, node: Node) -> Node:
        """``node`` followed by ``[k]``: the value of each event's k-th object."""
        while self.peek().text == "[":
            opening = self.advance()
            sign = -1 if self.peek().text == "-" else 1
            if sign < 0:
                self.advance()
            number = self.advance()
            if number.kind != "number" or not isinstance(number.value, int):
                self.fail("expected a whole number inside '[ ]', e.g. 'Jet.pt[0]'", number.start)
            closing = self.advance()
            if closing.text != "]":
                self.fail("expected ']' after the index, e.g. 'Jet.pt[0]'", closing.start)
            if self.scope(node) is None:
                self.fail(
                    f"'[{sign * number.value}]' picks one object of a collection, but {self.quote(node)!r}"
                    " has one value per event",
                    opening.start,
                )
            node = self.make(Index, node.kind, node.start, closing.end, node, sign * number.value)
        return node

    def infix(self, left: Node, power: int) -> Node:
        token = self.advance()
        op = token.text
        if op in ("and", "or"):
            right = self.expression(power)
            self.need_condition(left, f"'{op}'")
            self.need_condition(right, f"'{op}'")
            operands: list[Node] = []
            for side in (left, right):
                flat = isinstance(side, Logical) and side.op == op
                operands.extend(side.operands if flat else (side,))  # type: ignore[attr-defined]
            return self.make(Logical, "bool", left.start, right.end, op, tuple(operands))
        if op in COMPARISONS:
            return self.comparison(left, token)
        if op == "not":
            op = self.advance().text  # "in" or "between", checked by infix_power
            negated = True
        else:
            negated = False
        if op == "in":
            return self.membership(left, negated)
        if op == "between":
            return self.between(left, negated)
        # Arithmetic; "**" is right associative.
        right = self.expression(power - 1 if op == "**" else power)
        self.need_number(left, f"'{op}'")
        self.need_number(right, f"'{op}'")
        if op in ("/", "%", "**") or "float" in (left.kind, right.kind):
            kind: Kind = "float"
        else:
            kind = "int"
        return self.make(Arithmetic, kind, left.start, right.end, op, left, right)

    # -- the pieces ----------------------------------------------------------

    def field(self, token: Token) -> Node:
        name = token.text
        if "." in name:
            return self.object_field(token)
        if name not in self.fields:
            if name in self.counters:
                return Counter("int", token.start, token.end, 1, self.counters[name], name)
            if name.startswith("n") and name[1:] in self.collections:
                return Counter("int", token.start, token.end, 1, name[1:], name)
            if name in self.collections:
                example = next(iter(self.collections[name]), "pt")
                self.fail(
                    f"{name!r} is a collection: read a field of its objects, e.g. '{name}.{example}',"
                    f" or count them with 'n{name}'",
                    token.start,
                )
            self.fail(self.unknown_field_message(name), token.start)
        kind = field_kind(self.fields[name])
        if kind is None:
            self.fail(
                f"tag field {name!r} has type {self.fields[name]!s}, which selections cannot use"
                " (only numbers and booleans)",
                token.start,
            )
        self.kinds[name] = kind
        return Field(kind, token.start, token.end, 1, name)

    def object_field(self, token: Token) -> Node:
        collection, _, member = token.text.partition(".")
        if collection not in self.collections:
            self.fail(_unknown("collection", collection, self.collections, self.collections), token.start)
        members = self.collections[collection]
        if member not in members:
            self.fail(_unknown(f"{collection} field", member, members, members), token.start + len(collection) + 1)
        kind = field_kind(members[member])
        if kind is None:
            self.fail(
                f"field {token.text!r} has type {members[member]!s}, which selections cannot use"
                " (only numbers and booleans)",
                token.start,
            )
        return ObjectField(kind, token.start, token.end, 1, collection, member)

    def unknown_field_message(self, name: str) -> str:
        if self.collections:
            counters = [f"n{c}" for c in self.collections if f"n{c}" not in self.fields]
            names = [*self.fields, *self.counters, *counters]
            return _unknown("name", name, names, [*names, *self.collections])
        available = sorted(self.fields)
        if not available:
            return f"unknown tag field {name!r}; this dataset has no tag fields"
        close = difflib.get_close_matches(name, available, n=3, cutoff=0.6)
        close += [f for f in available if f.lower() == name.lower() and f not in close]
        message = f"unknown tag field {name!r}"
        if close:
            message += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
        else:
            message += "."
        shown = ", ".join(available[:_SHOWN_FIELDS])
        if len(available) > _SHOWN_FIELDS:
            shown += f", … ({len(available) - _SHOWN_FIELDS} more)"
        return f"{message} Available fields: {shown}"

    def call(self, name: Token) -> Node:
        if name.text not in FUNCTIONS:
            known = ", ".join(sorted(FUNCTIONS))
            self.fail(f"unknown function {name.text!r}; selections may call {known}", name.start)
        opening = self.advance()
        args: list[Node] = []
        if self.peek().text != ")":
            args.append(self.expression(0))
            while self.peek().text == ",":
                self.advance()
                args.append(self.expression(0))
        closing = self.expect_close(opening)
        if name.text in REDUCTIONS and len(args) == 1 and (
            name.text not in ("min", "max") or self.scope(args[0]) is not None
        ):
            return self.reduction(name, args[0], closing)
        least, most = FUNCTIONS[name.text]
        if len(args) < least or (most is not None and len(args) > most):
            wanted = f"{least}" if least == most else f"at least {least}"
            hint = f" (or one value over objects, e.g. '{name.text}(Jet.pt)')" if name.text in ("min", "max") else ""
            self.fail(
                f"{name.text}() takes {wanted} argument{'s' if wanted != '1' else ''},"
                f" got {len(args)}{hint}",
                name.start,
            )
        for arg in args:
            self.need_number(arg, f"{name.text}()")
        if name.text == "sqrt" or any(arg.kind == "float" for arg in args):
            kind: Kind = "float"
        else:
            kind = "int"
        return self.make(Call, kind, name.start, closing.end, name.text, tuple(args))

    def reduction(self, name: Token, arg: Node, closing: Token) -> Node:
        function = name.text
        if self.scope(arg) is None:
            self.fail(
                f"{function}() goes over the objects of a collection, but {self.quote(arg)!r} has one"
                f" value per event; e.g. '{function}(Jet.pt > 30)'"
                if function in ("count", "any", "all")
                else f"{function}() goes over the objects of a collection, but {self.quote(arg)!r} has one"
                f" value per event; e.g. '{function}(Jet.pt)'",
                arg.start,
            )
        if function in ("count", "any", "all"):
            self.need_condition(arg, f"{function}()")
        else:
            self.need_number(arg, f"{function}()")
        kind: Kind = {"count": "int", "any": "bool", "all": "bool"}.get(function, arg.kind)  # type: ignore[assignment]
        return self.make(Reduce, kind, name.start, closing.end, function, arg)

    def comparison(self, left: Node, first: Token) -> Node:
        operands = [left]
        ops: list[str] = []
        token = first
        while True:
            right = self.expression(_COMPARE)
            self.check_comparable(operands[-1], right, token)
            operands.append(right)
            ops.append(token.text)
            if self.peek().text not in COMPARISONS:
                break
            token = self.advance()
        return self.make(Compare, "bool", left.start, operands[-1].end, tuple(operands), tuple(ops))

    def membership(self, left: Node, negated: bool) -> Node:
        keyword = "'not in'" if negated else "'in'"
        opening = self.advance()
        if opening.text != "(":
            self.fail(f"expected '(' after {keyword}, e.g. 'x in (1, 2)'", opening.start)
        items: list[Node] = []
        while self.peek().text != ")":
            if self.peek().kind == "end":
                self.fail("unbalanced parentheses: this '(' is never closed", opening.start)
            items.append(self.expression(0))
            if self.peek().text == ",":
                self.advance()
            elif self.peek().text != ")":
                self.expect_close(opening)
        closing = self.advance()
        if not items:
            self.fail(f"empty list after {keyword}", opening.start)
        self.need_number(left, keyword)
        for item in items:
            self.need_number(item, keyword)
        return self.make(Member, "bool", left.start, closing.end, left, tuple(items), negated)

    def between(self, left: Node, negated: bool) -> Node:
        low = self.expression(_COMPARE)
        separator = self.advance()
        if separator.text != "and":
            self.fail(
                "expected 'and' in 'between … and …', e.g. 'x between 1 and 5'", separator.start
            )
        high = self.expression(_COMPARE)
        for node in (left, low, high):
            self.need_number(node, "'between'")
        return self.make(Between, "bool", left.start, high.end, left, low, high, negated)

    # -- type checks ---------------------------------------------------------

    def need_number(self, node: Node, where: str) -> None:
        if node.kind == "bool":
            self.fail(
                f"{where} needs a number, but {self.quote(node)!r} is a condition (true/false)",
                node.start,
            )

    def need_condition(self, node: Node, where: str) -> None:
        if node.kind != "bool":
            shown = self.quote(node)
            self.fail(
                f"{where} needs conditions, but {shown!r} is a number;"
                f" compare it with something, e.g. '{shown} > 0'",
                node.start,
            )

    def check_comparable(self, left: Node, right: Node, op: Token) -> None:
        left_bool, right_bool = left.kind == "bool", right.kind == "bool"
        if left_bool != right_bool:
            self.fail(
                f"cannot compare a condition (true/false) with a number:"
                f" {self.quote(left)!r} {op.text} {self.quote(right)!r}",
                op.start,
            )
        if left_bool and op.text not in ("==", "!="):
            self.fail(
                f"{op.text!r} cannot order conditions (true/false); use '==' or '!='", op.start
            )


def _unknown(what: str, name: str, known: Any, suggested: Any) -> str:
    """``unknown <what> <name>; did you mean …? Available: …``."""
    available = sorted(known)
    close = difflib.get_close_matches(name, sorted(suggested), n=3, cutoff=0.6)
    close += [k for k in sorted(suggested) if k.lower() == name.lower() and k not in close]
    message = f"unknown {what} {name!r}"
    message += ("; did you mean " + " or ".join(repr(c) for c in close) + "?") if close else "."
    shown = ", ".join(available[:_SHOWN_FIELDS])
    if len(available) > _SHOWN_FIELDS:
        shown += f", … ({len(available) - _SHOWN_FIELDS} more)"
    return f"{message} Available: {shown}" if available else message


def _depth_of(part: Any) -> int:
    if isinstance(part, Node):
        return part.depth
    if isinstance(part, tuple):
        return max((_depth_of(item) for item in part), default=0)
    return 0
