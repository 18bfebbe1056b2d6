"""Databases moved to a nearline site by a tier rule, read back through one planned bulk request."""

from __future__ import annotations

import awkward as ak
import pytest

import giod
from giod.errors import ConfigError
from giod.storage.tape import NearlineSite
from giod.tier import apply_tier_rules, move_to_nearline, stage_databases


def _archive(fed: giod.Federation) -> NearlineSite:
    site = fed.store.site("archive")
    assert isinstance(site, NearlineSite)
    return site


def _on_tape_only(fed: giod.Federation) -> None:
    lib = _archive(fed).library
    for path in lib.paths():
        lib.evict(path)
    lib.unload()


def test_a_tier_rule_moves_old_databases_to_tape_and_off_disk(fed):
    with pytest.raises(ConfigError, match="not nearline"):
        fed.catalog.add_tier_rule("qcd", "local")
    rule = fed.catalog.add_tier_rule("qcd", "archive", older_than=3600)
    assert fed.catalog.tier_rules() == [rule]
    assert apply_tier_rules(fed.store).dropped == 0  # nothing is an hour old yet
    report = apply_tier_rules(fed.store, now=10**10)
    dbs = fed.catalog.databases("qcd")
    n_files = sum(len(db.containers) for db in dbs)
    assert report.dropped == report.copied == n_files and not report.failed
    lib = _archive(fed).library
    written = lib.counters()
    # on tape before any disk copy went: written a mount per cartridge (4 over 2 drives), in drive time
    assert lib.queued() == {} and written["written_files"] == n_files and written["mounts"] == 4
    assert report.tape_s == pytest.approx(written["write_s"] / 2, rel=0.5) and report.tape_s > 2 * 30
    states = fed.catalog.replica_states("qcd")
    assert all([r.site for r in reps] == ["archive"] for reps in states.values())
    local = fed.store.site("local")
    assert not [f for f in local.walk() if f.path.startswith("qcd/")]  # the disk copies are gone
    assert apply_tier_rules(fed.store, now=10**10).dropped == 0  # done once


def test_a_selection_over_tape_reads_the_same_events_with_one_mount_per_cartridge(fed):
    whole = fed["qcd"].select("njets >= 2").read(["jets", "ht"])
    move_to_nearline(fed.store, "qcd", "archive")
    _on_tape_only(fed)
    lib = _archive(fed).library
    before = lib.counters()["mounts"]
    sel = fed["qcd"].select("njets >= 2")
    got = sel.read(["jets", "ht"])
    assert ak.to_list(got) == ak.to_list(whole)
    assert sel.staging is not None and len(sel.staging.requests) == 1
    assert lib.counters()["mounts"] - before == 4  # 4 cartridges, each mounted once
    assert sel.staging.progress().on_disk == sel.staging.progress().total


def test_one_file_at_a_time_mounts_far_more(fed, monkeypatch):
    move_to_nearline(fed.store, "qcd", "archive")
    _on_tape_only(fed)
    monkeypatch.setenv("GIOD_TAPE_BULK_STAGING", "false")
    lib = _archive(fed).library
    before = lib.counters()["mounts"]
    got = fed["qcd"].select("njets >= 2").read(["jets", "ht"])
    assert len(got) > 0
    assert lib.counters()["mounts"] - before >= 16  # consecutive databases sit on different cartridges


def test_a_plan_orders_databases_by_arrival_and_staged_ones_come_first(fed):
    move_to_nearline(fed.store, "qcd", "archive")
    _on_tape_only(fed)
    dbs = fed.catalog.databases("qcd")
    lib = _archive(fed).library
    lib.wait([c.path for c in dbs[-1].containers])  # the last database is on disk already
    plan = stage_databases(fed.store, dbs)
    ordered = plan.order(dbs, lambda db: db)
    assert ordered[0].id == dbs[-1].id
    arrivals = [plan.arrival(db) for db in ordered]
    assert arrivals == sorted(arrivals) and arrivals[0] == 0.0
    progress = plan.progress()
    assert progress.total == sum(len(db.containers) for db in dbs) and progress.eta_s > 0
    assert plan.release() == progress.total


