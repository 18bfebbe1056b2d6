"""Layers import only downward (DESIGN.md §2), the store has no import cycle, and the public API is complete."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import giod

SRC = Path(__file__).resolve().parents[1] / "src" / "giod"

# lower numbers are lower layers; a module may import its own layer and below. The store is
# below its read and write sides, and those below federation, the public front over them.
LAYER = {
    "errors": 0, "config": 0, "names": 0,
    "storage": 1,
    "catalog": 2,
    "replication": 3,
    "schema": 4, "expression": 4,
    "columns": 5, "store": 5,
    "read": 6, "write": 6,
    "federation": 7,
    "distributed": 8, "dask": 8, "exchange": 8,
    "interchange": 9, "physics": 9, "analysis": 9, "display": 9,
    "cli": 11, "__main__": 11, "server": 11, "demo": 11, "testing": 11,
}
STORE = 8  # the store and the parallel layer on it: no cycle between their concepts


def _layer(module: str) -> float | None:
    parts = module.split(".")
    if parts[0] != "giod":
        return None
    if len(parts) == 1:
        return 0  # `import giod` / `from giod import X`: the package's lazy public API
    return LAYER.get(parts[1])


def _type_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _dynamic(node: ast.AST) -> str | None:
    """The module of ``importlib.import_module("giod.x")`` or ``__import__("giod.x")``."""
    if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def _imports(path: Path) -> Iterator[tuple[str, bool]]:
    """Every module ``path`` imports, anywhere in it (functions too), and whether only for type checking."""

    def visit(node: ast.AST, type_only: bool) -> Iterator[tuple[str, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, type_only
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                yield child.module, type_only
            elif (target := _dynamic(child)) is not None:
                yield target, type_only
            yield from visit(child, type_only or _type_only(child))

    yield from visit(ast.parse(path.read_text()), False)


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        yield ".".join(rel.parts), path


def test_layers_import_only_downward():
    bad = []
    for name, path in _modules():
        if name.endswith("__init__") and name.count(".") == 1:
            continue  # giod/__init__.py re-exports lazily
        mine = _layer(name.removesuffix(".__init__"))
        assert mine is not None, f"{name}: add it to the layer table"
        for target, type_only in _imports(path):
            theirs = _layer(target)
            if theirs is None or theirs <= mine:
                continue
            # an annotation may name a class of its own layer (a Selection's Dataset), never one above
            if type_only and int(theirs) == int(mine):
                continue
            bad.append(f"{name} (layer {mine}) imports {target} (layer {theirs})")
    assert not bad, "\n".join(bad)


def test_the_layer_test_sees_dynamic_and_function_level_imports(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text("import importlib\nif TYPE_CHECKING:\n    from giod.federation import Dataset\n"
                    "def f():\n    import giod.cli\n    return importlib.import_module('giod.distributed')\n"
                    "def g():\n    return __import__('giod.server')\n")
    assert sorted(_imports(path)) == [("giod.cli", False), ("giod.distributed", False),
                                      ("giod.federation", True), ("giod.server", False), ("importlib", False)]


def test_no_import_cycle_between_the_concepts_of_the_store():
    """Run-time imports (function-level included) between ``giod.<concept>``s up to the parallel layer
    form no cycle: each can be read, tested and replaced from the bottom up."""
    graph: dict[str, set[str]] = {}
    for name, path in _modules():
        parts = name.removesuffix(".__init__").split(".")
        if len(parts) < 2 or (_layer(name) or 0) > STORE:
            continue
        concept = ".".join(parts[:2])
        edges = graph.setdefault(concept, set())
        for target, type_only in _imports(path):
            other = ".".join(target.split(".")[:2])
            if not type_only and other.startswith("giod.") and other != concept and (_layer(other) or 0) <= STORE:
                edges.add(other)
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def walk(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path[path.index(nxt):], nxt]))
            if nxt not in seen:
                walk(nxt, [*path, nxt])
        seen[node] = 2

    for node in sorted(graph):
        if node not in seen:
            walk(node, [node])


def test_public_api_is_complete_and_sorted():
    assert giod.__all__ == sorted(giod.__all__)
    for name in giod.__all__:
        assert getattr(giod, name) is not None, name
    for name in ("open", "Federation", "Dataset", "Schema", "Selection", "OID", "GiodError"):
        assert name in giod.__all__


def test_names_users_import_stay_where_they_were():
    import giod.dask
    import giod.distributed
    import giod.distributed.arrays
    import giod.read.selection
    import giod.write.writer

    assert giod.dask.from_selection is giod.distributed.arrays.from_selection
    assert giod.distributed.map_selection is giod.distributed.map
    assert giod.write.writer.PassWriter.__module__ == "giod.write.passwriter"
    for name in ("Projection", "assemble", "read_database", "resolve_columns", "Selection"):
        assert getattr(giod.read.selection, name) is not None, name


def test_the_concepts_table_names_every_package_and_module():
    table = (SRC.parents[1] / "docs" / "concepts.md").read_text().split("## The package layout", 1)[1]
    table = table.split("\n## ", 1)[0]
    top = sorted(p.stem for p in SRC.iterdir()
                 if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists())
    missing = [name for name in top if f"`giod.{name}`" not in table]
    assert not missing, f"docs/concepts.md: add {', '.join(missing)} to the package layout"
    for name in top:
        assert name in LAYER, f"{name}: add it to the layer table"


def test_no_private_name_crosses_a_module_line():
    """A name another module imports is public; ``_private`` names stay in their module (STYLE.md 11)."""
    bad = []
    for name, path in _modules():
        if name.split(".")[1] in ("physics", "cli", "bench"):
            continue  # these still share private helpers between their modules (a known debt)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("giod"):
                bad += [f"{name} imports {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert not bad, "\n".join(bad)
