"""Calls of a function counted while a test runs: how tests show that a step ran once, or not at all."""

from __future__ import annotations

from typing import Any

import pytest


def counted(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Count the calls of ``owner.name`` (a module's function, or a class's function or class method) until
    the test ends: the one item of the list returned."""
    calls = [0]
    real = getattr(owner, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, staticmethod(counting) if isinstance(owner, type) else counting)
    return calls
