"""The simulated tape library: placement, planned staging, the clock, pins, eviction, recovery."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from giod.errors import ConfigError, NotFound
from giod.storage.site import open_site
from giod.storage.tape import LibrarySettings, NearlineSite, TapeLibrary
from giod.storage.tape.library import READ_PIN_S

FAST = LibrarySettings(time_scale=0.0, write_pool=4, drives=2)


def _write(lib: TapeLibrary, path: str, data: bytes) -> None:
    target = lib.buffer / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    lib.archive(path)


def _library(tmp_path, n=16, size=1000, **changes) -> TapeLibrary:
    lib = TapeLibrary(tmp_path / "lib", FAST.with_(**changes))
    for i in range(n):
        _write(lib, f"ds/f{i:03d}", bytes([i]) * size)
    lib.flush()
    for i in range(n):  # everything on tape only and the drives empty, as after a long time
        lib.evict(f"ds/f{i:03d}")
    lib.unload()
    return lib


def _since(lib: TapeLibrary, before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in lib.counters().items()}


def test_files_go_round_the_write_pool_at_growing_positions(tmp_path):
    lib = _library(tmp_path, n=8, size=100)
    states = lib.files()
    carts = [states[f"ds/f{i:03d}"].cartridge for i in range(8)]
    assert len(set(carts)) == 4 and carts[:4] == carts[4:]
    assert [states[f"ds/f{i:03d}"].position for i in (0, 4)] == [0, 100]
    assert all(s.state == "tape" for s in states.values())


def test_a_bulk_request_mounts_each_cartridge_once_and_reads_in_position_order(tmp_path):
    lib = _library(tmp_path, n=16)
    paths = [f"ds/f{i:03d}" for i in reversed(range(16))]  # asked in the worst order
    before = lib.counters()
    req = lib.stage(paths)
    c = _since(lib, before)
    assert c["mounts"] == 4 and c["unmounts"] == 2  # 4 cartridges on 2 drives
    s = FAST
    # one drive: two cartridges, each 4 files in a row: 2 mounts, 1 unmount, 2 locates of none, 8 KB
    assert req.eta_s == pytest.approx(2 * s.mount_s + s.unmount_s + 8 * 1000 / s.rate)
    by_cart: dict[str, list] = {}
    for f in req.files:
        by_cart.setdefault(f.cartridge, []).append(f)
    for files in by_cart.values():
        files.sort(key=lambda f: f.position)
        assert [f.ready for f in files] == sorted(f.ready for f in files)
    assert not req.done
    lib.wait(paths)
    assert lib.request(req.id).done
    assert (lib.buffer / "ds/f003").read_bytes() == bytes([3]) * 1000


def test_on_demand_in_job_order_mounts_once_per_file(tmp_path):
    lib = _library(tmp_path, n=16)
    before = lib.counters()
    for i in range(16):
        lib.wait([f"ds/f{i:03d}"])  # a job asking for one file at a time
    assert _since(lib, before)["mounts"] == 16  # consecutive files are on different cartridges


def test_the_clock_jumps_at_scale_zero_and_sleeps_otherwise(tmp_path):
    lib = _library(tmp_path, n=1)
    before = lib.now()
    lib.wait(["ds/f000"])
    assert lib.now() - before == pytest.approx(FAST.mount_s + 1000 / FAST.rate)
    slow = _library(tmp_path / "slow", n=1, time_scale=1e-3)  # a 30 s mount takes 30 ms
    t0, s0 = time.monotonic(), slow.now()
    slow.wait(["ds/f000"])
    assert time.monotonic() - t0 >= FAST.mount_s * 1e-3
    assert slow.now() - s0 >= FAST.mount_s


def test_pins_keep_staged_copies_and_eviction_takes_the_unpinned_first(tmp_path):
    lib = _library(tmp_path, n=6, buffer_bytes=3000)
    pinned = lib.stage(["ds/f000", "ds/f001", "ds/f002"], pin_s=1e6)
    lib.wait(["ds/f000", "ds/f001", "ds/f002"])
    lib.wait(["ds/f003", "ds/f004"])  # staged for a reader: pinned a short while only
    assert lib.files()["ds/f003"].state == "staged"
    lib.advance(lib.now() + 2 * READ_PIN_S)
    lib.refresh()  # over the buffer: the unpinned go, the least recently used first
    states = lib.files()
    assert [states[f"ds/f{i:03d}"].state for i in range(5)] == ["staged"] * 3 + ["tape"] * 2
    assert states["ds/f000"].pinned_until is not None
    assert not (lib.buffer / "ds/f003").exists()
    assert lib.release(pinned.id) == 3
    lib.wait(["ds/f005"])
    assert lib.counters()["buffer_used"] <= 3000
    with pytest.raises(NotFound):
        lib.release(pinned.id)


def test_unknown_files_and_bad_settings_are_refused(tmp_path):
    lib = _library(tmp_path, n=1)
    with pytest.raises(NotFound):
        lib.stage(["ds/f000", "ds/nope"])
    assert lib.files()["ds/f000"].state == "tape"  # nothing of the refused request was planned
    with pytest.raises(ConfigError):
        LibrarySettings.from_query("drives=0")
    with pytest.raises(ConfigError):
        LibrarySettings.from_query("tracks=4")
    assert LibrarySettings.from_query("drives=3&time_scale=0").drives == 3


def test_recover_finishes_what_a_kill_left(tmp_path):
    lib = _library(tmp_path, n=3)
    # an archive killed after the tape copy landed, before its row
    (lib.tape / "ds/new").write_bytes(b"x" * 10)
    # an eviction killed after its row said tape, before the copy went
    (lib.buffer / "ds/f001").write_bytes(bytes([1]) * 1000)
    # a staging killed after its request was planned: the drive finishes it all the same
    lib.stage(["ds/f002"])
    done = TapeLibrary(lib.root, lib.settings).recover()
    assert done["archived"] == ["ds/new"] and "ds/f001" in done["dropped"]
    assert not (lib.buffer / "ds/f001").exists()
    assert lib.file("ds/new").size == 10
    lib.wait(["ds/f002"])
    assert (lib.buffer / "ds/f002").read_bytes() == bytes([2]) * 1000


def test_the_site_reads_through_staging_and_lists_its_files(tmp_path):
    site = open_site("arch", f"tape://{tmp_path}/site?time_scale=0&drives=2")
    assert isinstance(site, NearlineSite)
    pending = site.create("ds/a")
    pending.write(b"hello tape")
    pending.publish()
    site.library.evict("ds/a")
    assert site.states(["ds/a"])["ds/a"].state == "tape"
    with site.open("ds/a") as fh:
        assert fh.read() == b"hello tape"
    assert site.size("ds/a") == 10 and [f.path for f in site.walk()] == ["ds/a"]
    site.remove("ds/a")
    with pytest.raises(NotFound):
        site.open("ds/a")
    assert not os.listdir(site.library.tape)


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 5000), min_size=1, max_size=12), drives=st.integers(1, 4),
       pool=st.integers(1, 5), order=st.randoms(use_true_random=False))
def test_planned_staging_never_beats_the_physical_limit_nor_misses_it_by_more_than_a_cartridge(
        tmp_path_factory, sizes, drives, pool, order):
    """Whatever the sizes and placement, the plan ends no sooner than the work spread over the drives
    allows, and (each cartridge mounted once, read in order) no later than that plus one cartridge."""
    root = tmp_path_factory.mktemp("lib")
    lib = TapeLibrary(root, LibrarySettings(time_scale=0.0, drives=drives, write_pool=pool))
    paths = []
    for i, size in enumerate(sizes):
        _write(lib, f"d/{i}", b"z" * size)
        paths.append(f"d/{i}")
    lib.flush()
    for p in paths:
        lib.evict(p)
    lib.unload()
    order.shuffle(paths)
    before = lib.counters()
    req = lib.stage(paths)
    c = _since(lib, before)
    s = lib.settings
    carts = {f.cartridge for f in req.files}
    assert c["mounts"] == len(carts)
    work = c["mounts"] * s.mount_s + c["unmounts"] * s.unmount_s + sum(sizes) / s.rate
    assert req.eta_s >= work / min(drives, len(carts)) - 1e-9
    per_cart = s.mount_s + s.unmount_s + max(sizes) * len(sizes) / s.rate
    assert req.eta_s <= work / min(drives, len(carts)) + per_cart + 1e-9


def test_writes_are_queued_then_written_a_mount_per_cartridge_in_drive_time(tmp_path):
    lib = TapeLibrary(tmp_path / "lib", FAST.with_(buffer_bytes=1000))
    for i in range(8):  # round 4 cartridges: 2 files each, one after the other
        _write(lib, f"ds/f{i:03d}", bytes([i]) * 1000)
    assert lib.queued() == dict.fromkeys((f"ds/f{i:03d}" for i in range(8)), None)
    lib.refresh()  # over the buffer, but a file not on tape yet is kept
    assert all((lib.buffer / f"ds/f{i:03d}").exists() for i in range(8))
    c0, t0 = lib.counters(), lib.now()
    end = lib.flush()
    c, s = _since(lib, c0), FAST
    assert c["mounts"] == 4 and c["unmounts"] == 2 and c["written_files"] == 8 and c["locates"] == 0
    # each drive: two cartridges, each two files in a row from the start
    assert end - t0 == pytest.approx(2 * s.mount_s + s.unmount_s + 4 * 1000 / s.rate)
    assert c["write_s"] == pytest.approx(2 * (end - t0))
    assert lib.now() == end and lib.queued() == {}
    lib.refresh()  # written: evictable now
    assert lib.counters()["buffer_used"] <= 1000


def test_a_second_batch_locates_to_where_each_cartridge_was_filled_up_to(tmp_path):
    lib = TapeLibrary(tmp_path / "lib", FAST.with_(write_pool=2))
    for i in range(4):
        _write(lib, f"a/{i}", b"a" * 1000)
    lib.flush()
    lib.unload()  # as after a while: the next batch mounts afresh
    for i in range(2):
        _write(lib, f"b/{i}", b"b" * 1000)
    c0, t0 = lib.counters(), lib.now()
    end = lib.flush()
    c, s = _since(lib, c0), FAST
    assert c["mounts"] == 2 and c["locates"] == 0  # 2 KB in: read through rather than located
    assert end - t0 == pytest.approx(s.mount_s + 3 * 1000 / s.rate)  # 2 KB passed over, 1 KB written


def test_a_stage_request_waits_behind_the_writes_queued_before_it(tmp_path):
    lib = _library(tmp_path, n=4, drives=1, write_pool=1)
    _write(lib, "ds/late", b"x" * 1000)  # queued, not written yet
    req = lib.stage(["ds/f000"])
    s = FAST
    written = lib.queued()["ds/late"]
    assert written is not None  # the request planned the queue first
    assert req.files[0].ready > written  # on the one drive, after the write
    assert lib.counters()["mounts"] == 2  # the first batch's, the write's; the read finds the cartridge loaded
    # back from the end of the write (5 KB in) to the first file
    assert req.files[0].ready - written == pytest.approx(s.locate(5000) + 1000 / s.rate, abs=1e-9)


def test_copies_not_read_for_unread_s_are_released_and_recently_read_ones_kept(tmp_path):
    lib = _library(tmp_path, n=4, unread_s=3600.0)
    lib.stage(["ds/f003"], pin_s=1e6)  # pinned: kept however long unread
    lib.wait([f"ds/f{i:03d}" for i in range(4)])  # each staged copy counts as read when it lands
    lib.advance(lib.now() + 1800)
    lib.touch("ds/f000")  # read half-way
    lib.advance(lib.now() + 1801)
    states = lib.files()
    assert [states[f"ds/f{i:03d}"].state for i in range(4)] == ["staged", "tape", "tape", "staged"]
    assert not (lib.buffer / "ds/f001").exists()
    _write(lib, "ds/new", b"n" * 10)  # not on tape yet: kept in the buffer however long unread
    lib.advance(lib.now() + 10**6)
    assert lib.files(["ds/new"])["ds/new"].state == "staged"
    assert LibrarySettings.from_query("unread_s=7200").unread_s == 7200
    for query in ("unread_s=-1", "unread_s=7d", "unread_s=nan"):
        with pytest.raises(ConfigError, match="unread_s"):
            LibrarySettings.from_query(query)


@settings(max_examples=20, deadline=None)
@given(reads=st.lists(st.tuples(st.integers(0, 5), st.floats(0, 5000)), max_size=15),
       unread=st.floats(100, 4000))
def test_after_any_reads_exactly_the_copies_unread_for_unread_s_are_gone(tmp_path_factory, reads, unread):
    """Whatever the reads and their times, the unpinned staged copies left are those read (or landed)
    within the last ``unread_s``, and every such copy is still there."""
    lib = _library(tmp_path_factory.mktemp("lib"), n=6, unread_s=unread)
    paths = [f"ds/f{i:03d}" for i in range(6)]
    lib.stage(paths, pin_s=0)
    lib.wait(paths)
    lib.advance(lib.now() + READ_PIN_S)  # past the readers' short pins
    last = {p: f.ready for p, f in lib.files().items()}
    for index, later in reads:
        lib.advance(lib.now() + later)
        path = paths[index]
        if lib.files([path])[path].state != "staged":
            lib.wait([path])  # released meanwhile: staged again, read on arrival
            lib.advance(lib.now() + READ_PIN_S)
            lib.files()
        lib.touch(path)
        last[path] = lib.now()
    now = lib.now()
    states = lib.files()
    for path in paths:
        assert (states[path].state == "staged") == (last[path] > now - unread), path
