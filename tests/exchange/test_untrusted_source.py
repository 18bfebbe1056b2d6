"""A source federation is untrusted: paths, provenance and refusals of ``giod copy``.

The malicious source is made the way any peer can make one: its own catalog
rewritten (here with SQL on its SQLite file), checksums kept consistent.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import awkward as ak
import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.errors import DataError, GiodError, StorageError
from giod.exchange import copy_dataset, provenance_chain
from giod.testing import synthetic
from tests.exchange.conftest import commit, make_daq


def _sql(fed: giod.Federation, statement: str, *args: object) -> None:
    assert fed.root is not None
    with sqlite3.connect(fed.root / "catalog.sqlite") as conn:
        conn.execute(statement, args)


def _files(fed: giod.Federation) -> dict[str, bytes]:
    assert fed.root is not None
    data = fed.root / "data"
    return {p.relative_to(data).as_posix(): p.read_bytes() for p in data.rglob("*") if p.is_file()}


def _move(fed: giod.Federation, old: str, new: str) -> None:
    """Move a container's file at the source and rewrite its catalog row to match: a consistent lie."""
    assert fed.root is not None
    (fed.root / "data" / new).parent.mkdir(parents=True, exist_ok=True)
    shutil.move(fed.root / "data" / old, fed.root / "data" / new)
    _sql(fed, "UPDATE containers SET path = ? WHERE path = ?", new, old)


def test_a_path_outside_the_source_dataset_is_refused_before_any_file_is_written(tmp_path: Path) -> None:
    dst = giod.open(tmp_path / "dst", create=True)
    skim = dst.create_dataset("raw_skim", synthetic.schema())
    commit(dst, 1, seed=7, dataset="raw_skim")
    victim = skim.databases()[0].container("tag")
    assert victim is not None and victim.path.startswith("raw_skim/")
    before = _files(dst)

    src = make_daq(tmp_path / "src", databases=1)
    tag = src.dataset("raw").databases()[0].container("tag")
    assert tag is not None
    _move(src, tag.path, victim.path)  # the source's raw database names the destination's raw_skim file
    src = giod.open(src.root)

    with pytest.raises(DataError, match="raw_skim/.* is not below"):
        copy_dataset(src, dst, "raw")
    dst = giod.open(dst.root)
    assert _files(dst) == before  # nothing written, the registered file of raw_skim untouched
    assert dst.datasets() == ["raw_skim"]  # and no target dataset left behind
    assert len(dst.dataset("raw_skim").read()) == 40


def test_a_registered_file_of_another_database_is_never_replaced(tmp_path: Path) -> None:
    daq = make_daq(tmp_path / "daq", databases=1)
    dst = giod.open(tmp_path / "dst", create=True)
    copy_dataset(daq, dst, "raw")
    mine = dst.dataset("raw").read()
    before = _files(dst)

    # another source whose writer chose the same folder (a collision, or on purpose), with other events
    other = make_daq(tmp_path / "other", databases=1)
    commit(other, 1, seed=99)
    first = daq.dataset("raw").databases()[0].containers[0].path.split("/")[1]
    theirs = other.dataset("raw").databases()[1]
    for c in theirs.containers:
        folder = c.path.split("/")[1]
        _move(other, c.path, c.path.replace(folder, first))
    other = giod.open(other.root)
    with pytest.raises(DataError, match="already registered"):
        copy_dataset(other, dst, "raw", as_name="raw")
    dst = giod.open(dst.root)
    assert _files(dst) == before
    assert ak.array_equal(dst.dataset("raw").read(), mine)


