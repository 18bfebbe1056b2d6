"""Where commands write: one rule for every ``-o/--output``.

The output itself (a file, or the directory of a command that writes
several files) may be new, but the directory it goes into must already
exist: giod creates at most the one directory it was named, never a chain of
missing ones (a typo in a path is refused, not built). The place must take a
new file, which is tried before any work starts, so a read-only, special
(``/proc``, ``/sys``) or forbidden location is one error line and exit code
2, not a traceback after the analysis ran. An existing output file is
replaced; an existing directory, device or other special file where a file
is to go is refused.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from giod.errors import ConfigError, StorageError

__all__ = ["OutputPath", "check_output", "writing"]


def check_output(path: str, *, directory: bool = False) -> str:
    """``path`` if a command may write its output there (see the module docstring); ConfigError otherwise.

    ``directory``: the output is a directory of files (created if it is missing).
    """
    if not path or not path.strip():
        raise ConfigError("an output path cannot be empty")
    target = Path(path)
    try:
        mode: int | None = target.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:  # a path through a file, a too-long name, a forbidden directory
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from exc
    if directory and mode is not None and not stat.S_ISDIR(mode):
        raise ConfigError(f"cannot write into {path}: it is not a directory")
    if not directory and mode is not None:
        if stat.S_ISDIR(mode):
            raise ConfigError(f"cannot write {path}: it is a directory (give a file name)")
        if not stat.S_ISREG(mode):
            raise ConfigError(f"cannot write {path}: it is not a regular file")
    into = target if directory and mode is not None else target.absolute().parent
    if not into.exists():
        raise ConfigError(f"cannot write {path}: directory {into} does not exist (giod creates no missing "
                          "parent directory)")
    if not into.is_dir():
        raise ConfigError(f"cannot write {path}: {into} is not a directory")
    _try_a_file(path, into)
    if not directory and mode is not None and not os.access(target, os.W_OK):
        raise ConfigError(f"cannot write {path}: the file exists and is read-only")
    return path


def _try_a_file(path: str, into: Path) -> None:
    """Create and remove an empty hidden file in ``into``: the one sure test that the place takes files."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".giod-", suffix=".probe", dir=into)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: no file can be created in {into} ({exc.strerror})") from exc
    os.close(fd)
    os.unlink(probe)


@contextlib.contextmanager
def writing(path: str) -> Iterator[None]:
    """Turn a failure while writing ``path`` (disk full, the place removed meanwhile) into one error line."""
    try:
        yield
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc


class OutputPath(click.ParamType[str, Any]):
    """A click parameter for an output file (or directory) checked by :func:`check_output` when parsed."""

    name = "path"

    def __init__(self, *, directory: bool = False):
        self.directory = directory

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        return check_output(os.fspath(value), directory=self.directory)
