"""A catalog row edited outside giod (a broken JSON list or object) is a CatalogError, never a decoding error."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import giod
from giod.errors import CatalogError
from giod.testing import synthetic

EDITS = {
    "cluster entries not JSON": "UPDATE containers SET cluster_entries = '{bad'",
    "cluster entries not integers": "UPDATE containers SET cluster_entries = '[\"a\"]'",
    "container parameters a list": "UPDATE containers SET parameters = '[1]'",
    "database parameters not JSON": "UPDATE databases SET parameters = 'nope'",
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_malformed_row_is_a_catalog_error(tmp_path: Path, edit: str) -> None:
    fed = giod.open(tmp_path / "fed", create=True)
    with fed.create_dataset("d", synthetic.schema()).writer() as w:
        w.append(synthetic.events(20, seed=1))
    fed.close()
    with sqlite3.connect(tmp_path / "fed" / "catalog.sqlite") as con:
        con.execute(EDITS[edit])
    fed = giod.open(tmp_path / "fed")
    try:
        with pytest.raises(CatalogError, match="malformed catalog row"):
            fed.dataset("d").event(3)
        with pytest.raises(CatalogError, match="malformed catalog row"):
            fed.dataset("d").read(["hits"])
    finally:
        fed.close()
