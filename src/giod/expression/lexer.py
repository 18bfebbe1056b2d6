"""Split selection text into tokens.

Only ASCII letters, digits, ``_``, the operators of the language, parentheses,
brackets, commas and white space are accepted; a ``.`` joins a collection to a
field of its objects (``Jet.pt`` is one name token). Anything else (quotes,
other dots, ``@``, non-ASCII characters) is an error at its position.
Keywords are case-insensitive and come out in lower case; ``&&``, ``||`` and
``!`` come out as ``and``, ``or`` and ``not``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from giod.errors import ExpressionError

MAX_LENGTH = 10_000
INT64_MAX = 2**63 - 1

TokenKind = Literal["number", "name", "op", "end"]

KEYWORDS = frozenset({"and", "or", "not", "in", "between", "true", "false"})
_ALIASES = {"&&": "and", "||": "or", "!": "not"}

_NUMBER = re.compile(r"(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?")
# Longest first, so that "**" wins over "*" and "<=" over "<".
_OPERATOR = re.compile(r"\*\*|==|!=|<=|>=|&&|\|\||[-+*/%<>!(),\[\]]")
_SPACE = re.compile(r"[ \t\r\n]+")
_AFTER_NUMBER = re.compile(r"[A-Za-z0-9_.]")
_HINTS = {
    "=": "use '==' to compare",
    "&": "use 'and' (or '&&')",
    "|": "use 'or' (or '||')",
    "'": "there are no strings in selections",
    '"': "there are no strings in selections",
    ".": "a '.' joins a collection and a field of its objects, e.g. 'Jet.pt'",
}


@dataclass(frozen=True, slots=True)
class Token:
    """One token: its kind, its normalised text, its span and, for numbers, its value."""

    kind: TokenKind
    text: str
    start: int
    end: int
    value: int | float | None = None


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with one ``end`` token; raises ``ExpressionError``."""
    if len(text) > MAX_LENGTH:
        raise ExpressionError(
            f"expression is too long ({len(text)} characters; the limit is {MAX_LENGTH})",
            expression=text,
            position=None,  # a position would print all of the text in the message
        )
    tokens: list[Token] = []
    position = 0
    while True:
        space = _SPACE.match(text, position)
        if space:
            position = space.end()
        if position >= len(text):
            tokens.append(Token("end", "", len(text), len(text)))
            return tokens
        if number := _NUMBER.match(text, position):
            tokens.append(_number_token(text, number))
        elif name := _NAME.match(text, position):
            word = name.group()
            if word.lower() in KEYWORDS:
                tokens.append(Token("op", word.lower(), name.start(), name.end()))
            else:
                tokens.append(Token("name", word, name.start(), name.end()))
        elif operator := _OPERATOR.match(text, position):
            symbol = operator.group()
            normal = _ALIASES.get(symbol, symbol)
            tokens.append(Token("op", normal, operator.start(), operator.end()))
        else:
            character = text[position]
            hint = _HINTS.get(character)
            message = f"unexpected character {character!r}"
            raise ExpressionError(
                f"{message} ({hint})" if hint else message, expression=text, position=position
            )
        position = tokens[-1].end


def _number_token(text: str, match: re.Match[str]) -> Token:
    start, end = match.span()
    literal = match.group()
    if _AFTER_NUMBER.match(text, end):
        raise ExpressionError(
            f"malformed number {text[start : end + 1]!r}", expression=text, position=start
        )
    value: int | float
    if literal.isdigit():
        # Check the length before int(): Python refuses to convert very long digit strings.
        digits = literal.lstrip("0")
        if len(digits) > 19 or int(digits or "0") > INT64_MAX:
            raise ExpressionError(
                f"integer {literal[:25]} is too large (the limit is {INT64_MAX})",
                expression=text,
                position=start,
            )
        value = int(literal)
    else:
        value = float(literal)
        if not math.isfinite(value):
            raise ExpressionError(
                f"number {literal[:25]} is too large", expression=text, position=start
            )
    return Token("number", literal, start, end, value)
