"""giod's files import only downward, round no circle, and the public API is complete.

The layers are those of the package layout in ``docs/concepts.md``; how imports are found and
resolved is in ``tests/layering.py``; ``tests/test_layers_evasions.py`` proves that each way round
the check is caught. Run alone: ``python -m pytest -q tests/test_layers.py tests/test_layers_evasions.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import giod
from tests import layering

SRC = Path(__file__).resolve().parents[1] / "src" / "giod"
CONCEPTS = SRC.parents[1] / "docs" / "concepts.md"

# Circles of files that are known and still to be cut, each with why it is there. The list only
# shrinks: a circle that changes or goes away fails the test until its entry is updated or removed.
KNOWN_CIRCLES: dict[frozenset[str], str] = {}  # none: the command modules take main from giod.cli.base

PARALLEL_LAYER = 8  # the store and the parallel processing on it

# Modules allowed an import whose module name is computed at run time, with the reason. None is:
# a computed name hides an import from this test. Name the modules in full, or register them.
COMPUTED_IMPORTS: dict[str, str] = {}


def test_layers_import_only_downward():
    """Every import of a giod module, also inside functions, under TYPE_CHECKING, relative or through
    importlib, goes to the importer's layer or below; every file has a layer."""
    graph = layering.ImportGraph(SRC)
    bad = list(layering.layer_breaches(graph, layering.read_layers(CONCEPTS)))
    assert not bad, "\n".join(bad)


def test_no_circle_of_files_anywhere_in_src():
    """No set of files imports one another round a circle (type-only and function-level imports
    included), except the known circles listed above, exactly as listed."""
    bad = list(layering.circle_breaches(layering.ImportGraph(SRC), KNOWN_CIRCLES))
    assert not bad, "\n".join(bad)


def test_no_import_hides_its_module():
    bad = list(layering.dynamic_breaches(layering.ImportGraph(SRC), COMPUTED_IMPORTS))
    assert not bad, "\n".join(bad)


def test_no_circle_between_the_concepts_of_the_store():
    """Up to the parallel layer, the concepts (``giod.<package or module>``) import one another in one
    direction too, except the known circle of the store's own modules."""
    layers = layering.read_layers(CONCEPTS)
    succ: dict[str, set[str]] = {}
    for e in layering.ImportGraph(SRC).edges:
        a, b = (".".join(m.split(".")[:2]) for m in (e.source, e.target))
        if a != b and "giod" not in (a, b) and max(layering.layer_of(a, layers) or 0,
                                                  layering.layer_of(b, layers) or 0) <= PARALLEL_LAYER:
            succ.setdefault(a, set()).add(b)
    found = layering.strongly_connected(succ)
    assert all(c in KNOWN_CIRCLES for c in found), [sorted(c) for c in found if c not in KNOWN_CIRCLES]


def test_layers_come_from_the_concepts_table_in_whole_numbers():
    layers = layering.read_layers(CONCEPTS)
    assert layers["giod.errors"] == 0 < layers["giod.storage"] < layers["giod.catalog"] < layers["giod.federation"]
    assert layers["giod"] == layers["giod.federation"]  # the package's lazy API reaches the front
    assert all(isinstance(n, int) for n in layers.values())


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        yield ".".join(rel.parts), path


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
    assert callable(giod.distributed.map)  # the deprecated name of map_selection stays
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
    layers = layering.read_layers(CONCEPTS)
    for name in top:
        assert layering.layer_of(f"giod.{name}", layers) is not None, f"{name}: give it a layer in the table"


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
