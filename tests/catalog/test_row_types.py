"""A catalog row is untrusted: a SQLite column keeps whatever was put in it (text in a number column, a
number beyond 64 bits as text), whether by a hand edit, another tool, or the peer whose federation is a
copy's source. Every read path gives valid data or a GiodError, never a ``TypeError``, ``ValueError`` or
``OverflowError`` from the conversion that met the value.

``GIOD_ROW_CASES`` sets the number of fuzzed cells (a few dozen here).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.outcomes import failures, outcomes

import giod
from giod.catalog.records import ContainerRecord, DatabaseRecord
from giod.catalog.wire import dump, load
from giod.cli import main
from giod.errors import CatalogError, GiodError
from giod.exchange import copy_dataset
from giod.store.consistency import fsck
from giod.testing import synthetic

CASES = int(os.environ.get("GIOD_ROW_CASES", "40"))
TABLES = ("databases", "containers", "database_summaries", "tag_stats", "datasets", "replicas")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rows") / "fed"
    with giod.open(root, create=True) as fed:
        ds = fed.create_dataset("d", synthetic.schema())
        for seed in range(2):
            with ds.writer() as w:
                w.append(synthetic.events(20, seed=seed))
    return root


@pytest.fixture(scope="module")
def shape(base: Path) -> tuple[dict[str, list[str]], list[str]]:
    """The columns of each table and the summaries' records, read from a copy (``base`` stays untouched)."""
    copy = base.parent / "read"
    shutil.copytree(base, copy)
    con = sqlite3.connect(copy / "catalog.sqlite")
    try:
        columns = {t: [r[1] for r in con.execute(f"PRAGMA table_info({t})")] for t in TABLES}
        texts = [r[0] for r in con.execute("SELECT record FROM database_summaries ORDER BY rowid")]
    finally:
        con.close()
    return columns, texts


def _edited(base: Path, into: Path, table: str, column: str, row: int, value: Any) -> bool:
    """A copy of ``base`` at ``into`` with one cell changed; False when SQLite refuses the value."""
    shutil.copytree(base, into)
    con = sqlite3.connect(into / "catalog.sqlite")
    try:
        rowids = [r[0] for r in con.execute(f"SELECT rowid FROM {table} ORDER BY rowid")]
        con.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?",
                    (value, rowids[row % len(rowids)]))
        con.commit()
        return True
    except sqlite3.Error:
        return False
    finally:
        con.close()


def _paths(root: Path) -> dict[str, str]:
    """What each read path made of the federation at ``root``: "ok", "refused", or the exception."""
    out: dict[str, str] = {}
    try:
        fed = giod.open(root)
    except GiodError:
        return {"open": "refused"}
    try:
        try:
            ds = fed.dataset("d")
        except GiodError:
            return {"dataset": "refused"}
        steps: dict[str, Callable[[], Any]] = {
            "len": lambda: len(ds),
            "read": lambda: ds.read(["hits"]),
            "event": lambda: ds.event(3),
            "event in the second": lambda: ds.event(25),
            "selection": lambda: ds.select("ht > 0").read(["hits"]),
            "count": lambda: len(ds.select("ht > 0")),
            "records": lambda: [(d.containers, d.tag_stats, d.bytes) for d in ds.databases()],
            "lines": lambda: list(fed.catalog.database_rows("d")),
            "streamed records": lambda: [(d.containers, d.tag_stats) for d in fed.catalog.iter_databases("d")],
            "fsck": lambda: fsck(fed.store, checksums=False),
        }
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.update(outcomes(steps))
    finally:
        fed.close()
    return out


# what a SQLite cell may be made to hold: numbers past 64 bits go in as text, as SQLite keeps them
_VALUES = st.one_of(
    st.integers(-(1 << 63), (1 << 63) - 1),
    st.integers(-(1 << 70), 1 << 70).map(str),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.none(),
    st.sampled_from(["[]", "{}", "null", "[-1]", "[100000000000000000000]", "[1.5]", '["a"]', "[[1]]",
                     "[9223372036854775808]", "d/../x", "1,x", "[1e999]"]),
    st.binary(max_size=6),
)


