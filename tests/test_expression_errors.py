"""Selection texts that must be refused: messages, positions, and hostile input."""

from __future__ import annotations

import builtins
import re
from pathlib import Path

import numpy as np
import pytest

from giod.errors import ExpressionError, GiodError
from giod.expression import MAX_DEPTH, MAX_LENGTH, parse

FIELDS = {
    "njets": "int32",
    "nmuons": "int32",
    "ht": "float32",
    "met": "float64",
    "trigger": "bool",
    "run_tag": "string",
}

# text, the position (0-based) the error points at, a fragment of its message.
ERRORS = [
    ("", 0, "empty expression"),
    ("   \t\n", 0, "empty expression"),
    ("njet >= 2", 0, "unknown tag field 'njet'; did you mean 'njets'"),
    ("ht > 1 and nmuon > 0", 11, "did you mean 'nmuons'"),
    ("zzz > 1", 0, "Available fields: ht, met, njets, nmuons, run_tag, trigger"),
    ("njets >= 2 ht > 5", 11, "unexpected 'ht' after a complete expression"),
    ("njets >= >= 2", 9, "unexpected '>='; expected a value"),
    ("(njets >= 2", 0, "unbalanced parentheses: this '(' is never closed"),
    ("njets >= 2)", 10, "unbalanced parentheses: ')' has no matching '('"),
    ("(njets >= 2 and (ht > 5)", 0, "never closed"),
    ("ht + 1", 0, "must be true or false for each event, but 'ht + 1' is a number"),
    ("abs(ht)", 0, "is a number"),
    ("trigger == 1", 8, "cannot compare a condition (true/false) with a number"),
    ("1 + 2 < trigger", 6, "cannot compare a condition"),
    ("trigger < true", 8, "cannot order conditions"),
    ("trigger + 1 > 0", 0, "'+' needs a number, but 'trigger' is a condition"),
    ("-trigger", 1, "unary '-' needs a number"),
    ("ht and trigger", 0, "'and' needs conditions, but 'ht' is a number"),
    ("not njets", 4, "'not' needs conditions"),
    ("njets in (trigger, 2)", 10, "'in' needs a number"),
    ("njets in 1", 9, "expected '(' after 'in'"),
    ("njets in ()", 9, "empty list after 'in'"),
    ("njets in (1, 2", 9, "never closed"),
    ("ht between 1 or 2", 13, "expected 'and' in 'between … and …'"),
    ("ht == not trigger", 6, "put the negated condition in parentheses"),
    ("njets not 2", 6, "unexpected 'not' after a complete expression"),
    ("log(ht) > 1", 0, "unknown function 'log'; selections may call abs, all, any, count, max, min, sqrt, sum"),
    ("sqrt(ht, met) > 1", 0, "sqrt() takes 1 argument, got 2"),
    ("min(ht) > 1", 0, "min() takes at least 2 arguments, got 1"),
    ("max() > 1", 0, "max() takes at least 2 arguments, got 0"),
    ("ht = 3", 3, "unexpected character '=' (use '==' to compare)"),
    ("ht > 1 & trigger", 7, "use 'and'"),
    ("ht > 'a'", 5, "no strings"),
    ("ht > 1.2.3", 5, "malformed number '1.2.'"),
    ("njets > 2x", 8, "malformed number '2x'"),
    ("ht > 1e", 5, "malformed number '1e'"),
    ("njets > 99999999999999999999", 8, "is too large"),
    ("ht > 1e999", 5, "number 1e999 is too large"),
    ("run_tag > 1", 0, "tag field 'run_tag' has type string, which selections cannot use"),
    ("ht > 1 and", 10, "unexpected end of expression"),
    ("njets ≥ 2", 6, "unexpected character '≥'"),
]


