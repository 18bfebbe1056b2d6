"""The confinement of file requests resolves a path below a site's root as ``Path.resolve`` would."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from giod.server.routes.files import _resolved


@pytest.mark.parametrize("path", ["d/f.arrow", "d/missing/f.arrow", "d/f.arrow/below", "in/f.arrow", "out/x",
                                  "d/in-link", "d/out-link", "missing"])
def test_resolved_is_the_full_resolve(tmp_path: Path, path: str) -> None:
    root = (tmp_path / "root").resolve()
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.arrow").write_bytes(b"x")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(root / "d", root / "in")  # a directory link inside the root
    os.symlink(tmp_path / "elsewhere", root / "out")  # and one out of it
    os.symlink("f.arrow", root / "d" / "in-link")
    os.symlink(tmp_path / "elsewhere", root / "d" / "out-link")
    assert _resolved(root, path) == (root / path).resolve()
