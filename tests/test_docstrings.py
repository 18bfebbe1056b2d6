"""Every public name a user meets has a docstring: ``giod.__all__`` and the methods of the API's classes."""

from __future__ import annotations

import inspect

import pytest

import giod
import giod.distributed
from giod.read.output import Behaviour
from giod.write.passwriter import PassWriter
from giod.write.writer import Writer

CLASSES = [giod.Federation, giod.Dataset, giod.Selection, Writer, PassWriter, giod.OID, giod.Schema,
           giod.distributed.MapReport]


def _documented(obj: object) -> bool:
    doc = inspect.getdoc(obj)
    return bool(doc and doc.strip())


@pytest.mark.parametrize("name", [n for n in giod.__all__ if n != "__version__"])
def test_every_name_of_giod_has_a_docstring(name: str) -> None:
    assert _documented(getattr(giod, name)), f"giod.{name}"


def test_every_function_and_class_of_giod_distributed_has_a_docstring() -> None:
    names = [n for n in giod.distributed.__all__ if callable(getattr(giod.distributed, n))]
    assert "map_selection" in names
    assert not [n for n in names if not _documented(getattr(giod.distributed, n))]


def _public_members(cls: type) -> list[tuple[str, object]]:
    out = []
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if isinstance(member, property):
            member = member.fget
        if callable(member) or inspect.isfunction(member):
            out.append((name, member))
    return out


@pytest.mark.parametrize("cls", CLASSES, ids=[c.__name__ for c in CLASSES])
def test_every_public_method_of_the_api_has_a_docstring(cls: type) -> None:
    missing = [name for name, member in _public_members(cls) if not _documented(member)]
    assert not missing, f"{cls.__name__}: no docstring on {', '.join(missing)}"


def test_the_walk_sees_what_it_should() -> None:
    """The test above would catch a method without a docstring (it walks methods and properties)."""
    names = {name for name, _ in _public_members(giod.Dataset)}
    assert {"read", "iterate", "summary", "pinned", "add_containers", "schema", "name"} <= names
    assert {"dataset", "datasets", "schema", "sites", "close"} <= {n for n, _ in _public_members(giod.Federation)}

    class Bare:
        def undocumented(self) -> None:
            pass

    assert [n for n, m in _public_members(Bare) if not _documented(m)] == ["undocumented"]
    assert _documented(giod.distributed.map_selection) and _documented(Behaviour)
