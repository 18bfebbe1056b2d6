"""Bulk staging for a job: every nearline file it needs asked for at once, and its partitions ordered by arrival.

A selection, a ``giod.distributed.map_selection``, an export or a copy knows the
databases it will read before it reads any. :func:`stage_databases` finds the
containers whose nearest good copy is on a nearline site, sends each such
site ONE stage request for all of them (the library plans it by cartridge
and position over its drives), and returns a :class:`StagePlan` that orders
the databases by when their files are on disk: those already staged first,
then in the order the drives deliver them. The job then never waits for one
file at a time and never times out; :meth:`StagePlan.progress` says how far
staging is and how long the rest will take.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from giod.catalog.records import ContainerRecord, DatabaseRecord
from giod.storage.kind import Site
from giod.storage.tape.site import NearlineSite
from giod.store.snapshot import Store
from giod.tier.remote import POLL_FIRST_S, POLL_MAX_S, RemoteRequest, has_remote_sites, stage_remote

__all__ = ["StagePlan", "StageProgress", "has_nearline", "may_stage", "nearline_holder", "stage_containers",
           "stage_databases"]

T = TypeVar("T")
log = logging.getLogger("giod.tier")


@dataclass(frozen=True)
class StageProgress:
    """Files of a plan on disk, of all, and the simulated seconds until the last arrives."""

    on_disk: int
    total: int
    eta_s: float

    def __str__(self) -> str:
        return f"{self.on_disk}/{self.total} files on disk, the rest in ~{self.eta_s:.0f} s (tape time)"


@dataclass
class StagePlan:
    """The stage requests of one job and when each of its nearline files is on disk."""

    requests: dict[str, str] = field(default_factory=dict)  # site -> request id
    ready: dict[str, float] = field(default_factory=dict)  # container path -> simulated arrival (0: on disk)
    sites: dict[str, NearlineSite] = field(default_factory=dict)
    paths: dict[str, list[str]] = field(default_factory=dict)  # site -> its paths in this plan
    remote: list[RemoteRequest] = field(default_factory=list)  # requests at servers (``pending``: still on the way)
    prepared: list[tuple[Site, list[str], str]] = field(default_factory=list)  # root:// site, paths, request id
    #: told while :meth:`arriving` waits for files a server is still staging (default: a log line)
    waiting: Callable[[StageProgress], None] | None = None

    @property
    def empty(self) -> bool:
        return not self.requests and not self.remote and not self.prepared

    def arrival(self, db: DatabaseRecord, names: Iterable[str] | None = None) -> float:
        """When every (named) container of ``db`` is on disk; 0 for one that needs no staging, infinite for
        one a server was still staging at the last poll (its servers give no time per file)."""
        wanted = None if names is None else set(names)
        paths = [c.path for c in db.containers if wanted is None or c.name in wanted]
        if self.remote and any(p in r.pending for r in self.remote for p in paths):
            return math.inf
        return max([self.ready.get(p, 0.0) for p in paths] + [0.0])

    def on_the_way(self, path: str) -> bool:
        """Whether a server was still staging ``path`` at the last poll (not to be fetched ahead yet)."""
        return any(path in r.pending for r in self.remote)

    def arriving(self, items: Sequence[T], db_of: Callable[[T], DatabaseRecord],
                 names: Iterable[str] | None = None) -> Iterator[T]:
        """``items`` as their database's files reach disk: those on disk first, in :meth:`order`; then, for
        files a server stages, each as soon as a poll finds its files on disk, while the rest arrive.

        Files of a local library are read when their turn comes (the read waits for its own file); the
        polls start quick and slow down (``giod.tier.remote``), and never give up while the server answers.
        """
        fixed = None if names is None else list(names)
        pending = self.order(items, db_of, fixed)
        pause = POLL_FIRST_S
        told: tuple[int, int] | None = None
        while pending:
            ready = [it for it in pending if self.arrival(db_of(it), fixed) != math.inf]
            if ready:
                chosen = {id(it) for it in ready}
                pending = [it for it in pending if id(it) not in chosen]
                yield from ready
                pause = POLL_FIRST_S
                continue
            progress = self._poll_remote()
            if not any(self.arrival(db_of(it), fixed) != math.inf for it in pending):
                if self.waiting is not None:
                    self.waiting(progress)
                elif told != (progress.on_disk, progress.total):
                    log.info("staging from tape: %s", progress)
                told = (progress.on_disk, progress.total)
                time.sleep(pause)  # the server's library delivers on its own clock
                pause = min(POLL_MAX_S, pause * 1.5)

    def _poll_remote(self) -> StageProgress:
        on_disk = total = 0
        eta = 0.0
        for r in self.remote:
            d, _settled, t, e = r.poll()
            on_disk, total, eta = on_disk + d, total + t, max(eta, e)
        return StageProgress(on_disk, total, eta)

    def order(self, items: Sequence[T], db_of: Callable[[T], DatabaseRecord],
              names: Iterable[str] | None = None) -> list[T]:
        """``items`` by the arrival of their database's files (staged first; ties keep their order)."""
        fixed = None if names is None else list(names)
        return sorted(items, key=lambda it: self.arrival(db_of(it), fixed))

    def progress(self) -> StageProgress:
        """How many files are on disk now, and the estimate for the rest."""
        on_disk = total = 0
        eta = 0.0
        for name, rid in self.requests.items():
            state = self.sites[name].library.request(rid)
            total += len(state.files)
            on_disk += sum(f.on_disk for f in state.files)
            eta = max(eta, state.eta_s)
        far = self._poll_remote()
        on_disk, total, eta = on_disk + far.on_disk, total + far.total, max(eta, far.eta_s)
        if self.prepared:
            from giod.storage.tape import xrootd

            for site, paths, _rid in self.prepared:
                total += len(paths)
                on_disk += len(paths) - len(xrootd.offline(site, paths))  # type: ignore[arg-type]
        return StageProgress(on_disk, total, eta)

    def release(self) -> int:
        """End the pins of this plan's requests (the copies stay until evicted); the number of pins ended."""
        ended = (sum(self.sites[name].library.release(rid) for name, rid in self.requests.items())
                 + sum(r.release() for r in self.remote))
        if self.prepared:
            from giod.storage.tape import xrootd

            for site, paths, _rid in self.prepared:
                xrootd.evict(site, paths)  # type: ignore[arg-type]
                ended += len(paths)
        return ended


