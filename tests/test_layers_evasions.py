"""The layer check catches each way of going round it.

Each test copies the source tree, writes one evasion into the copy and runs the same check as
``tests/test_layers.py``; the untouched copy passes. Files are parsed once per text, so a copy
costs only the file that changed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests import layering
from tests.test_layers import COMPUTED_IMPORTS, CONCEPTS, KNOWN_CIRCLES, SRC


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    copy = tmp_path / "giod"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _check(tree: Path) -> list[str]:
    return layering.check(tree, CONCEPTS, KNOWN_CIRCLES, COMPUTED_IMPORTS)


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + "\n" + text)


def test_the_untouched_copy_passes(tree):
    assert _check(tree) == []


@pytest.mark.parametrize("evasion", [
    "from giod import federation",
    "from .. import federation",
    "from ..federation import Federation",
    "from giod import Federation",  # the package's lazy API: the top of the store
    "import giod.federation as f",
    "def later():\n    from giod.federation import Federation\n    return Federation",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from giod.federation import Dataset",
    "import importlib\nimportlib.import_module('giod.federation')",
    "import importlib\nimportlib.import_module('..federation', 'giod.storage')",
    "__import__('giod.federation')",
])
def test_an_upward_import_is_caught_however_written(tree, evasion):
    _append(tree / "storage" / "checksum.py", evasion)
    bad = _check(tree)  # first the upward import; the circles it closes follow
    assert bad and bad[0].startswith("giod.storage.checksum:"), bad
    assert "(layer 1) imports giod.federation (layer 7)" in bad[0] or "(layer 1) imports giod (layer 7)" in bad[0]


@pytest.mark.parametrize("evasion", [
    "import importlib\nname = 'federation'\nimportlib.import_module('giod.' + name)",
    "from importlib import import_module as load\ndef f(name):\n    return load(f'giod.{name}')",
    "def f(name):\n    return __import__(name)",
])
def test_an_import_with_a_computed_name_is_caught(tree, evasion):
    _append(tree / "storage" / "checksum.py", evasion)
    bad = _check(tree)
    assert len(bad) == 1 and "giod.storage.checksum" in bad[0] and "computed" in bad[0], bad


def test_an_allowed_computed_import_needs_one_and_its_reason(tree):
    _append(tree / "storage" / "checksum.py", "import importlib\ndef f(n):\n    return importlib.import_module(n)")
    assert layering.check(tree, CONCEPTS, KNOWN_CIRCLES, {"giod.storage.checksum": "a plug-in name"}) == []
    assert layering.check(SRC, CONCEPTS, KNOWN_CIRCLES, {"giod.storage.checksum": "a plug-in name"}) == [
        "giod.storage.checksum is allowed a computed import but has none: update the list"]


@pytest.mark.parametrize(("file", "evasion"), [
    # type-only, inside one package and one layer: model.py imports definitions.py
    ("schema/definitions.py",
     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from giod.schema.model import Schema"),
    # function-level and relative, inside one package
    ("catalog/tables.py", "def f():\n    from .catalog import Catalog\n    return Catalog"),
    # between two modules of one layer (config.py imports errors.py)
    ("errors.py", "from giod import config"),
])
def test_a_new_circle_inside_a_layer_is_caught(tree, file, evasion):
    _append(tree / file, evasion)
    bad = _check(tree)
    assert len(bad) == 1 and bad[0].startswith("a circle of "), bad
    assert f"giod.{file.removesuffix('.py').replace('/', '.')}:" in bad[0], bad


def test_a_known_circle_that_grows_or_goes_is_caught(tree):
    # a file of the command line imports the group's package back: a circle, and none is listed
    _append(tree / "cli" / "output.py", "from giod.cli import main")
    bad = _check(tree)
    assert len(bad) == 1 and bad[0].startswith("a circle of "), bad
    (first,) = layering.circles(layering.ImportGraph(tree))
    # listed, it passes; a file that joins it makes a bigger circle, and the listed one is no longer there
    assert layering.check(tree, CONCEPTS, {first: "listed"}, COMPUTED_IMPORTS) == []
    _append(tree / "cli" / "tables.py", "from giod.cli import main")
    bad = layering.check(tree, CONCEPTS, {first: "listed"}, COMPUTED_IMPORTS)
    assert len(bad) == 2 and "no longer there" in bad[1], bad
    size = int(bad[0].removeprefix("a circle of ").split(" ")[0])
    assert size > len(first), bad
    # a listed circle that was cut: the list must shrink with it
    stale = {**KNOWN_CIRCLES, frozenset({"giod.errors", "giod.config"}): "gone"}
    assert layering.check(SRC, CONCEPTS, stale, COMPUTED_IMPORTS) == [
        "the known circle ['giod.config', 'giod.errors'] is no longer there as listed: update the list"]


def test_a_module_without_a_layer_is_caught(tree):
    (tree / "newthing.py").write_text('"""A module the concepts table does not name."""\n')
    assert _check(tree) == ["giod.newthing: not in the package layout table of docs/concepts.md"]
