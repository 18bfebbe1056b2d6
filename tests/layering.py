"""The import checker behind ``tests/test_layers.py``: every import between giod's files, resolved.

The nodes are the files of the package (a package is its ``__init__.py``). An edge is every import
of a giod module, wherever it stands and however it is spelled:

* ``import giod.x.y`` and ``from giod.x import y`` (an edge to ``giod.x.y`` when that is a module,
  else to ``giod.x``), so ``from giod import federation`` imports ``giod.federation``;
* relative imports (``from .. import federation``), resolved against the importing file;
* imports inside functions and under ``if TYPE_CHECKING:`` — a file that names another only for
  its annotations still cannot be read, typed or moved without it;
* ``importlib.import_module(...)`` and ``__import__(...)`` (also under another name) with a constant
  name. One whose name is computed cannot be resolved, so it is reported as such.

The layers come from the package layout table of ``docs/concepts.md`` (whole numbers; the longest
listed prefix of a module gives its layer).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Edge", "ImportGraph", "Unresolved", "check", "circle_breaches", "circles", "dynamic_breaches",
           "layer_breaches", "layer_of", "read_layers", "strongly_connected"]

_WALKED: dict[tuple[str, str, bool], tuple[list[_Raw], list[Unresolved]]] = {}  # a copied tree: walked once


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``line``; ``how`` says in which way."""

    source: str
    target: str
    line: int
    how: str  # "import", "function-level import", "type-only import" or "dynamic import"


@dataclass(frozen=True)
class Unresolved:
    """A dynamic import whose module name is computed at run time."""

    source: str
    line: int
    text: str


@dataclass(frozen=True)
class _Raw:
    """An import as written, made absolute: ``name`` if it is a module, else ``fallback``."""

    name: str
    fallback: str
    line: int
    how: str


