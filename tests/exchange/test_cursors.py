"""Exchange cursors (catalog level 8) on both backends: a level-6 catalog migrated, cursors only forward."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine

from giod.catalog import Catalog, migrations
from giod.catalog.engine import parse_url


def test_a_level_6_catalog_gets_cursors_and_keeps_its_version(catalog_url: str) -> None:
    engine = create_engine(parse_url(catalog_url).url)
    with engine.begin() as conn:
        assert migrations.migrate(conn, target=6) == (None, 6)
    engine.dispose()
    with Catalog.open(catalog_url, create=False) as catalog:
        with catalog._engine.connect() as conn:
            assert migrations.read_level(conn) == migrations.latest_level() >= 8
        assert catalog.exchange_cursor("x0000000000000001", "raw") is None
        assert catalog.advance_exchange_cursor("x0000000000000001", "daq", "raw", 7) == 7
        assert catalog.advance_exchange_cursor("x0000000000000001", "daq", "raw", 5) == 7  # never back
        assert catalog.advance_exchange_cursor("x0000000000000001", "daq", "raw", 9) == 9
        assert catalog.exchange_cursor("x0000000000000001", "raw") == 9
        assert catalog.exchange_cursor("x0000000000000001", "skim") is None  # a cursor belongs to its dataset
        assert catalog.forget_exchange_cursor("x0000000000000001", "raw")
        assert catalog.exchange_cursor("x0000000000000001", "raw") is None
        assert catalog.version() == 0  # bookkeeping, not content: no version was made


@settings(max_examples=30, deadline=None)
@given(moves=st.lists(st.integers(min_value=0, max_value=2**63 - 1), min_size=1, max_size=12))
def test_a_cursor_is_the_largest_version_it_was_moved_to(tmp_path_factory: pytest.TempPathFactory,
                                                         moves: list[int]) -> None:
    path = tmp_path_factory.mktemp("cursor") / "catalog.db"
    with Catalog.open(f"sqlite:///{path}") as catalog:
        got = [catalog.advance_exchange_cursor("x00000000000000aa", "s", "d", v) for v in moves]
        assert got == [max(moves[: i + 1]) for i in range(len(moves))]
        assert catalog.exchange_cursor("x00000000000000aa", "d") == max(moves)