@pytest.mark.parametrize(("text", "position", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_error_message_and_position(text, position, message):
    with pytest.raises(ExpressionError) as caught:
        parse(text, FIELDS)
    error = caught.value
    assert message in error.message
    assert error.position == position
    assert error.expression == text
    assert isinstance(error, GiodError)
    assert f"at column {position + 1} of " in str(error)


def test_unknown_field_lists_close_matches_and_case_variants():
    fields = {"lead_jet_pt": "float32", "Lead_Jet_Eta": "float32", "njets": "int8"}
    with pytest.raises(ExpressionError) as caught:
        parse("lead_jet_eta > 1", fields)
    assert "'Lead_Jet_Eta'" in caught.value.message.split("Available")[0]
    with pytest.raises(ExpressionError, match="this dataset has no tag fields"):
        parse("njets > 1", {})


def test_unknown_field_listing_is_bounded():
    fields = {f"tag_{i:03d}": "int32" for i in range(200)}
    with pytest.raises(ExpressionError) as caught:
        parse("qqq > 1", fields)
    assert "(170 more)" in caught.value.message
    assert len(caught.value.message) < 600


def test_text_that_is_too_long_or_not_text():
    too_long = "njets > 1 or " * (MAX_LENGTH // 13) + "njets > 2"
    assert len(too_long) > MAX_LENGTH
    with pytest.raises(ExpressionError, match=f"too long .* limit is {MAX_LENGTH}") as caught:
        parse(too_long, FIELDS)
    assert caught.value.expression == too_long
    assert len(str(caught.value)) < 200  # the text is kept, not printed
    with pytest.raises(ExpressionError, match="must be text, not bytes"):
        parse(b"njets > 1", FIELDS)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "(" * (MAX_DEPTH + 1) + "njets > 1" + ")" * (MAX_DEPTH + 1),
        "-" * (MAX_DEPTH + 1) + "njets > 1",
        "not " * (MAX_DEPTH + 1) + "trigger",
        "njets" + " + 1" * (MAX_DEPTH + 1) + " > 0",
        "ht" + " ** ht" * (MAX_DEPTH + 1) + " > 0",
        "abs(" * (MAX_DEPTH + 1) + "ht" + ")" * (MAX_DEPTH + 1) + " > 0",
    ],
    ids=["parentheses", "minus", "not", "sum", "power", "calls"],
)
def test_nesting_deeper_than_the_limit_is_refused(text):
    with pytest.raises(ExpressionError, match=f"nested too deeply \\(more than {MAX_DEPTH} levels"):
        parse(text, FIELDS)


def test_nesting_up_to_the_limit_is_accepted():
    depth = MAX_DEPTH - 5
    expression = parse("(" * depth + "njets > 1" + ")" * depth, FIELDS)
    assert expression.evaluate({"njets": np.array([1, 2])}).tolist() == [False, True]
    # Long flat chains of "and"/"or"/"in" are not deep: they stay one level.
    chain = " or ".join(f"njets == {i}" for i in range(500))
    assert parse(chain, FIELDS).evaluate({"njets": np.array([499, 500])}).tolist() == [True, False]
    listed = "njets in (" + ", ".join(str(i) for i in range(1000)) + ")"
    assert parse(listed, FIELDS).may_match({"njets": (1000, 2000)}) is False


HOSTILE = [
    "__import__('os').system('ls')",
    '__import__("os")',
    "().__class__.__bases__[0].__subclasses__()",
    "njets.__class__",
    "eval('1')",
    "exec('import os')",
    "getattr(njets, 'real') > 0",
    "open('/etc/passwd')",
    "lambda: 1",
    "[x for x in njets]",
    "njets > 1; import os",
    "njets if trigger else ht",
    "{'a': 1}",
    "njets > 1 # comment",
    "njets\x00 > 1",
    "`njets`",
    "$njets > 1",
    "njets > 0x10",
    "ｎjets > 1",  # full-width letter
    "njets > ١",  # Arabic-Indic digit one
    "f'{njets}'",
    "njets @ ht",
    "njets > ~1",
    "njets > 1 ? 1 : 0",
]


@pytest.mark.timeout(10)
@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_input_is_refused(text, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the expression reached eval/exec/compile")

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, forbidden)
    with pytest.raises(ExpressionError):
        parse(text, FIELDS)


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "text",
    [
        "(" * 5000,
        "(" * 9000 + "njets" + ")" * 900,
        "-" * 9990 + "1",
        "not " * 2400 + "trigger",
        "!" * 9990 + "trigger",
        "njets" + " + 1" * 2400 + " > 0",
        "2" + " ** 2" * 1900 + " > 0",
        "abs(" * 2400,
        "njets in (" + "1, " * 3300,
    ],
    ids=["open", "unbalanced", "minus", "not", "bang", "sum", "power", "calls", "list"],
)
def test_huge_or_deep_input_is_refused_quickly(text):
    assert len(text) <= MAX_LENGTH
    with pytest.raises(ExpressionError):
        parse(text, FIELDS)


def test_sources_never_evaluate_user_text():
    package = Path(__file__).resolve().parents[1] / "src" / "giod" / "expression"
    sources = {path.name: path.read_text() for path in package.glob("*.py")}
    assert {"lexer.py", "parser.py", "evaluate.py"} <= set(sources)
    for name, source in sources.items():
        assert not re.search(r"(?<![.\w])(eval|exec|compile|__import__)\s*\(", source), name
        assert not re.search(r"^\s*(import ast|from ast )", source, re.MULTILINE), name
