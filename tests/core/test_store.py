"""The store under the public front: readers and writers work on it alone, and nothing below calls back up."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import giod
from giod.catalog import Catalog
from giod.federation import CATALOG_FILE
from giod.read.selection import Selection
from giod.store.consistency import fsck
from giod.store.snapshot import Store
from giod.testing import synthetic
from giod.write.writer import Writer

SRC = Path(__file__).resolve().parents[2] / "src" / "giod"
BELOW_THE_FRONT = ("store", "read", "write")


def _imported(path: Path) -> set[str]:
    """Every module ``path`` names in an import, type-only and function-level ones included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def test_nothing_below_the_front_imports_it():
    bad = []
    for package in BELOW_THE_FRONT:
        assert len(list((SRC / package).glob("*.py"))) > 1, f"giod.{package} has no module"
        for path in sorted((SRC / package).rglob("*.py")):
            names = _imported(path)
            if "giod.federation" in names or {"giod.Federation", "giod.Dataset"} & names:
                bad.append(str(path.relative_to(SRC)))
    assert (SRC / "federation.py").exists() and not bad, f"these import the public front: {bad}"


def test_no_circle_among_the_files_of_the_store_and_its_front():
    """Type-only imports count: a circle is a circle, whatever the imports are for."""
    files = {"giod.federation": SRC / "federation.py"}
    for package in BELOW_THE_FRONT:
        for path in (SRC / package).rglob("*.py"):
            files[f"giod.{package}.{path.stem}".removesuffix(".__init__")] = path
    graph = {name: {t for t in _imported(path) if t in files and t != name} for name, path in files.items()}
    done: set[str] = set()

    def walk(node: str, trail: list[str]) -> None:
        for nxt in sorted(graph[node]):
            assert nxt not in trail, "circle: " + " -> ".join([*trail[trail.index(nxt):], nxt])
            if nxt not in done:
                walk(nxt, [*trail, nxt])
        done.add(node)

    for name in sorted(graph):
        walk(name, [name])


def test_the_store_writes_reads_and_checks_without_the_front(tmp_path):
    with giod.open(tmp_path, create=True) as fed:
        fed.create_dataset("qcd", synthetic.schema())
    store = Store(Catalog.open(f"sqlite:///{tmp_path / CATALOG_FILE}"), tmp_path)
    try:
        with Writer(store.dataset("qcd"), database_events=100) as w:
            w.append(synthetic.events(250, seed=3))
        snap = store.dataset("qcd").pinned()
        assert len(snap) == 250 and len(snap.databases()) == 3
        sel = Selection(snap, "njets >= 2")
        mine = sel.read(["njets", "ht"])
        assert len(mine) == len(sel) > 0 and bool(np.all(mine.njets >= 2))
        assert not fsck(store).problems
    finally:
        store.catalog.close()
    with giod.open(tmp_path) as fed:  # the front reads what the store wrote, the same events
        theirs = fed.dataset("qcd").select("njets >= 2").read(["njets", "ht"])
        assert theirs.ht.tolist() == mine.ht.tolist()
        assert fed.dataset("qcd").snapshot.store is fed.store
