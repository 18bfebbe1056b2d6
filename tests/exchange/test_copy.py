"""Dataset exchange between two federations: incremental copies, skims, provenance, schemas, bad input."""

from __future__ import annotations

import threading
from pathlib import Path

import awkward as ak
import numpy as np
import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.errors import NotFound, SchemaError
from giod.exchange import copy_dataset, provenance_chain
from giod.read import tagindex
from giod.schema import Schema
from tests.exchange.conftest import PER_DATABASE, commit

SKIM = "njets >= 3 and ht > 150"


def _files(fed: giod.Federation, dataset: str) -> list[Path]:
    assert fed.root is not None
    return sorted(p for p in (fed.root / "data" / dataset).rglob("*") if p.is_file())


def test_a_copy_is_incremental_and_lands_each_database_once(daq: giod.Federation, reco: giod.Federation) -> None:
    first = copy_dataset(daq, reco, "raw")
    assert (first.copied, first.already, first.since) == (3, 0, None)
    assert first.files_copied == sum(len(db.containers) for db in daq.dataset("raw").databases())
    assert ak.array_equal(reco.dataset("raw").read(), daq.dataset("raw").read())

    again = copy_dataset(daq, reco, "raw")  # nothing new: nothing copied, nothing read
    assert (again.copied, again.already, again.files_copied, again.bytes) == (0, 0, 0, 0)
    assert again.since == first.until == daq.version

    commit(daq, 2, seed=5)
    third = copy_dataset(daq, reco, "raw")
    assert (third.copied, third.already, third.since) == (2, 0, first.until)
    assert len(reco.dataset("raw")) == 5 * PER_DATABASE
    assert ak.array_equal(reco.dataset("raw").read(), daq.dataset("raw").read())
    # the catalog verified and registered what the source recorded, byte for byte
    got = {c.checksum for db in reco.dataset("raw").databases() for c in db.containers}
    assert got == {c.checksum for db in daq.dataset("raw").databases() for c in db.containers}