@dataclass
class ImportGraph:
    """Every import between the files of the package in ``package_dir`` (``src/giod``)."""

    package_dir: Path
    modules: dict[str, Path] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    unresolved: list[Unresolved] = field(default_factory=list)

    def __post_init__(self) -> None:
        root = self.package_dir.name
        packages = set()
        for path in sorted(self.package_dir.rglob("*.py")):
            parts = (root, *path.relative_to(self.package_dir).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
                packages.add(".".join(parts))
            self.modules[".".join(parts)] = path
        seen = set()
        for source, path in self.modules.items():
            key = (path.read_text(), source, source in packages)
            if key not in _WALKED:
                walk = _Walk(source, source in packages)
                walk.visit(ast.parse(key[0], str(path)), "import")
                _WALKED[key] = (walk.raw, walk.unresolved)
            raw, unresolved = _WALKED[key]
            self.unresolved += unresolved
            for r in raw:
                target = r.name if r.name in self.modules else self._existing(r.fallback)
                edge = Edge(source, target or "", r.line, r.how)
                if target is not None and target != source and edge not in seen:
                    seen.add(edge)
                    self.edges.append(edge)

    def _existing(self, dotted: str) -> str | None:
        """The module ``dotted`` names, or the nearest package above it that exists."""
        parts = dotted.split(".")
        while parts:
            if ".".join(parts) in self.modules:
                return ".".join(parts)
            parts.pop()
        return None


class _Walk:
    """The imports of one file, wherever they stand in it."""

    def __init__(self, source: str, is_package: bool):
        self.source = source
        self.package = source.split(".") if is_package else source.split(".")[:-1]
        self.raw: list[_Raw] = []
        self.unresolved: list[Unresolved] = []
        self.aliases: set[str] = set()  # local names of importlib.import_module

    def visit(self, node: ast.AST, how: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                self.raw += [_Raw(a.name, a.name, child.lineno, how) for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: from the importing file's package up
                    anchor = self.package[: len(self.package) - (child.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                if base == "importlib":
                    self.aliases.update(a.asname or a.name for a in child.names if a.name == "import_module")
                self.raw += [_Raw(f"{base}.{a.name}", base, child.lineno, how) for a in child.names]
            elif isinstance(child, ast.Call) and _is_import_call(child, self.aliases):
                self.dynamic(child)
            inner = how
            if isinstance(child, ast.If) and _names_type_checking(child.test):
                inner = "type-only import"
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and how == "import":
                inner = "function-level import"
            self.visit(child, inner)

    def dynamic(self, call: ast.Call) -> None:
        name = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "name"), None)
        package = call.args[1] if len(call.args) > 1 else next(
            (k.value for k in call.keywords if k.arg == "package"), None)
        if isinstance(name, ast.Constant) and isinstance(name.value, str) and not name.value.startswith("."):
            self.raw.append(_Raw(name.value, name.value, call.lineno, "dynamic import"))
        elif (isinstance(name, ast.Constant) and isinstance(name.value, str)
              and isinstance(package, ast.Constant) and isinstance(package.value, str)):
            level = len(name.value) - len(name.value.lstrip("."))
            anchor = package.value.split(".")
            anchor = anchor[: len(anchor) - (level - 1)]
            target = ".".join([*anchor, *([name.value.lstrip(".")] if name.value.lstrip(".") else [])])
            self.raw.append(_Raw(target, target, call.lineno, "dynamic import"))
        else:
            self.unresolved.append(Unresolved(self.source, call.lineno, ast.unparse(call)))


def _is_import_call(call: ast.Call, aliases: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id == "__import__" or func.id in aliases
    # any attribute of that name: ``importlib.import_module``, ``builtins.__import__``, a module's alias
    return isinstance(func, ast.Attribute) and func.attr in ("import_module", "__import__")


def _names_type_checking(test: ast.expr) -> bool:
    return any((isinstance(n, ast.Name) and n.id == "TYPE_CHECKING")
               or (isinstance(n, ast.Attribute) and n.attr == "TYPE_CHECKING") for n in ast.walk(test))


# -- layers ---------------------------------------------------------------------------------------


def read_layers(concepts: Path) -> dict[str, int]:
    """``{"giod.storage": 1, …}`` from the package layout table of ``docs/concepts.md``."""
    table = concepts.read_text().split("## The package layout", 1)[1].split("\n## ", 1)[0]
    layers: dict[str, int] = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue  # the header, its rule, and rows without a layer (the benchmarks)
        for name in re.findall(r"`(giod(?:\.[A-Za-z_][A-Za-z0-9_]*)*)`", cells[1]):
            layers[name] = int(cells[0])
    return layers


def layer_of(module: str, layers: Mapping[str, int]) -> int | None:
    """The layer of the longest listed prefix of ``module``; None when none is listed.

    The root package (``giod``) is listed for its ``__init__.py`` alone: a module the table
    does not name has no layer, rather than the root's.
    """
    parts = module.split(".")
    if len(parts) == 1:
        return layers.get(module)
    while len(parts) > 1:
        if ".".join(parts) in layers:
            return layers[".".join(parts)]
        parts.pop()
    return None


# -- circles --------------------------------------------------------------------------------------


def circles(graph: ImportGraph) -> list[frozenset[str]]:
    """Every set of two or more files that import one another round a circle."""
    succ: dict[str, set[str]] = {m: set() for m in graph.modules}
    for e in graph.edges:
        succ[e.source].add(e.target)
    return strongly_connected(succ)


def strongly_connected(succ: Mapping[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of two or more nodes, by Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(succ.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(succ):
        if v not in index:
            connect(v)
    return found


def _one_circle(graph: ImportGraph, component: frozenset[str]) -> str:
    """One path round ``component``, with the line of each import, to show where to cut."""
    start = min(component)
    came: dict[str, Edge] = {}
    frontier = [start]
    while frontier:  # breadth first inside the component, back to start
        nxt = []
        for v in frontier:
            for e in graph.edges:
                if e.source == v and e.target in component and e.target not in came:
                    came[e.target] = e
                    nxt.append(e.target)
        if start in came:
            break
        frontier = nxt
    path, v = [], start
    while True:
        e = came[v]
        path.append(f"{e.source}:{e.line} ({e.how})")
        v = e.source
        if v == start:
            break
    return " -> ".join([*reversed(path), start])


# -- the whole check ------------------------------------------------------------------------------


def check(package_dir: Path, concepts: Path, known_circles: Mapping[frozenset[str], str],
          computed_imports: Mapping[str, str]) -> list[str]:
    """Every breach of the layering in the tree at ``package_dir``, one line each; empty when none.

    ``known_circles`` are circles allowed for now, each with the reason; one that is no longer
    there exactly is a breach too, so the list only shrinks. ``computed_imports`` allows the
    dynamic imports with a computed name of the modules it lists, with the reason.
    """
    graph = ImportGraph(package_dir)
    layers = read_layers(concepts)
    return [*layer_breaches(graph, layers), *circle_breaches(graph, known_circles),
            *dynamic_breaches(graph, computed_imports)]


def layer_breaches(graph: ImportGraph, layers: Mapping[str, int]) -> Iterator[str]:
    for module in graph.modules:
        if layer_of(module, layers) is None:
            yield f"{module}: not in the package layout table of docs/concepts.md"
    for e in graph.edges:
        mine, theirs = layer_of(e.source, layers), layer_of(e.target, layers)
        if mine is not None and theirs is not None and theirs > mine:
            yield f"{e.source}:{e.line} (layer {mine}) imports {e.target} (layer {theirs}): {e.how}"


def circle_breaches(graph: ImportGraph, known: Mapping[frozenset[str], str]) -> Iterator[str]:
    found = circles(graph)
    for component in found:
        if component not in known:
            yield f"a circle of {len(component)} files: {_one_circle(graph, component)}"
    for component in known:
        if component not in found:
            yield f"the known circle {sorted(component)} is no longer there as listed: update the list"


def dynamic_breaches(graph: ImportGraph, allowed: Mapping[str, str]) -> Iterator[str]:
    seen = set()
    for u in graph.unresolved:
        seen.add(u.source)
        if u.source not in allowed:
            yield f"{u.source}:{u.line} imports a module whose name is computed: {u.text}"
    for module in allowed:
        if module not in seen:
            yield f"{module} is allowed a computed import but has none: update the list"
