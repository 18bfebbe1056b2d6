"""A remote federation's nearline files, staged through its server's WLCG Tape REST API before a read.

A client of ``giod serve`` reaches the server's sites as ``…/files/<site>``
and cannot tell a disk site from a nearline one by its URL. Opening a remote
federation brings the server's nearline sites along (``nearline`` in
``/api/v1/federation``: no request of its own); for a server's site in a
federation of another place, its Tape REST discovery document
(``/.well-known/wlcg-tape-rest-api``, ``metadata.giod.nearline``) is asked,
once per :data:`KNOWN_S`. A read whose nearest copy of a file is on one of
them sends the server ONE bulk stage request for every such file it needs
(the server's library plans it by cartridge and position) and polls it: a
selection reads the databases already on disk first and each of the others as a
poll finds it staged (``StagePlan.arriving``); a copy polls until every file is
on disk, and only then reads.

Without this, the server stages a file when a read of it arrives, alone, and
answers "later" (503 with ``Retry-After``) until it is on disk, a mount, a
locate and the transfer later: the client waits, one file at a time (it no longer
meets the RPC timeout GIOD met on HPSS, but pays a mount per file). Every call
here answers at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from giod.catalog.records import ContainerRecord
from giod.errors import AuthError, NotFound, StorageError
from giod.storage.remote import RemoteSite
from giod.storage.tape.rest import TapeRestClient
from giod.store.snapshot import Store

__all__ = ["KNOWN_S", "RemoteRequest", "has_remote_sites", "nearline_names", "stage_remote"]

KNOWN_S = 60.0  # seconds a server's list of nearline sites is kept
POLL_FIRST_S, POLL_MAX_S = 0.05, 2.0  # polls start quick (a staged file answers at once) and slow down

log = logging.getLogger("giod.tier")
Progress = Callable[[int, int, float], None]

_known: dict[tuple[str, str | None], tuple[float, frozenset[str]]] = {}
_known_lock = threading.Lock()


@dataclass
class RemoteRequest:
    """One bulk stage request at a server: its id and the number of files it holds."""

    client: TapeRestClient
    id: str
    files: int
    paths: dict[str, str] = field(default_factory=dict)  # the request's paths (/<site>/<file>) -> container path
    pending: set[str] = field(default_factory=set)  # container paths neither on disk nor failed at the last poll

    def poll(self) -> tuple[int, int, int, float]:
        """``(on disk, settled, total, estimated seconds)`` from one poll; settled: on disk or failed.

        ``pending`` is left with the container paths still on their way."""
        state = self.client.poll(self.id)
        files = state.get("files", [])
        on_disk = sum(bool(f.get("onDisk")) for f in files)
        failed = sum(not f.get("onDisk") and f.get("state") in ("FAILED", "CANCELLED") for f in files)
        self.pending = {self.paths.get(str(f.get("path")), str(f.get("path"))) for f in files
                        if not f.get("onDisk") and f.get("state") not in ("FAILED", "CANCELLED")}
        return on_disk, on_disk + failed, len(files), float(state.get("estimatedSeconds") or 0.0)

    def release(self) -> int:
        """End every pin of the request at the server (the copies stay until evicted)."""
        try:
            return self.client.delete(self.id)
        except NotFound:  # forgotten already (its pins ended)
            return 0


def has_remote_sites(store: Store) -> bool:
    """Whether any site is a giod server's (asking it costs nothing: the URLs say so)."""
    return any(s.url.startswith(("http://", "https://")) and "/files/" in s.url for s in store.sites())


