"""An import interrupted by Ctrl-C deletes the dataset it created: fsck counts its files, gc reclaims them."""

from __future__ import annotations

from pathlib import Path

import pytest

import giod
from giod.interchange import import_root
from giod.store.consistency import fsck, gc
from tests.conftest import fresh_postgres_schema, giod_cli


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def target(request, tmp_path: Path) -> str:
    if request.param == "sqlite":
        url = str(tmp_path / "fed")
        giod.open(url, create=True).close()
    else:
        url = fresh_postgres_schema(request)
        fed = giod.open(url, create=True)
        fed.add_site("local", str(tmp_path / "site"), 0)
        fed.close()
    return url


def test_files_of_an_interrupted_import_are_reclaimed(target: str, zmumu: Path, monkeypatch):
    monkeypatch.setenv("GIOD_DATABASE_EVENTS", "500")  # a database committed per chunk

    def interrupt(done: int, total: int) -> None:
        if done >= 1000:
            raise KeyboardInterrupt

    fed = giod.open(target, create=False)
    with pytest.raises(KeyboardInterrupt):
        import_root(fed, zmumu, "zmumu", step_size=500, progress=interrupt)
    assert "zmumu" not in fed.datasets()
    files = list(fed.site().walk())
    assert len(files) >= 2 and not any(f.path.startswith(".") for f in files)

    report = fsck(fed.store)
    assert report.deleted_files == len(files) and report.deleted_bytes == sum(f.size for f in files)
    assert {p.kind for p in report.problems} == {"deleted"} and not report.damaged
    assert gc(fed.store) == []  # the deletion is younger than the default grace
    fed.close()

    r = giod_cli("gc", "--grace", "0", "-f", target)
    assert r.returncode == 0 and f"{len(files)} orphan files removed" in r.stdout, r.stdout + r.stderr
    fed = giod.open(target, create=False)
    try:
        assert list(fed.site().walk()) == []
        report = fsck(fed.store)
        assert report.problems == [] and report.deleted_files == 0
        assert fed.catalog.container_paths() == set()  # the deleted rows were purged with their files
    finally:
        fed.close()
