"""Opening ROOT files with uproot, and finding the event tree in them; uproot's errors become giod's."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from giod.errors import ConfigError, GiodError, IntegrityError, NotFound, StorageError

DEFAULT_TREE = "Events"
_TREE_KINDS = ("TTree", "ROOT::RNTuple")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:200] + "...") if len(text) > 200 else (text or type(exc).__name__)


@contextmanager
def root_errors(path: str | os.PathLike[str]) -> Iterator[None]:
    """Map what uproot and the file system raise to giod errors."""
    name = os.fspath(path)
    try:
        yield
    except (GiodError, AttributeError, NameError, TypeError):
        raise  # ours, or a bug: either way not the file's fault
    except FileNotFoundError as exc:
        raise NotFound(f"no such file: {name}") from exc
    except OSError as exc:
        if exc.errno is not None:  # the system refused; without errno, uproot found too few bytes
            raise StorageError(f"cannot read {name}: {exc.strerror}") from exc
        raise IntegrityError(f"cannot read ROOT file {name}: it is truncated or corrupt ({_one_line(exc)})") from exc
    except Exception as exc:  # uproot: ValueError, DeserializationError, zlib.error, ...
        raise IntegrityError(f"cannot read ROOT file {name}: it is truncated or corrupt ({_one_line(exc)})") from exc


def open_root(path: str | os.PathLike[str]) -> Any:
    """The ROOT file at ``path``, opened with uproot; a missing, non-ROOT or damaged file is a giod error."""
    import uproot

    name = os.fspath(path)
    if "://" not in name:  # local files: say plainly what is wrong before uproot guesses
        if not os.path.exists(name):
            raise NotFound(f"no such file: {name}")
        if os.path.isdir(name):
            raise StorageError(f"{name} is a directory, not a ROOT file")
        with root_errors(path), open(name, "rb") as fh:
            if fh.read(4) != b"root":
                raise StorageError(f"{name} is not a ROOT file")
    with root_errors(path):
        # the {path: None} form stops uproot from reading "file:tree" out of a colon
        return uproot.open({name: None})


def tree_names(file: Any) -> list[str]:
    """The names of the TTrees and RNTuples at the top of an open file, in the file's order."""
    return list(dict.fromkeys(k.rsplit(";", 1)[0] for k, v in file.classnames().items() if v in _TREE_KINDS))


def find_tree(file: Any, path: str | os.PathLike[str], tree: str | None) -> tuple[str, Any]:
    """``(name, object)`` of the event tree (TTree or RNTuple): ``tree``, else ``Events``, else the only one."""
    with root_errors(path):
        found = {k.rsplit(";", 1)[0]: v for k, v in file.classnames().items() if v in _TREE_KINDS}
        if tree is not None:
            if tree not in found:
                have = ", ".join(sorted(found)) or "none"
                raise NotFound(f"{os.fspath(path)} has no tree {tree!r} (trees: {have})")
            name = tree
        elif DEFAULT_TREE in found:
            name = DEFAULT_TREE
        elif len(found) == 1:
            name = next(iter(found))
        else:
            lowered = [k for k in found if k.lower() == DEFAULT_TREE.lower()]
            if len(lowered) == 1:
                name = lowered[0]
            elif not found:
                raise NotFound(f"{os.fspath(path)} holds no TTree or RNTuple")
            else:
                raise ConfigError(
                    f"{os.fspath(path)} holds several trees ({', '.join(sorted(found))}); choose one with tree=NAME"
                )
        return name, file[name]
