"""The examples of the selection-language reference run as written."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

import giod.expression

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "selection.md"


def test_reference_examples_run():
    if not REFERENCE.exists():
        pytest.fail(f"the language reference {REFERENCE.name} is missing")
    result = doctest.testfile(
        str(REFERENCE), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False
    )
    assert result.attempted >= 10
    assert result.failed == 0


def test_reference_states_the_limits_the_code_enforces():
    text = REFERENCE.read_text()
    assert f"{giod.expression.MAX_LENGTH:,}".replace(",", " ") in text
    assert f"{giod.expression.MAX_DEPTH} levels" in text
    for function in ("abs(x)", "sqrt(x)", "min(a, b, …)", "max(a, b, …)"):
        assert f"`{function}`" in text