def has_nearline(store: Store) -> bool:
    """Whether the federation has a nearline site at all (a job without one plans nothing)."""
    return any(s.url.startswith("tape://") for s in store.sites())


def may_stage(store: Store) -> bool:
    """Whether a job may have files to stage: a nearline site, a giod server's site (whose server
    may hold files on tape: :mod:`giod.tier.remote` asks it), or a ``root://…?nearline=1`` site."""
    return has_nearline(store) or has_remote_sites(store) or any(_prepares(s.url) for s in store.sites())


def _prepares(url: str) -> bool:
    """Whether a site is a ``root://`` site marked nearline (staged with XRootD ``prepare``)."""
    if not url.startswith(("root://", "roots://", "xroot://", "xroots://")):
        return False
    from giod.storage.tape.xrootd import is_nearline

    return is_nearline(url)


def nearline_holder(store: Store, container: ContainerRecord) -> NearlineSite | None:
    """The nearline site a read of ``container`` goes to, or None when it reads from disk."""
    by_id = {s.id: s for s in store.sites()}
    held = [by_id[i] for i in container.site_ids if i in by_id]
    if not held:
        return None
    site = store.site(store.reads.order(held)[0].name)
    return site if isinstance(site, NearlineSite) else None


def stage_databases(store: Store, databases: Sequence[DatabaseRecord], names: Iterable[str] | None = None, *,
                    pin_s: float | None = None, request: str | None = None, wait_remote: bool = True) -> StagePlan:
    """One bulk stage request per nearline site for the (named) containers of ``databases``.

    ``pin_s``: how long the staged copies are kept for this job (default: the
    library's own pin lifetime); :meth:`StagePlan.release` ends it sooner.
    """
    wanted = None if names is None else set(names)
    return stage_containers(store, [c for db in databases for c in db.containers
                                    if wanted is None or c.name in wanted], pin_s=pin_s, request=request,
                            wait_remote=wait_remote)


def stage_containers(store: Store, containers: Iterable[ContainerRecord], *, pin_s: float | None = None,
                     request: str | None = None, wait_remote: bool = True) -> StagePlan:
    """One bulk stage request per nearline site for those of ``containers`` read from one (as
    :func:`stage_databases`, for a job that picks its files itself: a copy, a later pass).

    ``wait_remote``: wait until a server has staged every file asked of it (a job that reads in its own
    order: a copy); False for a job that reads what is on disk first (:meth:`StagePlan.arriving`)."""
    plan = StagePlan()
    by_id = {s.id: s for s in store.sites()}
    if not may_stage(store):
        return plan  # no nearline site: nothing to plan (and no site opened)
    elsewhere: list[ContainerRecord] = []  # read from another site: a server's, perhaps on tape there
    for c in containers:
        held = [by_id[i] for i in c.site_ids if i in by_id]
        if not held:
            continue
        nearest = store.reads.order(held)[0]
        if not nearest.url.startswith("tape://"):
            elsewhere.append(c)
            continue
        site = store.site(nearest.name)
        if isinstance(site, NearlineSite):
            plan.sites[nearest.name] = site
            plan.paths.setdefault(nearest.name, []).append(c.path)
    for name, paths in plan.paths.items():
        state = plan.sites[name].stage(paths, pin_s=pin_s, request=request)
        plan.requests[name] = state.id
        for f in state.files:
            plan.ready[f.path] = 0.0 if f.on_disk else f.ready
    prepare: dict[str, list[str]] = {}  # root://…?nearline=1 site -> its paths
    for c in elsewhere:
        nearest = store.reads.order([by_id[i] for i in c.site_ids if i in by_id])[0]
        if _prepares(nearest.url):
            prepare.setdefault(nearest.name, []).append(c.path)
    for name, paths in prepare.items():
        from giod.storage.tape import xrootd

        site = store.site(name)
        rid = xrootd.stage(site, paths)  # type: ignore[arg-type]
        xrootd.wait(site, paths)  # type: ignore[arg-type]
        plan.prepared.append((site, paths, rid))
    if elsewhere and has_remote_sites(store):  # asked ahead: the server need not stage on a read
        plan.remote = stage_remote(store, elsewhere, pin_s=pin_s, wait=wait_remote)
    return plan
