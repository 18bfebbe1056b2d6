"""Opening catalogs: URLs, creation, migrations, SQLite settings."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from sqlalchemy import Column, Connection, MetaData, Table, Text, insert, select

from giod.catalog import Catalog, engine, migrations
from giod.catalog.tables import meta, sites
from giod.errors import CatalogError, ConfigError


def _level(catalog: Catalog) -> int:
    with catalog._engine.connect() as conn:
        return int(
            conn.execute(select(meta.c.value).where(meta.c.key == "schema_version")).scalar_one()
        )


def _set_level(catalog: Catalog, level: int) -> None:
    with catalog._engine.begin() as conn:
        conn.execute(meta.update().where(meta.c.key == "schema_version").values(value=str(level)))


def test_fresh_catalog_is_at_the_latest_level(catalog: Catalog) -> None:
    assert _level(catalog) == migrations.latest_level()
    assert catalog.dialect in ("sqlite", "postgresql")


def test_reopen_keeps_everything(catalog_url: str) -> None:
    with Catalog.open(catalog_url) as first:
        first.add_site("local", "file:///srv")
    with Catalog.open(catalog_url, create=False) as again:
        assert [s.name for s in again.sites()] == ["local"]
        assert again.version() == 1
        assert _level(again) == migrations.latest_level()


def test_newer_catalog_is_refused(catalog_url: str) -> None:
    with Catalog.open(catalog_url) as catalog:
        _set_level(catalog, migrations.latest_level() + 1)
    latest = migrations.latest_level()
    message = (
        f"catalog schema version {latest + 1} is newer than this giod \\({latest}\\); upgrade giod"
    )
    with pytest.raises(CatalogError, match=message):
        Catalog.open(catalog_url)


def test_upgrade_steps_run_once_in_order(catalog_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with Catalog.open(catalog_url) as catalog:
        catalog.add_site("local", "file:///srv")
    ran: list[int] = []

    def step(level: int):  # a later schema change: a new table, filled from old rows
        def upgrade(conn: Connection) -> None:
            ran.append(level)
            extra = Table(f"extra_{level}", MetaData(), Column("site_name", Text))
            extra.create(conn)
            conn.execute(insert(extra).from_select(["site_name"], select(sites.c.name)))

        return upgrade

    latest = migrations.latest_level()
    monkeypatch.setitem(migrations.STEPS, latest + 1, step(latest + 1))
    monkeypatch.setitem(migrations.STEPS, latest + 2, step(latest + 2))
    with Catalog.open(catalog_url) as upgraded:
        assert ran == [latest + 1, latest + 2]
        assert _level(upgraded) == latest + 2
        with upgraded._engine.connect() as conn:
            extra = Table(f"extra_{latest + 2}", MetaData(), autoload_with=conn)
            assert conn.execute(select(extra.c.site_name)).scalars().all() == ["local"]
        assert upgraded.version() == 1  # a migration is not a federation commit
    with Catalog.open(catalog_url):
        assert ran == [latest + 1, latest + 2]


def test_create_false_refuses_a_missing_catalog(tmp_path: Path) -> None:
    path = tmp_path / "nothing.db"
    with pytest.raises(CatalogError, match=r"no catalog at .*nothing\.db"):
        Catalog.open(f"sqlite:///{path}", create=False)
    assert not path.exists()


def test_create_false_refuses_an_empty_database(catalog_url: str) -> None:
    if catalog_url.startswith("sqlite"):
        Path(catalog_url.removeprefix("sqlite:///")).touch()
    with pytest.raises(CatalogError, match="holds no giod catalog"):
        Catalog.open(catalog_url, create=False)


def test_plain_path_and_missing_directories(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "catalog.db"
    with Catalog.open(str(path)) as catalog:
        assert catalog.dialect == "sqlite"
        assert catalog.url == f"sqlite:///{path}"
        catalog.add_site("local", "file:///srv")
    with Catalog.open(f"sqlite:///{path}") as again:
        assert again.version() == 1


@pytest.mark.parametrize(
    ("url", "error", "message"),
    [
        ("mysql://db.example/giod", CatalogError, "unsupported catalog URL"),
        ("sqlite:///x.db?synchronous=OFF", ConfigError, "synchronous must be FULL or NORMAL"),
        ("sqlite:///x.db?timeout=soon", ConfigError, "timeout must be a number"),
        ("postgresql://postgres@127.0.0.1:1/none?connect_timeout=1", CatalogError, "catalog"),
    ],
)
def test_bad_urls(url: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        Catalog.open(url)


def test_not_a_database_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are not the tables you are looking for\n" * 100)
    with pytest.raises(CatalogError, match="not a database"):
        Catalog.open(f"sqlite:///{path}")


@pytest.mark.parametrize(("option", "expected"), [("", 2), ("?synchronous=NORMAL", 1)])
def test_sqlite_runs_in_wal_mode(tmp_path: Path, option: str, expected: int) -> None:
    catalog = Catalog.open(f"sqlite:///{tmp_path / 'c.db'}{option}")
    with catalog, catalog._engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == expected
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 60_000


def test_in_memory_catalog() -> None:
    with Catalog.open("sqlite://") as catalog:
        catalog.add_site("local", "file:///srv")
        assert catalog.version() == 1


def test_catalogs_of_one_process_share_an_engine(catalog_url: str) -> None:
    """The catalogs a process has open on one catalog share an engine (warm connections, statements compiled
    once); the last one closed closes its connections."""
    first = Catalog.open(catalog_url)  # the file made: the next opening of it shares
    first.close()
    first = Catalog.open(catalog_url)
    second = Catalog.open(catalog_url)
    assert first._engine is second._engine
    assert second.version() == first.version()
    second.close()
    assert first._engine.pool.checkedin() >= 1  # still open for the first
    assert first.version() == 0
    first.close()
    assert first._engine.pool.checkedin() == 0
    third = Catalog.open(catalog_url)  # a new engine once the last one is closed
    assert third._engine is not first._engine
    assert third.version() == 0
    fourth = Catalog.open(catalog_url)
    held = [n for e, n in engine._SHARED.values() if e is third._engine]
    assert held == [2]
    del fourth  # collected unclosed: gives the engine back as close() does
    gc.collect()
    assert [n for e, n in engine._SHARED.values() if e is third._engine] == [1]
    third.close()
    assert all(e is not third._engine for e, _ in engine._SHARED.values())


def test_a_sqlite_file_replaced_under_its_path_gets_an_engine_of_its_own(tmp_path: Path) -> None:
    """An engine is shared by the file, not the path: a catalog made anew where another was (moved away while
    the first catalog stays open) is its own, versions and all."""
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    Catalog.open(url).close()
    first = Catalog.open(url)
    first.add_site("a", str(tmp_path / "a"), 0)
    for suffix in ("", "-wal", "-shm"):
        if (tmp_path / f"catalog.db{suffix}").exists():
            (tmp_path / f"catalog.db{suffix}").rename(tmp_path / f"old.db{suffix}")
    Catalog.open(url).close()  # a new, empty catalog at the same path
    second = Catalog.open(url)
    assert second._engine is not first._engine
    assert second.version() == 0 and [s.name for s in second.sites()] == []
    assert first.version() == 1
    first.close()
    second.close()
