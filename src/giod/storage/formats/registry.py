"""The registry of container formats: a name in the catalog to the format that writes and reads it.

The built-in formats are imported only when first used. Others come from a
call to :func:`register_format` or from the entry-point group
``giod.formats`` of an installed distribution (``name = "module:FORMAT"``),
which every process of a federation — a server, a Dask worker — finds by
itself when it meets a container of that format. A name or suffix that is
taken is refused: the catalog names a container's format once, and files
written in a format must stay readable as that format for good.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from giod.errors import ConfigError
from giod.names import check_name, is_name
from giod.storage.formats.base import ContainerFormat

__all__ = ["ENTRY_POINT_GROUP", "FORMATS", "SUFFIX", "find_format", "format_names", "format_of_path",
           "register_format"]

#: the entry-point group through which other distributions add container formats
ENTRY_POINT_GROUP = "giod.formats"


def _arrow() -> ContainerFormat:
    from giod.storage.formats.arrow import ARROW

    return ARROW


def _parquet() -> ContainerFormat:
    from giod.storage.formats.parquet import PARQUET

    return PARQUET


#: the formats of giod itself, in the order they are listed (the default first), loaded on first use
_BUILT_IN: dict[str, tuple[str, Callable[[], ContainerFormat]]] = {
    "arrow": (".arrow", _arrow), "parquet": (".parquet", _parquet)}
_LOADED: dict[str, ContainerFormat] = {}
_LOCK = threading.Lock()


def register_format(fmt: ContainerFormat) -> ContainerFormat:
    """Register ``fmt`` under its name, so that writers write it and readers read it; returns it.

    ConfigError if its name or suffix does not follow the name grammar or is another format's.
    """
    if not isinstance(fmt, ContainerFormat):
        raise ConfigError(f"{fmt!r} is no ContainerFormat")
    name = check_name(getattr(fmt, "name", None), "container format")
    suffix = getattr(fmt, "suffix", None)
    if not isinstance(suffix, str) or not suffix.startswith(".") or not is_name(suffix[1:]):
        raise ConfigError(f"container format {name}: its suffix must be '.' and a name, not {suffix!r}")
    with _LOCK:
        for builtin, (builtin_suffix, _load) in _BUILT_IN.items():
            if name == builtin or suffix == builtin_suffix:
                raise ConfigError(f"container format {name} ({suffix}) would replace giod's {builtin}")
        for known in _LOADED.values():
            if known is not fmt and (known.name == name or known.suffix == suffix):
                raise ConfigError(f"container format {name} ({suffix}) would replace {known.name} "
                                  f"({known.suffix}), registered already")
        _LOADED[name] = fmt
    return fmt


def _entry_points(name: str | None = None) -> Any:
    """The group's entry points (of ``name`` only, if given)."""
    from importlib.metadata import entry_points  # only for a name that is not giod's: 10 ms to import

    found = entry_points(group=ENTRY_POINT_GROUP)
    return found if name is None else found.select(name=name)


def _from_entry_point(name: str) -> ContainerFormat | None:
    for ep in _entry_points(name=name):
        try:
            found = ep.load()
        except Exception as exc:  # any error of another distribution's module: say which one failed
            raise ConfigError(f"container format {name}: entry point {ep.value} cannot be loaded: {exc}") from exc
        fmt = found() if isinstance(found, type) and issubclass(found, ContainerFormat) else found
        if getattr(fmt, "name", None) != name:
            raise ConfigError(f"entry point {ep.value} of group {ENTRY_POINT_GROUP} is no format named {name}")
        return register_format(fmt)
    return None


def find_format(name: str) -> ContainerFormat | None:
    """The format registered as ``name``, loading it if need be; None if there is none."""
    fmt = _LOADED.get(name)
    if fmt is not None:
        return fmt
    if name in _BUILT_IN:
        fmt = _BUILT_IN[name][1]()
        with _LOCK:
            return _LOADED.setdefault(name, fmt)
    if not isinstance(name, str) or not is_name(name):
        return None
    return _from_entry_point(name)


def format_of_path(path: str) -> ContainerFormat | None:
    """The format whose suffix ``path`` ends with (``x/reco.arrow``: arrow); None for no container file.

    Asked of files found on a site (``giod fsck``, ``giod recover``), where the catalog names no format.
    Formats are tried as :func:`format_names` lists them, so an installed one is loaded only when no
    format already known claims the suffix.
    """
    for name in format_names():
        if path.endswith(SUFFIX[name]):
            return find_format(name)
    return None


def format_names() -> list[str]:
    """The names of the formats this process can write and read: giod's, the registered ones, then those
    of installed entry points (not loaded)."""
    names = list(_BUILT_IN)
    names += [n for n in _LOADED if n not in names]
    names += sorted({ep.name for ep in _entry_points()} - set(names))
    return names


class _Names(Collection[str]):
    """The names of the formats, as they are when asked (``name in FORMATS``, ``", ".join(FORMATS)``)."""

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and find_format(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(format_names())

    def __len__(self) -> int:
        return len(format_names())

    def __repr__(self) -> str:
        return repr(tuple(self))


class _Suffixes(Mapping[str, str]):
    """Each format's file suffix by its name (``SUFFIX["arrow"] == ".arrow"``)."""

    def __getitem__(self, name: str) -> str:
        if name in _BUILT_IN:
            return _BUILT_IN[name][0]  # without importing the format
        fmt = find_format(name)
        if fmt is None:
            raise KeyError(name)
        return fmt.suffix

    def __iter__(self) -> Iterator[str]:
        return iter(format_names())

    def __len__(self) -> int:
        return len(format_names())


#: the names of the container formats giod writes and reads, by the name the catalog records
FORMATS: Collection[str] = _Names()
#: the file suffix of each format
SUFFIX: Mapping[str, str] = _Suffixes()