def test_an_online_copy_is_read_before_the_tape_one(fed):
    whole = fed["qcd"].read(["ht"])
    from giod.replication.copy import replicate

    replicate(fed.catalog, fed.store.site, "qcd", "archive")  # copies on both tiers
    _on_tape_only(fed)
    lib = _archive(fed).library
    before = lib.counters()["mounts"]  # of the writes to tape
    assert ak.to_list(fed["qcd"].read(["ht"])) == ak.to_list(whole)
    assert lib.counters()["mounts"] == before


def _njets(events) -> int:
    return int(ak.sum(ak.num(events.jets)))


@pytest.mark.parametrize("scheduler", ["sync", pytest.param("processes:2", marks=pytest.mark.slow)])
def test_a_map_over_tape_stages_once_and_adds_up_the_same(fed, scheduler):
    from giod import distributed

    whole = distributed.map_selection(fed["qcd"].select("njets >= 1"), _njets, columns=["jets"], scheduler="sync")
    move_to_nearline(fed.store, "qcd", "archive")
    _on_tape_only(fed)
    lib = _archive(fed).library
    before = lib.counters()["mounts"]
    got = distributed.map_selection(fed["qcd"].select("njets >= 1"), _njets, columns=["jets"], scheduler=scheduler)
    assert got == whole > 0
    assert lib.counters()["mounts"] - before == 4


def test_selection_stage_from_python_pins_and_releases(fed):
    move_to_nearline(fed.store, "qcd", "archive")
    _on_tape_only(fed)
    sel = fed["qcd"].select("ht > 0")
    plan = sel.stage(["ht"], pin_s=7200)
    first = plan.progress()
    assert first.on_disk == 0 and first.eta_s > 0
    assert all(c.name in ("tag", "tag-index") for db in sel.databases() for c in db.containers
               if c.path in plan.ready)
    sel.read(["ht"])
    assert plan.progress().on_disk == first.total
    assert plan.release() == first.total


def test_fsck_checks_the_tape_copies_without_staging_and_finds_a_damaged_one(fed):
    from giod.store.consistency import fsck

    move_to_nearline(fed.store, "qcd", "archive")
    _on_tape_only(fed)
    lib = _archive(fed).library
    before = lib.counters()["mounts"]
    report = fsck(fed.store)
    assert not report.problems and report.files_checked == len(lib.paths())
    assert lib.counters()["mounts"] == before  # checked where it lies, not staged
    victim = lib.paths()[3]
    data = bytearray((lib.tape / victim).read_bytes())
    data[100] ^= 0xFF
    (lib.tape / victim).write_bytes(bytes(data))
    assert [(p.kind, p.path) for p in fsck(fed.store).problems] == [("checksum", victim)]


def test_the_summary_tells_files_queued_for_tape_from_those_on_it(fed):
    from giod.replication.copy import replicate
    from giod.tier import tier_summary

    local = fed.store.site("local")
    replicate(fed.catalog, fed.store.site, "qcd", "archive")  # queued: nobody flushed
    for db in fed.catalog.databases("qcd"):
        for c in db.containers:
            fed.catalog.drop_replica_kept_at(c.id, "local", "archive")
            local.remove(c.path)
    dbs = fed.catalog.databases("qcd")
    n = sum(len(db.containers) for db in dbs)
    assert [line.split(" (")[0] for line in tier_summary(fed.store, dbs)] == ["archive"]
    assert f"{n} files in the buffer, queued for tape" in tier_summary(fed.store, dbs)[0]
    _archive(fed).library.flush()
    assert f"{n} files staged" in tier_summary(fed.store, dbs)[0]
