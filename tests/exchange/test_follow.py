"""Subscriptions: a destination kept in step by the source's change feed (file watch, server, LISTEN/NOTIFY)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import awkward as ak
import pytest

import giod
from giod.exchange import copy_dataset, follow, open_feed
from giod.exchange.feed import FileFeed, PostgresFeed, ServerFeed
from giod.server.app import ServerThread, create_app
from giod.testing import synthetic
from tests.exchange.conftest import DEADLINE, commit, in_thread, make_daq, wait_for


def _follow_and_commit(src: giod.Federation, dst: giod.Federation, writer: giod.Federation) -> None:
    """Follow ``src`` into ``dst`` in a thread; commit through ``writer``; wait until ``dst`` has it all.

    The copies land one database at a time: each wait is for a whole state of the source, never a
    count the copy only passes through."""
    stop = threading.Event()
    thread, errors = in_thread(lambda: follow(src, dst, "raw", stop=stop))

    def copied(n: int) -> bool:
        assert not errors, errors  # the follower died: say why now, not at the deadline
        return "raw" in dst.datasets() and len(dst.dataset("raw")) == n

    try:
        first = len(writer.dataset("raw"))
        wait_for(dst, lambda: copied(first), "the first copy")
        for seed in (21, 22):
            commit(writer, 1, seed=seed)
            n = len(writer.dataset("raw"))
            wait_for(dst, lambda n=n: copied(n), f"the copy of {n} events")
    finally:
        stop.set()
        thread.join(DEADLINE)
    assert not thread.is_alive() and not errors, errors
    assert ak.array_equal(dst.dataset("raw").read(), writer.dataset("raw").read())


def test_follow_a_local_federation(daq: giod.Federation, reco: giod.Federation) -> None:
    probe = open_feed(daq)
    assert isinstance(probe, FileFeed)
    probe.close()
    _follow_and_commit(daq, reco, daq)


def test_follow_a_server_and_copy_into_a_server(daq: giod.Federation, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    dst_root = tmp_path / "reco-server"
    giod.open(dst_root, create=True).close()
    monkeypatch.delenv("GIOD_TOKEN", raising=False)
    with ServerThread(create_app(str(daq.root), anonymous_read=True)) as src_url, \
            ServerThread(create_app(str(dst_root))) as dst_url:
        admin = giod.open(dst_root).catalog.create_token("write", note="exchange tests")[1]
        src = giod.open(src_url)
        dst = giod.open(dst_url, token=admin)
        probe = open_feed(src)
        assert isinstance(probe, ServerFeed)
        probe.close()
        local_dst = giod.open(dst_root)
        stop = threading.Event()
        thread, errors = in_thread(lambda: follow(src, dst, "raw", stop=stop))
        try:
            wait_for(local_dst, lambda: "raw" in local_dst.datasets() and len(local_dst.dataset("raw")) == 120,
                     "the first copy")
            commit(daq, 1, seed=31)
            wait_for(local_dst, lambda: len(local_dst.dataset("raw")) == 160, "the copy of the new commit")
        finally:
            stop.set()
            thread.join(DEADLINE)
        assert not thread.is_alive() and not errors, errors
        assert ak.array_equal(local_dst.dataset("raw").read(), daq.dataset("raw").read())
        # the cursor lives in the destination server's catalog
        again = copy_dataset(src, dst, "raw")
        assert again.since is not None and again.copied == 0


def test_the_feed_route_streams_versions(daq: giod.Federation) -> None:
    import urllib3

    with ServerThread(create_app(str(daq.root))) as url:
        r = urllib3.PoolManager().request("GET", f"{url}/api/v1/feed", preload_content=True)
        assert r.status == 401  # a token, like every other route
        token = daq.catalog.create_token("read", note="feed")[1]
        r = urllib3.PoolManager().request("GET", f"{url}/api/v1/feed?after=-1",
                                          headers={"authorization": f"Bearer {token}"}, preload_content=False)
        assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream")
        seen: list[int] = []
        buffer = b""
        while len(seen) < 2:
            buffer += r.read1(4096)
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                for line in event.decode().splitlines():
                    if line.startswith("data:"):
                        seen.append(int(line.split('"version": ')[1].rstrip("}")))
                        if len(seen) == 1:
                            commit(daq, 1, seed=41)  # the next event is this commit's version
        r.shutdown()
        r.close()
        assert seen[0] < seen[1] == daq.version


@pytest.fixture
def pg_daq(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[giod.Federation]:
    from tests.conftest import fresh_postgres_schema

    url = fresh_postgres_schema(request)
    fed = giod.open(url, create=True)
    fed.add_site("daq-disk", str(tmp_path / "daq-disk"))
    fed.create_dataset("raw", synthetic.schema())
    commit(fed, 3, seed=1)
    yield fed
    fed.close()


@pytest.mark.postgres
def test_follow_a_postgresql_catalog_through_listen_notify(pg_daq: giod.Federation, reco: giod.Federation
                                                           ) -> None:
    feed = open_feed(pg_daq)
    assert isinstance(feed, PostgresFeed)
    v = pg_daq.version
    thread, errors = in_thread(lambda: commit(pg_daq, 1, seed=51))
    assert feed.wait(v, DEADLINE) > v  # woken by the NOTIFY of the commit's transaction
    thread.join()
    feed.close()
    assert not errors
    _follow_and_commit(pg_daq, reco, pg_daq)


def test_cli_follow_ends_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    daq = make_daq(tmp_path / "daq")
    reco = giod.open(tmp_path / "reco", create=True)
    argv = [sys.executable, "-c", "from giod.cli import main; main()", "copy", "raw", "--from", str(daq.root),
            "--to", str(reco.root), "--follow"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        wait_for(reco, lambda: "raw" in reco.datasets() and len(reco.dataset("raw")) == 120, "the first copy")
        commit(daq, 1, seed=61)
        wait_for(reco, lambda: len(reco.dataset("raw")) == 160, "the followed commit")
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, err
    assert "stopped: 4 databases (160 events) copied while following" in out
    assert "Traceback" not in err


def test_the_feed_watcher_stops_with_the_server(daq: giod.Federation) -> None:
    import urllib3

    token = daq.catalog.create_token("read", note="feed")[1]
    app = create_app(str(daq.root))
    with ServerThread(app) as url:
        r = urllib3.PoolManager().request("GET", f"{url}/api/v1/feed?after=-1&seconds=0.2",
                                          headers={"authorization": f"Bearer {token}"})
        assert r.status == 200 and b"data:" in r.data
        watch = app.state.giod.extra["feed"]
        assert watch.thread.is_alive()
    watch.thread.join(DEADLINE)
    assert not watch.thread.is_alive()  # no thread left watching the catalog of a server that is gone
    assert "feed" not in app.state.giod.extra
