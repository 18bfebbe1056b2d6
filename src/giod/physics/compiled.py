"""The compiler of the reconstruction's hot loops: numba, an optional dependency.

Track finding and calorimeter clustering walk over hits and cells with
data-dependent control flow (road search, flood fill), which numpy cannot
express without a Python loop per object; they are compiled with numba.
Compiled code is cached on disk beside the modules, so only the first run
on a machine pays the compilation (a few seconds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from giod.errors import MissingDependency

try:
    import numba
except ImportError as exc:  # pragma: no cover - numba is part of the physics extra
    raise MissingDependency(
        "reconstruction needs numba: pip install 'giod[physics]'"
    ) from exc

__all__ = ["njit"]

F = TypeVar("F", bound=Callable[..., Any])


def njit(function: F) -> F:
    """``numba.njit`` with an on-disk cache; the GIL is released while compiled code runs."""
    return numba.njit(cache=True, nogil=True)(function)  # type: ignore[return-value]
