"""The change feed: ``GET /api/v1/feed``, server-sent events, one per new federation version.

A follower (``giod copy --follow``, ``giod replicator --follow`` on another
host) keeps one request open and is told each version as soon as the
server's catalog commits it, whoever committed it: the server learns of
commits from the catalog's own change feed (the file watched for SQLite,
LISTEN/NOTIFY for PostgreSQL; ``giod.exchange.feed``), in one thread shared
by every client. A comment line every ``KEEPALIVE`` seconds keeps proxies
from closing an idle stream.

A token restricted to one dataset is told only the versions that changed that
dataset: the latest of them, once the federation is past the one it knows.
A stream lasts at most ``feed_max_seconds`` (its client reconnects with
``after=``); one token holds at most ``feed_streams_per_token`` streams at once
(429 past them), and a client that takes nothing for ``send_timeout_seconds``
is disconnected (``giod.server.streams``).

Events::

    event: version
    data: {"version": 42}
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from giod.errors import GiodError
from giod.server.state import need, state
from giod.server.streams import PacedStream

router = APIRouter(prefix="/api/v1", tags=["feed"])

log = logging.getLogger("giod.server")

KEEPALIVE = 15.0  # seconds between two comment lines of an idle stream


class VersionWatch:
    """The latest version of the served federation, and the coroutines waiting for the next one."""

    def __init__(self, fed: Any):
        self.fed = fed
        self.latest = int(fed.version)
        self.lock = threading.Lock()
        self.waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="giod-feed", daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        from giod.exchange.feed import open_feed

        feed = None
        try:
            while not self.stop.is_set():
                try:
                    feed = feed or open_feed(self.fed, stop=self.stop)
                    self._saw(feed.wait(self.latest, KEEPALIVE))
                except GiodError as exc:  # the catalog away for a moment: listen again
                    log.warning("change feed: %s", exc)
                    if feed is not None:
                        feed.close()
                    feed = None
                    self.stop.wait(1.0)
        finally:
            if feed is not None:
                feed.close()

    def close(self) -> None:
        """Stop watching (the server shuts down); the thread ends within a second."""
        self.stop.set()

    def _saw(self, version: int) -> None:
        with self.lock:
            if version <= self.latest:
                return
            self.latest = version
            waiting, self.waiters = self.waiters, set()
        for loop, fut in waiting:
            loop.call_soon_threadsafe(_wake, fut)

    async def next(self, after: int, timeout: float) -> int:
        """The latest version once it exceeds ``after``, or after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self.lock:
            if self.latest > after:
                return self.latest
            self.waiters.add((loop, fut))
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            with self.lock:
                self.waiters.discard((loop, fut))
        return self.latest


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


_WATCH_LOCK = threading.Lock()


def close_watch(st: Any) -> None:
    """Stop the feed's watcher of a server's state, if a client ever asked for the feed."""
    with _WATCH_LOCK:
        found = st.extra.pop("feed", None)
    if found is not None:
        found.close()


def _watch(request: Request) -> VersionWatch:
    st = state(request)
    with _WATCH_LOCK:
        found = st.extra.get("feed")
        if found is None:
            found = st.extra["feed"] = VersionWatch(st.federation)
    return found


def _latest_of(request: Request, dataset: str, after: int) -> int | None:
    """The latest version above ``after`` that changed ``dataset``; None if there is none."""
    found = state(request).federation.catalog.dataset_versions(dataset, 1, after=after)
    return found[0].version if found else None


@router.get("/feed", summary="New federation versions as server-sent events (text/event-stream)",
            responses={429: {"description": "the token holds its most streams (feed_streams_per_token)"}})
async def feed(request: Request,
               after: int = Query(-1, ge=-1, description="The last version the client knows: "
                                  "the first event comes once the federation is past it."),
               seconds: float | None = Query(None, gt=0, le=86_400, description="End the stream after this "
                                             "many seconds (default, and at most: the server's feed_max_seconds; "
                                             "a client reconnects with after=).")
               ) -> Response:
    who = await run_in_threadpool(need, request, "read")
    st = state(request)
    bounds = st.streams
    holder = bounds.feed.take(who, request.client and (request.client.host, request.client.port))
    try:
        watch = await run_in_threadpool(_watch, request)
    except BaseException:
        bounds.feed.give_back(holder)
        raise
    loop = asyncio.get_running_loop()
    lifetime = bounds.feed_seconds if seconds is None else min(seconds, bounds.feed_seconds)
    end = loop.time() + lifetime
    mine = who.restricted

    async def events() -> AsyncIterator[str]:
        seen = known = after  # known: the federation's version the stream has looked at
        yield "retry: 1000\n\n"
        while not await request.is_disconnected():
            left = min(KEEPALIVE, end - loop.time())
            if left <= 0:
                return
            latest = await watch.next(known, left)
            version = seen
            if latest > known:
                known = version = latest
                if mine is not None:  # a restricted token hears of its own dataset's versions only
                    own = await run_in_threadpool(_latest_of, request, mine, seen)
                    version = seen if own is None else own
            if version > seen:
                seen = version
                yield f"event: version\ndata: {json.dumps({'version': version})}\n\n"
            else:
                yield ": keepalive\n\n"

    return PacedStream(events(), send_timeout=bounds.send_timeout, release=lambda: bounds.feed.give_back(holder),
                       media_type="text/event-stream", headers={"cache-control": "no-store", "x-accel-buffering": "no"})
