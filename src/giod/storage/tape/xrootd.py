"""XRootD ``prepare`` for a ``root://`` site whose files may be on tape behind its server (EOS with CTA, dCache).

A ``root://`` site says so in its URL: ``root://host//path?nearline=1``
(:func:`is_nearline`; the query is giod's, never sent to the server). For
such a site a job asks for every file it needs in ONE ``prepare`` request
with the stage flag (:func:`stage`, as ``xrdfs host prepare -s`` does), then
waits until ``stat`` no longer says any of them is offline (:func:`wait`);
:func:`evict` tells the server the job is done with them. A read of a file
still offline would be held by the server with ``kXR_wait`` answers one file
at a time: the stage request lets the server's tape system plan all of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from giod.errors import NotFound, StorageError
from giod.storage.xrootd import TIMEOUT, XRootDSite

__all__ = ["evict", "is_nearline", "offline", "stage", "wait"]

POLL_FIRST_S, POLL_MAX_S = 0.05, 5.0


def is_nearline(url: str) -> bool:
    """Whether a site URL is a ``root://`` site marked ``nearline=1`` (its files may be on tape)."""
    parts = urlsplit(url)
    if parts.scheme not in ("root", "roots", "xroot", "xroots"):
        return False
    return dict(parse_qsl(parts.query)).get("nearline", "").lower() in ("1", "true", "yes")


def _flags() -> Any:
    from XRootD.client.flags import PrepareFlags

    return PrepareFlags


def stage(site: XRootDSite, paths: Sequence[str]) -> str:
    """One ``prepare`` request with the stage flag for every file of ``paths``; the server's request id."""
    if not paths:
        return ""
    status, answer = site.fs.prepare([site._full(p) for p in paths], _flags().STAGE, timeout=TIMEOUT)
    if not status.ok:
        raise StorageError(f"site {site.name}: prepare (stage) of {len(paths)} files: {status.message.strip()}")
    return bytes(answer or b"").decode(errors="replace").strip("\x00 \n")


def evict(site: XRootDSite, paths: Sequence[str]) -> None:
    """Tell the server the staged copies of ``paths`` are no longer needed (``prepare`` with the evict flag)."""
    if paths:
        status, _ = site.fs.prepare([site._full(p) for p in paths], _flags().EVICT, timeout=TIMEOUT)
        if not status.ok:
            raise StorageError(f"site {site.name}: prepare (evict) of {len(paths)} files: {status.message.strip()}")


def offline(site: XRootDSite, paths: Sequence[str]) -> list[str]:
    """The files of ``paths`` that ``stat`` says are offline (on tape only); NotFound for a missing one."""
    from XRootD.client.flags import StatInfoFlags

    out = []
    for p in paths:
        status, info = site.fs.stat(site._full(p), timeout=TIMEOUT)
        site._check(status, "cannot stat", p)
        if info is None:
            raise NotFound(f"file {p} is missing on site {site.name}")
        if int(info.flags) & int(StatInfoFlags.OFFLINE):
            out.append(p)
    return out


def wait(site: XRootDSite, paths: Sequence[str], *,
         progress: Callable[[int, int, float], None] | None = None) -> None:
    """Return when no file of ``paths`` is offline (polled; no timeout while the server answers)."""
    pending = list(paths)
    pause = POLL_FIRST_S
    while True:
        pending = offline(site, pending)
        if progress is not None:
            progress(len(paths) - len(pending), len(paths), 0.0)  # XRootD gives no estimate
        if not pending:
            return
        time.sleep(pause)  # a poll loop: the server's tape system delivers on its own time
        pause = min(POLL_MAX_S, pause * 1.5)