def test_a_provenance_without_its_fields_is_refused_and_show_survives_one_in_a_catalog(tmp_path: Path) -> None:
    src = giod.open(tmp_path / "src", create=True)
    ds = src.create_dataset("raw", synthetic.schema())
    with ds.writer(database_events=40, parameters={"copied_from": {"from": None}}) as w:
        w.append(synthetic.events(40, seed=1))
    dst = giod.open(tmp_path / "dst", create=True)
    with pytest.raises(DataError, match="'federation' must be a string"):
        copy_dataset(src, dst, "raw")
    assert dst.datasets() == []

    # what a catalog already holds (an older giod copied it) is shown, not a KeyError
    db = ds.databases()[0]
    out = CliRunner().invoke(main, ["show", "raw", "--database", str(db.id), "-f", str(src.root)])
    assert out.exit_code == 0, out.output
    assert "copied from ?: dataset ?, db? at version ?" in out.output
    assert provenance_chain({"copied_from": [1]}) == [] and provenance_chain({"copied_from": {"from": 3}})


def _deep(depth: int) -> dict[str, object]:
    step: dict[str, object] | None = None
    for i in range(depth):
        step = {"federation": "f", "dataset": "raw", "database": i, "version": i, "from": step}
    assert step is not None
    return step


@pytest.mark.parametrize("depth", [100, 5000])
def test_a_deep_provenance_is_refused_and_leaves_nothing(tmp_path: Path, depth: int) -> None:
    src = make_daq(tmp_path / "src", databases=2)
    # built as text: Python's json cannot even write it nested this deep
    text = '{"copied_from": ' + '{"federation": "f", "dataset": "raw", "database": 1, "version": 1, "from": ' \
        * depth + "null" + "}" * depth + "}"
    _sql(src, "UPDATE databases SET parameters = ? WHERE id = (SELECT max(id) FROM databases)", text)
    src = giod.open(src.root)
    dst = giod.open(tmp_path / "dst", create=True)
    with pytest.raises(GiodError) as refused:
        copy_dataset(src, dst, "raw")
    assert not isinstance(refused.value, RecursionError)
    assert "federations" in str(refused.value) or "cannot be read" in str(refused.value)
    dst = giod.open(dst.root)
    assert dst.datasets() == [] and _files(dst) == {}  # the first database was not copied either


def test_a_chain_within_bounds_still_copies(tmp_path: Path) -> None:
    src = giod.open(tmp_path / "src", create=True)
    ds = src.create_dataset("raw", synthetic.schema())
    with ds.writer(database_events=40, parameters={"copied_from": _deep(5), "run": {"period": "2024A"}}) as w:
        w.append(synthetic.events(40, seed=1))
    dst = giod.open(tmp_path / "dst", create=True)
    copy_dataset(src, dst, "raw")
    db = dst.dataset("raw").databases()[0]
    assert len(provenance_chain(db.parameters)) == 6 and db.parameters["run"] == {"period": "2024A"}


def test_a_first_copy_that_fails_leaves_no_dataset_and_no_file(tmp_path: Path) -> None:
    src = make_daq(tmp_path / "src", databases=2)
    assert src.root is not None
    last = src.dataset("raw").databases()[-1].containers[-1]
    damaged = src.root / "data" / last.path
    damaged.write_bytes(b"\0" * damaged.stat().st_size)  # the source serves bytes its catalog does not vouch for
    dst = giod.open(tmp_path / "dst", create=True)
    with pytest.raises(StorageError):
        copy_dataset(src, dst, "raw", as_name="copy")
    dst = giod.open(dst.root)
    # the first database, copied before the failure, stays (whole, and known by its key); nothing else does
    assert [db.n_events for db in dst.dataset("copy").databases()] == [40]
    registered = {c.path for db in dst.dataset("copy").databases() for c in db.containers}
    assert set(_files(dst)) == registered
    # a refusal on the first database: no dataset at all
    dst2 = giod.open(tmp_path / "dst2", create=True)
    first = src.dataset("raw").databases()[0].containers[0]
    (src.root / "data" / first.path).write_bytes(b"\0" * first.size)
    with pytest.raises(StorageError):
        copy_dataset(src, dst2, "raw")
    dst2 = giod.open(dst2.root)
    assert dst2.datasets() == [] and _files(dst2) == {}