def nearline_names(site: RemoteSite, catalog: object = None) -> frozenset[str]:
    """The nearline sites of ``site``'s server: as the opening of a remote federation on it told
    (``catalog``, no request), else asked once per :data:`KNOWN_S` (none without a Tape REST endpoint)."""
    ep = site.endpoint
    told = getattr(catalog, "nearline_sites", None) if getattr(catalog, "url", None) == ep.base else None
    if isinstance(told, frozenset):
        return told
    key = (ep.base, ep.token)
    now = time.monotonic()
    with _known_lock:
        hit = _known.get(key)
    if hit is not None and now - hit[0] < KNOWN_S:
        return hit[1]
    probe = TapeRestClient(ep.base, ep.token, verify=ep.verify)
    try:
        doc = probe.get(f"{ep.base}/.well-known/wlcg-tape-rest-api")
    except (NotFound, AuthError, StorageError):
        doc = {}  # a server without the API (or refusing it to this caller): nothing staged through it
    names: set[str] = set()
    endpoints = doc.get("endpoints") if isinstance(doc, dict) else None  # another server's document: checked
    for e in endpoints if isinstance(endpoints, list) else []:
        meta = e.get("metadata") if isinstance(e, dict) else None
        ours = meta.get("giod") if isinstance(meta, dict) else None
        found = ours.get("nearline") if isinstance(ours, dict) else None
        names |= {n for n in found if isinstance(n, str)} if isinstance(found, list) else set()
    with _known_lock:
        _known[key] = (now, frozenset(names))
    return frozenset(names)


def stage_remote(store: Store, containers: Iterable[ContainerRecord], *, pin_s: float | None = None,
                 progress: Progress | None = None, wait: bool = True) -> list[RemoteRequest]:
    """Stage, through their servers, the ``containers`` whose nearest copy is on a server's nearline site:
    one bulk request per server, polled until every file is on disk (or failed); the requests made.

    ``progress(on_disk, total, eta_s)`` is told after each poll (default: a log line when it changes).
    ``wait=False``: polled once, not waited for; each request's ``pending`` says what is still on its way
    (a reader takes what is on disk first: ``StagePlan.arriving``).
    A server that refuses the caller staging (an anonymous reader) is left to stage on demand.
    """
    by_id = {s.id: s for s in store.sites()}
    wanted: dict[str, tuple[RemoteSite, dict[str, str]]] = {}  # server -> a site of it, API path -> path
    for c in containers:
        held = [by_id[i] for i in c.site_ids if i in by_id]
        if not held:
            continue
        nearest = store.reads.order(held)[0]
        if not nearest.url.startswith(("http://", "https://")):
            continue
        site = store.site(nearest.name)
        if not isinstance(site, RemoteSite) or site.remote_name not in nearline_names(site, store.catalog):
            continue
        wanted.setdefault(site.endpoint.base, (site, {}))[1][f"/{site.remote_name}/{c.path}"] = c.path
    made: list[RemoteRequest] = []
    for base, (site, asked) in wanted.items():
        paths = list(asked)
        client = TapeRestClient(f"{base}/api/v1/tape", site.endpoint.token, verify=site.endpoint.verify)
        lifetime = None if pin_s is None else max(0, round(pin_s))
        try:
            rid = client.stage(paths, lifetime_s=lifetime)
        except AuthError as exc:
            log.warning("%s: cannot stage %d files from tape (%s); they are read one at a time", base, len(paths), exc)
            continue
        made.append(RemoteRequest(client, rid, len(paths), asked, set(asked.values())))
    told: list[tuple[int, int]] = []

    def tell(done: int, total: int, eta: float) -> None:
        if progress is not None:
            progress(done, total, eta)
        elif told[-1:] != [(done, total)]:
            log.info("staging from tape: %d/%d files on disk, the rest in ~%.0f s (tape time)", done, total, eta)
        told[:] = [(done, total)]

    pause = POLL_FIRST_S
    while made:
        done = settled = total = 0
        eta = 0.0
        for r in made:
            d, s, t, e = r.poll()
            done, settled, total, eta = done + d, settled + s, total + t, max(eta, e)
        tell(done, total, eta)
        if settled >= total or not wait:  # a failed file is the read's to report
            break
        time.sleep(pause)  # a poll loop: the server's library delivers on its own clock
        pause = min(POLL_MAX_S, pause * 1.5)
    return made
