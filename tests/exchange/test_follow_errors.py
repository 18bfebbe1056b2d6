"""A follower stops at a permanent error with its message, and backs off (exponentially, capped) from a transient
one; a skim whose chosen containers miss a relation's target is refused before it starts."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

import giod
from giod.cli import main
from giod.errors import ConfigError, StorageError
from giod.exchange import Backoff, follow
from giod.exchange.follow import permanent
from tests.exchange.conftest import DEADLINE


def test_a_skim_missing_a_relation_target_is_refused_before_it_starts(daq: giod.Federation,
                                                                      reco: giod.Federation) -> None:
    with pytest.raises(ConfigError, match=r"tracks\.hits .* raw\.tracker.*add raw\.tracker to --containers"):
        giod.exchange.copy_dataset(daq, reco, "raw", select="njets >= 2", containers=["tag", "reco"], as_name="dj")
    assert reco.datasets() == []
    report = giod.exchange.copy_dataset(daq, reco, "raw", select="njets >= 2",
                                        containers=["tag", "reco", "raw.tracker"], as_name="dj")
    assert report.copied > 0
    assert reco.dataset("dj").read().tracks.hits.x.ndim == 3  # the relation resolves in the skim


def test_follow_stops_at_a_permanent_error_with_its_message(daq: giod.Federation, reco: giod.Federation) -> None:
    assert daq.root is not None and reco.root is not None
    argv = [sys.executable, "-c", "from giod.cli import main; main()", "copy", "raw", "--from", str(daq.root),
            "--to", str(reco.root), "--select", "njets >= 2", "--containers", "tag,reco", "--as", "dijet",
            "--follow"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=DEADLINE,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "add raw.tracker to --containers" in proc.stderr + proc.stdout
    assert "trying again" not in proc.stderr and "Traceback" not in proc.stderr
    assert giod.open(reco.root).datasets() == []


def test_errors_are_told_apart() -> None:
    assert permanent(ConfigError("bad option"))
    assert not permanent(StorageError("site away"))


def test_a_transient_error_backs_off_exponentially_up_to_a_cap(daq: giod.Federation, reco: giod.Federation
                                                               ) -> None:
    assert daq.root is not None
    away = daq.root / "data"
    away.rename(daq.root / "elsewhere")  # the source's only site is away: every copy fails, for a while
    clock = [0.0]
    attempts: list[float] = []
    stop = threading.Event()

    def pause(seconds: float) -> bool:  # the follower's clock: virtual, so the test takes no time
        attempts.append(clock[0])
        clock[0] += seconds
        if clock[0] > 600:
            stop.set()
        return stop.is_set()

    follow(daq, reco, "raw", stop=stop, backoff=Backoff(first=1.0, cap=60.0), pause=pause)
    gaps = [b - a for a, b in zip(attempts, attempts[1:], strict=False)]
    assert gaps[:7] == [1, 2, 4, 8, 16, 32, 60] and set(gaps[7:]) == {60}
    assert len(attempts) <= 6 + 600 // 60 + 1  # in ten minutes: the doubling, then one a minute
    assert reco.datasets() == []  # no copy got anywhere, and none left an empty dataset


def test_the_default_backoff_is_bounded() -> None:
    b = Backoff()
    delays = [b.delay(n) for n in range(1, 40)]
    assert delays[0] > 0 and delays == sorted(delays) and max(delays) == b.cap <= 300


def test_a_skim_waits_for_each_database_to_be_reconstructed(tmp_path: Path) -> None:
    from giod.testing import synthetic
    from tests.exchange.conftest import in_thread, wait_for

    daq = giod.open(tmp_path / "daq", create=True)
    ds = daq.create_dataset("raw", synthetic.schema())
    events = synthetic.events(80, seed=4)
    with ds.writer(database_events=40) as w:
        w.append(events[["hits", "cells"]])  # raw data only: no tags to select on yet
    reco = giod.open(tmp_path / "reco", create=True)
    report = giod.exchange.copy_dataset(daq, reco, "raw", select="njets >= 2", as_name="dj")
    assert report.pending == "source database 1 has no container tag yet" and report.copied == 0
    out = CliRunner().invoke(main, ["copy", "raw", "--from", str(daq.root), "--to", str(reco.root),
                                    "--select", "njets >= 2", "--as", "dj"])
    assert out.exit_code == 2 and "no container tag yet; run it again once it has" in out.output

    tries: list[int] = []
    stop = threading.Event()
    thread, errors = in_thread(lambda: follow(daq, reco, "raw", select="njets >= 2", as_name="dj", stop=stop,
                                              on_copy=lambda r: tries.append(r.source_version)))
    try:
        first = daq.version
        with ds.add_containers() as p:  # reconstruction: tags and reco for each database, one commit each
            for db in ds.databases():
                p.write(db, events[db.first_entry:db.stop_entry][["tracks", "jets", *ds.schema.tags]])
        expected = len(daq.dataset("raw").select("njets >= 2"))
        wait_for(reco, lambda: "dj" in reco.datasets() and len(reco.dataset("dj")) == expected, "the skim")
    finally:
        stop.set()
        thread.join(DEADLINE)
    assert not errors, errors
    # one try per source version at most: woken by the source's commits, never in a loop
    assert len(tries) <= daq.version - first + 1 and len(set(tries)) == len(tries), tries


def test_following_an_sqlite_catalog_without_watchfiles_names_the_extra(daq: giod.Federation,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """watchfiles comes with giod[server]: a core install that follows an SQLite catalog is told so."""
    from giod.errors import MissingDependency
    from giod.exchange.feed import open_feed

    monkeypatch.setitem(sys.modules, "watchfiles._rust_notify", None)  # as if it were not installed
    with pytest.raises(MissingDependency, match=r"watchfiles.*pip install 'giod\[server\]'"):
        open_feed(daq)
