"""A federation is created only when asked: ``giod init`` or ``giod.open(..., create=True)``."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import fresh_postgres_schema

import giod
from giod.federation import Federation


def _targets(tmp_path: Path) -> list[tuple[str, Path]]:
    """Places with no federation, and the file or directory an accidental create would leave."""
    (tmp_path / "empty").mkdir()
    return [(str(tmp_path / "typo"), tmp_path / "typo"),
            (str(tmp_path / "empty"), tmp_path / "empty" / "catalog.sqlite"),
            (f"sqlite:///{tmp_path / 'cat.sqlite'}", tmp_path / "cat.sqlite")]


@pytest.mark.parametrize("opener", [giod.open, Federation.open], ids=["giod.open", "Federation.open"])
def test_a_missing_federation_is_not_found_and_not_created(tmp_path, opener):
    for target, trace in _targets(tmp_path):
        with pytest.raises(giod.NotFound, match="giod init"):
            opener(target)
        assert not trace.exists(), target
        with opener(target, create=True) as fed:
            fed.create_dataset("d", giod.Schema.from_yaml(
                "schema_version: 1\nname: t\ntypes:\n  P: {fields: {pt: float32}}\ncollections: {parts: P}\n"))
        with opener(target) as again:
            assert again.datasets() == ["d"]


@pytest.mark.postgres
def test_an_empty_postgresql_catalog_is_not_found_until_created(request):
    url = fresh_postgres_schema(request)
    with pytest.raises(giod.NotFound, match="giod init"):
        giod.open(url)
    with giod.open(url, create=True) as fed:
        assert fed.datasets() == []
    with giod.open(url) as again:
        assert again.version == fed.version
