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


def test_open_without_a_path_opens_what_the_command_opens_and_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GIOD_FEDERATION", raising=False)
    with pytest.raises(giod.NotFound, match=r"giod\.open\(\) was given no path \(GIOD_FEDERATION is unset, "
                                            r"so \./giod-data\)"):
        giod.open()
    assert not (tmp_path / "giod-data").exists()
    with giod.open(create=True) as fed:
        assert fed.root == tmp_path / "giod-data"
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("GIOD_FEDERATION", str(elsewhere))
    with pytest.raises(giod.NotFound, match=f"GIOD_FEDERATION={elsewhere}"):
        giod.open()
    giod.open(elsewhere, create=True).close()
    with giod.open() as fed:
        assert fed.root == elsewhere


@pytest.mark.parametrize("url", ["postgresql://postgres@127.0.0.1:5432/cat", "http://127.0.0.1:8470",
                                 "sqlite:///tmp/cat.sqlite", "https://host/x"])
def test_a_url_that_lost_a_slash_is_refused_not_made_a_folder(tmp_path, monkeypatch, url):
    # Path(url) turns "//" into "/": opened as a folder, it would be created in the working directory
    monkeypatch.chdir(tmp_path)
    lost = str(Path(url))
    assert lost != url
    with pytest.raises(giod.ConfigError, match="lost a slash"):
        giod.open(Path(url), create=True)
    assert list(tmp_path.iterdir()) == []
    with giod.open(f"./{lost}", create=True) as fed:  # a folder of that name, said so, is a folder
        assert fed.root == (tmp_path / lost).resolve()