def test_concurrent_copies_register_each_database_once(daq: giod.Federation, reco: giod.Federation) -> None:
    commit(daq, 3, seed=2)
    barrier = threading.Barrier(3)
    reports, errors = [], []

    def run() -> None:
        try:
            other = giod.open(reco.root)  # a process of its own would open its own catalog too
            barrier.wait()
            reports.append(copy_dataset(daq, other, "raw"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sum(r.copied for r in reports) == 6
    assert len(reco.dataset("raw").databases()) == 6
    assert ak.array_equal(reco.dataset("raw").read(), daq.dataset("raw").read())


def test_a_skim_copies_only_passing_events_as_new_databases(daq: giod.Federation, reco: giod.Federation) -> None:
    report = copy_dataset(daq, reco, "raw", select=SKIM, as_name="dijet")
    expected = daq.dataset("raw").select(SKIM).read()
    assert 0 < len(expected) < len(daq.dataset("raw"))
    assert report.events == len(expected) and report.files_copied == 0
    assert ak.array_equal(reco.dataset("dijet").read(), expected)
    # a skim is a database of the destination's own: selections and relations work on it
    assert ak.array_equal(reco.dataset("dijet").select("ht > 300").read(), daq.dataset("raw").select(
        f"({SKIM}) and ht > 300").read())
    assert reco.dataset("dijet").read().jets.tracks.pt.ndim == 3
    for db in reco.dataset("dijet").databases():
        assert db.program == "giod.exchange"
        assert db.parameters["copied_from"]["selection"] == SKIM
    # and it is incremental too
    commit(daq, 2, seed=9)
    copy_dataset(daq, reco, "raw", select=SKIM, as_name="dijet")
    assert ak.array_equal(reco.dataset("dijet").read(), daq.dataset("raw").select(SKIM).read())


def test_a_skim_of_nothing_registers_nothing_and_moves_the_cursor(daq: giod.Federation, reco: giod.Federation
                                                                   ) -> None:
    report = copy_dataset(daq, reco, "raw", select="ht < 0", as_name="none")
    assert (report.copied, report.empty, report.until) == (0, 3, daq.version)
    assert len(reco.dataset("none")) == 0
    assert copy_dataset(daq, reco, "raw", select="ht < 0", as_name="none").empty == 0  # not read again


def test_chosen_containers_only(daq: giod.Federation, reco: giod.Federation) -> None:
    copy_dataset(daq, reco, "raw", containers=["tag", "reco"], as_name="slim")
    for db in reco.dataset("slim").databases():
        assert {c.name for c in db.containers} == {"tag", "tag-index", "reco"}
    assert ak.array_equal(reco.dataset("slim").read(["jets", "ht"]), daq.dataset("raw").read(["jets", "ht"]))
    assert not [p for p in _files(reco, "slim") if "raw." in p.name]
    with pytest.raises(NotFound, match="did you mean 'reco'"):
        copy_dataset(daq, reco, "raw", containers=["rceo"])


def test_a_renamed_copy_selects_through_its_tag_index(daq: giod.Federation, reco: giod.Federation,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tagindex, "MAX_SHARE", 1.0)  # small databases: let the index answer
    copy_dataset(daq, reco, "raw", as_name="renamed")
    source, copied = daq.dataset("raw"), reco.dataset("renamed")
    sel = copied.select(SKIM)
    for db in copied.databases():
        tag = db.container("tag")
        assert tag is not None and not tag.path.startswith("raw/")
        assert sel._indexed(db, tag) is not None  # the index names the source's path, and still serves
    np.testing.assert_array_equal(sel.entries(), source.select(SKIM).entries())


def test_provenance_chains_back_to_the_daq_federation(daq: giod.Federation, reco: giod.Federation,
                                                      tmp_path: Path) -> None:
    copy_dataset(daq, reco, "raw")
    ana = giod.open(tmp_path / "analysis", create=True)
    copy_dataset(reco, ana, "raw", select=SKIM, as_name="dijet")
    db = ana.dataset("dijet").databases()[0]
    chain = provenance_chain(db.parameters)
    assert [(s["federation"], s["dataset"]) for s in chain] == [(str(reco.root), "raw"), (str(daq.root), "raw")]
    reco_db = reco.catalog.database(chain[0]["database"])
    assert reco_db.parameters["copied_from"]["database"] == chain[1]["database"]
    raw_db = daq.catalog.database(chain[1]["database"])
    assert raw_db.created_version == chain[1]["version"] and raw_db.program == "daq"

    out = CliRunner().invoke(main, ["show", "dijet", "--database", str(db.id), "-f", str(ana.root)])
    assert out.exit_code == 0, out.output
    assert f"copied from {reco.root}: dataset raw, db{reco_db.id}" in out.output
    assert f"copied from {daq.root}: dataset raw, db{raw_db.id} at version {raw_db.created_version}" in out.output
    assert SKIM in out.output


def test_schemas_evolve_by_the_rules_or_are_refused(daq: giod.Federation, reco: giod.Federation) -> None:
    copy_dataset(daq, reco, "raw")
    # the source moves to a compatible new model (a tag added, with a default): the destination follows
    text = daq.dataset("raw").schema.to_yaml()
    assert "ht: float32" in text and "reco: [jets, tracks]" in text
    newer = Schema.from_text(text.replace("ht: float32", "ht: float64"))  # widening: allowed
    daq.evolve_dataset("raw", newer)
    commit(daq, 1, seed=3)
    copy_dataset(daq, reco, "raw")
    assert reco.dataset("raw").schema.fingerprint == newer.fingerprint
    assert ak.array_equal(reco.dataset("raw").read(), daq.dataset("raw").read())

    # a destination dataset whose model moved a collection to another container is refused, nothing copied
    other = giod.open(Path(str(reco.root)).parent / "other", create=True)
    moved = text.replace("raw.calo: [cells]", "raw.calo: [cells, jets]").replace("reco: [jets, tracks]",
                                                                                 "reco: [tracks]")
    other.create_dataset("raw", Schema.from_text(moved))
    before = other.version
    with pytest.raises(SchemaError, match="no evolution of one another"):
        copy_dataset(daq, other, "raw")
    assert other.version == before


def test_cli_copy_and_its_bad_input(daq: giod.Federation, reco: giod.Federation) -> None:
    run = CliRunner().invoke
    out = run(main, ["copy", "raw", "--from", str(daq.root), "--to", str(reco.root), "--as", "raw2"])
    assert out.exit_code == 0, out.output
    assert "3 databases (120 events) copied" in out.output
    out = run(main, ["copy", "raw", "--from", str(daq.root), "--to", str(reco.root), "--as", "raw2"])
    assert "0 databases (0 events) copied" in out.output
    for args, message in [
        (["copy", "nope", "--from", str(daq.root), "--to", str(reco.root)], "nope"),
        (["copy", "raw", "--from", str(daq.root) + "x", "--to", str(reco.root)], "no giod federation"),
        (["copy", "raw", "--from", str(daq.root), "--to", str(reco.root), "--select", "ht >"], "error:"),
        (["copy", "raw", "--from", str(daq.root), "--to", str(reco.root), "--as", "../x"], "dataset"),
        (["copy", "raw", "--from", str(daq.root), "--to", str(reco.root), "--containers", ","], "names nothing"),
        (["copy", "raw", "--from", str(daq.root), "--to", str(daq.root)], "into itself"),
    ]:
        out = run(main, args)
        assert out.exit_code == 2, (args, out.output)
        assert message in out.output and "Traceback" not in out.output
        assert len(out.output.strip().splitlines()) == 1, out.output
    assert reco.datasets() == ["raw2"]  # nothing half-made by the refusals


def test_containers_a_later_pass_adds_follow_the_copies(tmp_path: Path) -> None:
    from giod.testing import synthetic

    daq = giod.open(tmp_path / "daq", create=True)
    ds = daq.create_dataset("raw", synthetic.schema())
    events = synthetic.events(80, seed=4)
    with ds.writer(database_events=40) as w:
        w.append(events[["hits", "cells"]])  # the DAQ writes raw data only
    reco = giod.open(tmp_path / "reco", create=True)
    assert copy_dataset(daq, reco, "raw").copied == 2
    with ds.add_containers() as p:  # reconstruction adds its container to each database, later
        for db in ds.databases():
            p.write(db, events[db.first_entry:db.stop_entry][["tracks", "jets"]])
    report = copy_dataset(daq, reco, "raw")
    assert (report.copied, report.extended, report.files_copied) == (0, 2, 2)
    assert [sorted(c.name for c in db.containers) for db in reco.dataset("raw").databases()] == \
        [["raw.calo", "raw.tracker", "reco"]] * 2
    assert ak.array_equal(reco.dataset("raw").read(["jets", "hits"]), daq.dataset("raw").read(["jets", "hits"]))
    assert copy_dataset(daq, reco, "raw").extended == 0


def test_a_later_copy_lists_only_what_changed(daq: giod.Federation, reco: giod.Federation,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from giod.catalog import Catalog

    copy_dataset(daq, reco, "raw")
    commit(daq, 1, seed=9)
    listed: list[int] = []
    real = Catalog.databases

    def spy(self: Catalog, *args: object, **kwargs: object) -> list:
        out = real(self, *args, **kwargs)  # type: ignore[arg-type]
        listed.append(len(out))
        return out

    monkeypatch.setattr(Catalog, "databases", spy)
    report = copy_dataset(daq, reco, "raw")
    assert report.copied == 1
    assert listed and max(listed) == 1  # the new database, not the dataset: a follower's pass stays cheap
    assert ak.array_equal(reco.dataset("raw").read(), daq.dataset("raw").read())


def test_changes_and_keys_through_a_server(daq: giod.Federation, monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib3

    from giod.catalog import remote
    from giod.server.app import ServerThread, create_app

    first = daq.version
    commit(daq, 2, seed=11)
    local = daq.catalog
    keys = [db.idempotency_key for db in local.databases("raw")][:3]
    token = local.create_token("read", note="changes")[1]
    with ServerThread(create_app(str(daq.root))) as url:
        far = giod.open(url, token=token).catalog
        assert far.databases("raw", changed_since=first) == local.databases("raw", changed_since=first)
        assert far.databases("raw", keys=keys) == local.databases("raw", keys=keys)
        assert far.databases("raw", keys=[]) == []
        monkeypatch.setattr(remote, "MAX_KEYS", 1)  # more keys than a request carries: the snapshot, kept here
        assert far.databases("raw", keys=keys) == local.databases("raw", keys=keys)
        query = "&".join(f"key=k{i}" for i in range(1001))
        r = urllib3.PoolManager().request("GET", f"{url}/api/v1/datasets/raw/databases?{query}",
                                          headers={"authorization": f"Bearer {token}"})
        assert r.status == 400 and b"at most 1000" in r.data
        r = urllib3.PoolManager().request("GET", f"{url}/api/v1/datasets/raw/databases?since=soon",
                                          headers={"authorization": f"Bearer {token}"})
        assert r.status == 400
