"""What each of a set of read paths made of untrusted input: how the fuzzers' tests say "data or a GiodError"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from giod.errors import GiodError


def outcomes(steps: dict[str, Callable[[], Any]]) -> dict[str, str]:
    """Each step's outcome by name: "ok", "refused" (a GiodError), or the other exception it raised."""
    out: dict[str, str] = {}
    for name, step in steps.items():
        try:
            step()
            out[name] = "ok"
        except GiodError:
            out[name] = "refused"
        except Exception as exc:
            out[name] = f"{type(exc).__name__}: {exc}"
    return out


def failures(outcome: dict[str, str]) -> dict[str, str]:
    """The paths of an outcome that gave neither data nor a GiodError."""
    return {k: v for k, v in outcome.items() if v not in ("ok", "refused")}
