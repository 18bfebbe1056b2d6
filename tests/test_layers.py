"""Layers import only downward (DESIGN.md §2), and the public API is complete."""

from __future__ import annotations

import ast
from pathlib import Path

import giod

SRC = Path(__file__).resolve().parents[1] / "src" / "giod"

# lower numbers are lower layers; a module may import its own layer and below
LAYER = {
    "errors": 0, "config": 0, "names": 0,
    "storage": 1,
    "catalog": 2,
    "replication": 3,
    "schema": 4, "expression": 4,
    "columns": 5, "objects": 5, "writer": 5, "clusters": 5, "passwriter": 5, "fieldvalues": 5, "selection": 5,
    "federation": 5, "consistency": 5, "tagindex": 5,
    "distributed": 6, "dask": 6, "exchange": 6,
    "interchange": 7, "physics": 7, "analysis": 7, "display": 7,
    "cli": 9, "server": 9, "demo": 9, "bench": 9,
}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "giod":
        return None
    if len(parts) == 1:
        return 0  # `import giod` / `from giod import X`: the package's lazy public API
    return LAYER.get(parts[1])


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def test_layers_import_only_downward():
    bad = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        name = ".".join(rel.parts)
        if name.endswith("__init__") and name.count(".") == 1:
            continue  # giod/__init__.py re-exports lazily
        mine = _layer(name.removesuffix(".__init__"))
        assert mine is not None, f"{name}: add it to the layer table"
        for target in _imports(path):
            theirs = _layer(target)
            if theirs is not None and theirs > mine:
                bad.append(f"{name} (layer {mine}) imports {target} (layer {theirs})")
    assert not bad, "\n".join(bad)


def test_public_api_is_complete_and_sorted():
    assert giod.__all__ == sorted(giod.__all__)
    for name in giod.__all__:
        assert getattr(giod, name) is not None, name
    for name in ("open", "Federation", "Dataset", "Schema", "Selection", "OID", "GiodError"):
        assert name in giod.__all__
