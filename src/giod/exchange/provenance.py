"""Provenance across federations: the ``copied_from`` record of a copied database, parsed before it is trusted.

A source federation is not trusted (docs/security.md): its databases'
parameters, ``copied_from`` included, are checked here before a copy uses or
stores them. A step of the chain is a mapping of these keys and types (keys
it does not know, a later giod's perhaps, are dropped: only what was parsed
is stored); a chain holds at most :data:`MAX_HOPS` steps and the other
parameters nest at most :data:`MAX_DEPTH` levels, so nothing downstream
(``json``, ``giod show``) meets a structure it cannot walk.

What is already in a catalog is shown whatever it holds:
:func:`provenance_chain` never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from giod.errors import DataError

__all__ = ["MAX_DEPTH", "MAX_HOPS", "PROVENANCE", "check_parameters", "parse_provenance", "provenance_chain"]

PROVENANCE = "copied_from"  # the key of a copied database's parameters that says where it came from
MAX_HOPS = 32  # federations a chain may pass through (DAQ → reconstruction → analysis is 2)
MAX_DEPTH = 32  # levels of nesting of other parameters
MAX_TEXT = 4096  # characters of one string of a step (a federation's URL, a selection)
MAX_CONTAINERS = 256
_TEXT = ("federation", "dataset")
_COUNT = ("database", "version")


def _refuse(where: str, why: str) -> DataError:
    return DataError(f"provenance ({PROVENANCE}) of {where} refused: {why}")


def _text(value: object, key: str, where: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
        raise _refuse(where, f"{key!r} must be a string of 1 to {MAX_TEXT} characters, not {_shown(value)}")
    return value


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def parse_provenance(value: object, where: str) -> dict[str, Any] | None:
    """``value`` as a valid ``copied_from`` chain (None for none) of at most ``MAX_HOPS - 1`` steps, so that a
    copy can add its own; DataError naming ``where`` otherwise."""
    steps: list[dict[str, Any]] = []
    while value is not None:
        if len(steps) == MAX_HOPS - 1:
            raise _refuse(where, f"the chain passes through more than {MAX_HOPS - 1} federations")
        if not isinstance(value, Mapping):
            raise _refuse(where, f"a step must be a mapping, not {_shown(value)}")
        step: dict[str, Any] = {k: _text(value.get(k), k, where) for k in _TEXT}
        for k in _COUNT:
            n = value.get(k)
            if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < 1 << 63:
                raise _refuse(where, f"{k!r} must be a non-negative integer, not {_shown(n)}")
            step[k] = n
        step["selection"] = _text(value.get("selection"), "selection", where, optional=True)
        containers = value.get("containers")
        if containers is not None:
            if not isinstance(containers, list) or len(containers) > MAX_CONTAINERS:
                raise _refuse(where, f"'containers' must be a list of at most {MAX_CONTAINERS} names")
            containers = [_text(c, "containers", where) for c in containers]
        step["containers"] = containers
        steps.append(step)
        value = value.get("from")
    chain: dict[str, Any] | None = None
    for step in reversed(steps):  # built from the far end: no recursion, however deep the input was
        chain = {**step, "from": chain}
    return chain


def check_parameters(parameters: object, where: str) -> dict[str, Any]:
    """A copy of ``parameters`` (a mapping of JSON values nesting at most :data:`MAX_DEPTH` levels), with a
    parsed ``copied_from``; DataError naming ``where`` otherwise."""
    if not isinstance(parameters, Mapping):
        raise DataError(f"parameters of {where} refused: a mapping expected, not {_shown(parameters)}")
    out = {str(k): v for k, v in parameters.items() if k != PROVENANCE}
    pending: list[tuple[object, int]] = [(v, 1) for v in out.values()]
    while pending:  # by hand, not recursively: the input may nest deeper than Python's stack
        value, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise DataError(f"parameters of {where} refused: nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, Mapping):
            pending += [(v, depth + 1) for v in value.values()]
        elif isinstance(value, list):
            pending += [(v, depth + 1) for v in value]
    chain = parse_provenance(parameters.get(PROVENANCE), where)
    if chain is not None:
        out[PROVENANCE] = chain
    return out


def provenance_chain(parameters: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The federations a database was copied through, nearest first (empty for one written here).

    Whatever a catalog holds, each step has ``federation``, ``dataset``,
    ``database``, ``version`` (``"?"`` when missing or malformed) and
    ``selection`` (None unless a string); the chain stops at the first step
    that is not a mapping, and after :data:`MAX_HOPS` steps.
    """
    chain: list[dict[str, Any]] = []
    step = parameters.get(PROVENANCE) if isinstance(parameters, Mapping) else None
    while isinstance(step, Mapping) and len(chain) < MAX_HOPS:
        shown: dict[str, Any] = {}
        for k in (*_TEXT, *_COUNT):
            v = step.get(k)
            ok = isinstance(v, str) if k in _TEXT else isinstance(v, int) and not isinstance(v, bool)
            shown[k] = (v[:MAX_TEXT] if isinstance(v, str) else v) if ok else "?"
        selection = step.get("selection")
        shown["selection"] = selection[:MAX_TEXT] if isinstance(selection, str) else None
        chain.append(shown)
        step = step.get("from")
    return chain