def _json_leaf(value: Any) -> Any:
    return value if not isinstance(value, bytes) else value.hex()


@st.composite
def _record_text(draw: st.DrawFn, old: str) -> str:
    """A summary's record (JSON) with one leaf replaced."""
    doc = json.loads(old)
    node = doc
    while isinstance(node, list) and node:
        i = draw(st.integers(0, len(node) - 1))
        if not isinstance(node[i], list) or not node[i] or draw(st.booleans()):
            node[i] = _json_leaf(draw(_VALUES))
            break
        node = node[i]
    return json.dumps(doc, allow_nan=True)


@settings(max_examples=CASES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
@example(data=None)  # the federation as written: every path reads it
def test_a_cell_of_any_type_or_size_is_data_or_a_giod_error(
        base: Path, shape: tuple[dict[str, list[str]], list[str]], tmp_path_factory: pytest.TempPathFactory,
        data: Any) -> None:
    into = tmp_path_factory.mktemp("edited") / "fed"
    if data is None:
        shutil.copytree(base, into)
        assert set(_paths(into).values()) == {"ok"}
        return
    columns, texts = shape
    table = data.draw(st.sampled_from(TABLES), label="table")
    column = data.draw(st.sampled_from(columns[table]), label="column")
    row = data.draw(st.integers(0, 7), label="row")
    if column == "record" and data.draw(st.booleans()):
        value: Any = data.draw(_record_text(texts[row % len(texts)]), label="record")
    else:
        value = data.draw(_VALUES, label="value")
    if not _edited(base, into, table, column, row, value):
        return
    assert failures(_paths(into)) == {}


EDITS = {
    "cluster entries beyond 64 bits": "UPDATE containers SET cluster_entries = '[100000000000000000000]' WHERE id = 1",
    "events as text": "UPDATE databases SET n_events = 'many' WHERE id = 2",
    "first entry as a fraction": "UPDATE databases SET first_entry = 1.5 WHERE id = 2",
    "a size as text": "UPDATE containers SET size = 'big' WHERE id = 1",
    "a site id beyond 64 bits": "UPDATE replicas SET site_id = '18446744073709551616' WHERE rowid = 5",
    "a statistic as text": "UPDATE tag_stats SET min = 'low' WHERE rowid = 1",
    "a summary's database id as text": "UPDATE database_summaries SET database_id = '' WHERE rowid = 1",
    "a site id as bytes": "UPDATE replicas SET site_id = X'80' WHERE rowid = 1",
    "a text that is not UTF-8": "UPDATE database_summaries SET program = CAST(X'80' AS TEXT) WHERE rowid = 1",
    # a selection sized its entries by the count before reading them: 32 GiB asked for (a worker of the
    # test run was killed when a count of 2^30 was drawn)
    "events beyond memory": "UPDATE databases SET n_events = 4294967296 WHERE id = 1",
    "events and clusters beyond memory": "UPDATE databases SET n_events = 4294967296 WHERE id = 1; "
                                         "UPDATE containers SET cluster_entries = '[4294967296]' WHERE database_id = 1",
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_each_edit_that_crashed_a_path_is_refused(base: Path, tmp_path: Path, edit: str) -> None:
    shutil.copytree(base, tmp_path / "fed")
    with sqlite3.connect(tmp_path / "fed" / "catalog.sqlite") as con:
        con.executescript(EDITS[edit])
    outcome = _paths(tmp_path / "fed")
    assert failures(outcome) == {}
    assert "refused" in outcome.values()  # the value was met, and named


def test_the_dataset_row_with_text_in_a_number_column_is_a_catalog_error(base: Path, tmp_path: Path) -> None:
    shutil.copytree(base, tmp_path / "fed")
    with sqlite3.connect(tmp_path / "fed" / "catalog.sqlite") as con:
        con.execute("UPDATE datasets SET created = 'yesterday'")
    with giod.open(tmp_path / "fed") as fed, pytest.raises(CatalogError, match="malformed catalog row"):
        fed.dataset("d")


@pytest.mark.parametrize("entries", [[1 << 63], [-1], ["3"], [1.0], [True], "12"])
def test_a_server_s_cluster_entries_are_integers_of_64_bits(entries: Any) -> None:
    sent = {"id": 1, "database_id": 1, "name": "tag", "path": "d/x/tag.arrow", "checksum": "0", "size": 1,
            "cluster_entries": entries, "schema_id": 1, "created_version": 1}
    with pytest.raises(CatalogError, match="cluster_entries"):
        load(ContainerRecord, sent)
    assert load(ContainerRecord, {**sent, "cluster_entries": [(1 << 63) - 1, 0]}).cluster_entries == ((1 << 63) - 1, 0)


def test_a_source_whose_row_holds_text_for_a_number_is_refused_and_the_destination_unchanged(
        base: Path, tmp_path: Path) -> None:
    shutil.copytree(base, tmp_path / "src")
    with sqlite3.connect(tmp_path / "src" / "catalog.sqlite") as con:
        con.execute(EDITS["events as text"])
    with giod.open(tmp_path / "dst", create=True) as dst, giod.open(tmp_path / "src") as src:
        before = dst.version
        with pytest.raises(CatalogError, match="database 2 is not as written"):
            copy_dataset(src, dst, "d")
        assert dst.version == before and dst.datasets() == []


@pytest.mark.parametrize("change", [{"n_events": "many"}, {"n_events": -1}, {"first_entry": 1.5},
                                    {"first_entry": 1 << 64}, {"writer": 7}, {"parameters": []},
                                    {"idempotency_key": 3}, {"created": "now"}])
def test_a_server_s_database_record_holds_what_its_fields_say(base: Path, tmp_path: Path,
                                                             change: dict[str, Any]) -> None:
    shutil.copytree(base, tmp_path / "fed")
    with giod.open(tmp_path / "fed") as fed:
        sent = dump(fed.dataset("d").databases()[0])
    assert load(DatabaseRecord, sent).n_events == 20
    with pytest.raises(CatalogError, match=f"malformed DatabaseRecord: {next(iter(change))}"):
        load(DatabaseRecord, {**sent, **change})


@pytest.mark.parametrize("command", [["ls"], ["show", "d"], ["verify"]])
def test_the_command_line_names_the_row_in_one_line_and_exits_2(base: Path, tmp_path: Path,
                                                              command: list[str]) -> None:
    shutil.copytree(base, tmp_path / "fed")
    with sqlite3.connect(tmp_path / "fed" / "catalog.sqlite") as con:
        con.execute("UPDATE datasets SET created = 'x'")
    result = CliRunner().invoke(main, ["-f", str(tmp_path / "fed"), *command])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "error: malformed catalog row: dataset d is not as written: (1, 'd', 1, 3, 'x', None)"]


def test_fsck_reports_the_dataset_row_among_its_problems_and_exits_1(base: Path, tmp_path: Path) -> None:
    shutil.copytree(base, tmp_path / "fed")
    with sqlite3.connect(tmp_path / "fed" / "catalog.sqlite") as con:
        con.execute("UPDATE datasets SET created = 'x'")
    result = CliRunner().invoke(main, ["-f", str(tmp_path / "fed"), "fsck"])
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[0] == (
        "catalog: table datasets: malformed catalog row: dataset d is not as written: (1, 'd', 1, 3, 'x', None); "
        "each dataset is checked by name")
    assert "checked 8 files" in result.output  # the dataset's files all the same


def test_a_locked_catalog_is_tried_again_inside_the_rows_boundary(tmp_path: Path) -> None:
    """The boundary turns a row's conversion errors into CatalogErrors, not the driver's: a read that meets
    a locked SQLite file is tried again, not refused."""
    from giod.catalog import Catalog

    catalog = Catalog.open(f"sqlite:///{tmp_path / 'catalog.db'}")
    calls: list[int] = []

    def work(conn: Any) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise sqlite3.OperationalError("database is locked")
        return 7

    try:
        assert catalog._read(work) == 7 and len(calls) == 2
    finally:
        catalog.close()
