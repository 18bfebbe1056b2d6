"""Names and paths: the one grammar for what users name, and the one for paths on a site.

A **name** (a dataset, a site, a container named in a rule, a token's
dataset) is ASCII: a letter, then up to 127 letters, digits, ``_``, ``.`` or
``-``, and never ``..``. A name is therefore always one path component that
is neither ``.`` nor ``..`` nor hidden, so a dataset's files, which live under
``<dataset>/``, can never reach into another dataset's directory or out of
the site, and the first component of a file's path names its dataset.

A **path** on a site is relative and ``/``-separated, with no empty, ``.``
or ``..`` component, no backslash and no NUL: it cannot leave the site's
root. Sites confine every path with :func:`check_path`; a commit's container
paths must in addition lie below the dataset's own directory
(:func:`check_container_path`).

The grammar governs new names only: a dataset created before it existed
keeps its name, and reading, writing and tokens keep working for it
(docs/security.md).
"""

from __future__ import annotations

import re

from giod.errors import CatalogError, ConfigError, StorageError

__all__ = ["MAX_NAME", "check_container_path", "check_name", "check_path", "dataset_of_path", "is_name"]

MAX_NAME = 128
# re.ASCII: no Unicode letters or digits (look-alikes, right-to-left marks); fullmatch: no trailing "\n"
_NAME = re.compile(rf"[A-Za-z][A-Za-z0-9_.-]{{0,{MAX_NAME - 1}}}", re.ASCII)


def is_name(name: object) -> bool:
    """Whether ``name`` follows the name grammar (see the module docstring)."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None and ".." not in name


def check_name(name: object, what: str = "dataset") -> str:
    """``name`` if it follows the name grammar; ConfigError naming ``what`` otherwise."""
    if is_name(name):
        return name  # type: ignore[return-value]
    shown = repr(name) if not isinstance(name, str) or len(name) <= 60 else repr(name[:60]) + "…"
    raise ConfigError(f"invalid {what} name {shown}: a name is 1 to {MAX_NAME} ASCII letters, digits, '_', '.' "
                      "or '-', starting with a letter, without '..'")


def check_path(path: str) -> str:
    """``path`` if it cannot leave a site's root; StorageError otherwise."""
    if not isinstance(path, str) or not path or path.startswith(("/", "\\")) or "\\" in path or "\x00" in path:
        raise StorageError(f"invalid path {path!r} on a site: expected a relative path")
    if any(p in ("", ".", "..") for p in path.split("/")):
        raise StorageError(f"invalid path {path!r} on a site: no empty, '.' or '..' parts")
    return path


def dataset_of_path(path: str) -> str:
    """The directory a file's path starts with: its dataset's name (for names that follow the grammar)."""
    return path.split("/", 1)[0]


def check_container_path(dataset: str, path: str) -> str:
    """``path`` if it is a valid site path below ``dataset``'s directory; CatalogError otherwise."""
    try:
        check_path(path)
    except StorageError as exc:
        raise CatalogError(f"container path refused: {exc}") from exc
    if not path.startswith(dataset + "/"):
        raise CatalogError(f"container path {path!r} is not below the dataset's directory {dataset}/")
    return path
