"""No raw driver line beside an error the catalog answers: psycopg's warning on leaving an aborted pipeline."""

from __future__ import annotations

import logging
import threading

import pytest

import giod
from giod.testing import synthetic


def test_a_refused_group_leaves_no_psycopg_line(postgres_database, caplog, tmp_path):
    """Writers committing at once on PostgreSQL, a quarter with a program name the server refuses (a NUL):
    the refused ones get a CatalogError, the others land, and psycopg's "error ignored terminating
    <Pipeline>" warning (the group's pipeline left after its statement failed) is not logged."""
    import psycopg

    # the warning is psycopg's own, whatever giod does: it is there to be dropped
    with psycopg.connect(postgres_database) as conn, caplog.at_level(logging.WARNING):
        with pytest.raises(psycopg.Error), conn.pipeline():
            conn.execute("SELECT 1 / 0")
    assert not [r for r in caplog.records if "error ignored terminating" in r.getMessage()]

    fed = giod.open(postgres_database, create=True)
    try:
        if not fed.sites():
            fed.add_site("local", str(tmp_path / "site"))
        ds = fed.create_dataset("refused", synthetic.schema())
        outcomes: list[str] = []
        start = threading.Barrier(8)

        def one(i: int) -> None:
            start.wait()
            for k in range(4):
                program = "bad\x00name" if (i + k) % 4 == 0 else f"ok{i}"
                try:
                    with ds.writer(program=program) as w:
                        w.append(synthetic.events(3, seed=i * 10 + k))
                    outcomes.append("ok")
                except giod.CatalogError as exc:
                    outcomes.append("refused" if "NUL" in str(exc) else f"other {exc}")

        caplog.clear()
        with caplog.at_level(logging.WARNING):
            threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert sorted(set(outcomes)) == ["ok", "refused"] and outcomes.count("refused") == 8
        assert len(ds.databases()) == 24 and all(db.program.startswith("ok") for db in ds.databases())
        assert not [r for r in caplog.records if r.name.startswith("psycopg")], caplog.text
    finally:
        fed.close()
