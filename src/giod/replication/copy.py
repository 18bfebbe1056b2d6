"""Replication: copies of containers made in parallel, verified, then registered.

For each container to place at a site the replica goes ``copying`` (so a
file published there but not yet registered is kept by gc; while the run
lasts it also holds a lease on each dataset's folder at each destination,
so gc spares its temporary files however long a copy takes), the file is
copied from the nearest good replica (the least loaded among equally near
ones, another one on the next attempt), checked at the destination (see
``giod.replication.transfer``), and only then registered ``good`` (copies
finished together are registered in one catalog transaction). A run
that is interrupted resumes by running again: containers already good there
are skipped, a file found at the destination is read and registered if it
is right (not copied again), and replaced by a verified copy if it is not.
A replica row is unique per (container, site), so nothing is registered
twice. Replication never changes the state of its sources: judging a copy
is the business of reads and of ``verify``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Protocol

from giod import config
from giod.catalog.leases import Lease, hold_lease, writer_host
from giod.catalog.records import ContainerRecord
from giod.errors import AuthError, GiodError, StorageError
from giod.replication.sites import probe
from giod.replication.transfer import place
from giod.storage.site import Site

__all__ = ["NoProgress", "Progress", "Transfer", "TransferReport", "plan_copies", "replicate", "run_transfers"]

log = logging.getLogger("giod.replication")

SiteOpener = Callable[[str], Site]
ATTEMPTS = 3  # tries per container, each from the next good source
BACKOFF = 0.2  # seconds before the second try, doubled for each further one


class Progress(Protocol):
    """What a progress display is told (from several threads)."""

    def start(self, files: int, size: int) -> None: ...

    def advance(self, n: int) -> None: ...

    def file_done(self) -> None: ...


class NoProgress:
    def start(self, files: int, size: int) -> None:
        pass

    def advance(self, n: int) -> None:
        pass

    def file_done(self) -> None:
        pass


@dataclass(frozen=True)
class Transfer:
    """One container to place at one site."""

    container: ContainerRecord
    site: str  # the destination
    sources: tuple[str, ...]  # sites holding a good replica, nearest first
    previous: str | None = None  # the destination's replica state before (None: no replica row)


@dataclass
class TransferReport:
    """What a replication did; ``ok`` when every container it was asked for is in place."""

    planned: int = 0  # containers to place
    copied: int = 0  # files copied
    adopted: int = 0  # right files found at the destination, registered without a copy
    already: int = 0  # replicas already good at the destination
    bytes: int = 0  # bytes copied
    seconds: float = 0.0
    attempts: int = 0  # copy attempts, retries included
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (path, site, why)
    unavailable: list[str] = field(default_factory=list)  # containers without a good copy to copy from
    refused: dict[tuple[str, str], AuthError] = field(default_factory=dict)  # (source, site) a token failed

    @property
    def ok(self) -> bool:
        return not self.failed and not self.unavailable

    @property
    def rate(self) -> float:
        """Bytes copied per second of the run."""
        return self.bytes / self.seconds if self.seconds > 0 else 0.0

    def add(self, other: TransferReport) -> None:
        for name in ("planned", "copied", "adopted", "already", "bytes", "seconds", "attempts"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failed += other.failed
        self.unavailable += other.unavailable
        self.refused |= other.refused


def plan_copies(catalog: Any, dataset: str, site: str, containers: Sequence[str] | None = None
                ) -> tuple[list[Transfer], TransferReport]:
    """The transfers that give ``site`` a good replica of each (chosen) container of ``dataset``."""
    catalog.site(site)  # NotFound, with close names, before anything else
    report = TransferReport()
    states = catalog.replica_states(dataset)
    wanted = None if containers is None else set(containers)
    transfers: list[Transfer] = []
    for db in catalog.databases(dataset):
        for c in db.containers:
            if wanted is not None and c.name not in wanted:
                continue
            replicas = states.get(c.id, [])
            here = next((r.state for r in replicas if r.site == site), None)
            if here == "good":
                report.already += 1
                continue
            sources = tuple(r.site for r in replicas if r.state == "good")
            if not sources:
                report.unavailable.append(c.path)
                continue
            transfers.append(Transfer(c, site, sources, here))
    report.planned = len(transfers)
    return transfers, report


def replicate(catalog: Any, open_site: SiteOpener, dataset: str, to: str, *,
              containers: Sequence[str] | None = None, streams: int = 4, attempts: int = ATTEMPTS,
              progress: Progress | None = None) -> TransferReport:
    """Give site ``to`` a good replica of every (chosen) container of ``dataset``; ``streams`` files at once.

    StorageError when the destination does not answer at all; single files
    that fail after ``attempts`` tries are listed in the report.
    """
    transfers, report = plan_copies(catalog, dataset, to, containers)
    if transfers:
        health = probe(open_site(to))
        if not health.reachable:
            raise StorageError(f"site {to} is unreachable: {health.detail}")
    done = run_transfers(catalog, open_site, transfers, streams=streams, attempts=attempts, progress=progress)
    done.already += report.already
    done.unavailable += report.unavailable
    if done.refused:  # nothing will go there with this token: say so, not once per file
        raise next(iter(done.refused.values()))
    return done


class _Sources:
    """Copies in flight per source site, so that equally near sources share the work."""

    def __init__(self, distance: dict[str, int]):
        self.distance = distance
        self.load: Counter[str] = Counter()
        self.lock = threading.Lock()

    def pick(self, sources: Sequence[str], attempt: int) -> str:
        with self.lock:
            ranked = sorted(sources, key=lambda s: (self.distance.get(s, 0), self.load[s], s))
            chosen = ranked[attempt % len(ranked)]
            self.load[chosen] += 1
            return chosen

    def release(self, source: str) -> None:
        with self.lock:
            self.load[source] -= 1


def run_transfers(catalog: Any, open_site: SiteOpener, transfers: Sequence[Transfer], *, streams: int = 4,
                  attempts: int = ATTEMPTS, progress: Progress | None = None) -> TransferReport:
    """Carry out ``transfers``, ``streams`` at a time (see the module docstring)."""
    progress = progress or NoProgress()
    report = TransferReport(planned=len(transfers))
    if not transfers:
        return report
    t0 = time.perf_counter()
    leases = _hold_leases(catalog, transfers)
    try:
        return _run(catalog, open_site, transfers, streams, attempts, progress, report, t0)
    finally:
        for lease in leases:
            lease.release()


def _hold_leases(catalog: Any, transfers: Sequence[Transfer]) -> list[Lease]:
    """A lease on each dataset's folder at each destination, for the temporary files of the copies."""
    seconds = float(config.load()["lease_seconds"])
    held: list[Lease] = []
    try:
        for site, prefix in sorted({(t.site, t.container.path.split("/", 1)[0] + "/") for t in transfers}):
            lease = hold_lease(catalog, site, prefix, f"replicate {writer_host()}", seconds)
            if lease is not None:
                held.append(lease)
    except BaseException:
        for lease in held:
            lease.release()
        raise
    return held


def _run(catalog: Any, open_site: SiteOpener, transfers: Sequence[Transfer], streams: int, attempts: int,
         progress: Progress, report: TransferReport, t0: float) -> TransferReport:
    catalog.set_replica_states([(t.container.id, t.site, "copying") for t in transfers])
    progress.start(len(transfers), sum(t.container.size for t in transfers))
    sources = _Sources({s.name: s.distance for s in catalog.sites()})
    lock = threading.Lock()

    def one(t: Transfer) -> None:
        with lock:
            refused = next((e for (a, b), e in report.refused.items() if b == t.site and a in t.sources), None)
        if refused is not None:  # the same token would be refused again
            _abandon(catalog, t)
            with lock:
                report.failed.append((t.container.path, t.site, str(refused)))
            return
        how, moved, tries, why = _carry_out(catalog, open_site, t, sources, attempts, progress)
        with lock:
            report.attempts += tries
            if isinstance(why, tuple):  # (source, error): a token refused
                report.refused.setdefault((why[0], t.site), why[1])
                why = str(why[1])
            if how is None:
                report.failed.append((t.container.path, t.site, str(why)))
                return
        registrations.add(t, how, moved)

    def registered(t: Transfer, how: str, moved: int, error: GiodError | None) -> None:
        with lock:
            if error is not None:  # the file is there and right: the next run adopts it
                report.failed.append((t.container.path, t.site, f"copied but not registered: {error}"))
                return
            report.bytes += moved
            if how == "copied":
                report.copied += 1
            else:
                report.adopted += 1
        progress.file_done()

    registrations = _Registrations(catalog, registered)
    try:
        with ThreadPoolExecutor(max_workers=max(1, streams), thread_name_prefix="giod-replicate") as pool:
            for f in as_completed([pool.submit(one, t) for t in transfers]):
                f.result()
    finally:
        registrations.close()
    report.seconds = time.perf_counter() - t0
    return report


class _Registrations:
    """Verified copies waiting to be registered ``good``, registered by a thread of their own.

    Copies go on while a registration is being written (a catalog
    transaction waits for its fsync), and all that finished meanwhile go
    in the next transaction: a run costs a transaction per batch, not per
    file, and never holds up the copies.
    """

    def __init__(self, catalog: Any, done: Callable[[Transfer, str, int, GiodError | None], None]):
        self.catalog, self.done = catalog, done
        self.waiting: list[tuple[Transfer, str, int]] = []
        self.changed = threading.Condition()
        self.closing = False
        self.thread = threading.Thread(target=self._register, name="giod-register", daemon=True)
        self.thread.start()

    def add(self, t: Transfer, how: str, moved: int) -> None:
        with self.changed:
            self.waiting.append((t, how, moved))
            self.changed.notify()

    def close(self) -> None:
        """Register what still waits, then stop."""
        with self.changed:
            self.closing = True
            self.changed.notify()
        self.thread.join()

    def _register(self) -> None:
        while True:
            with self.changed:
                while not self.waiting and not self.closing:
                    self.changed.wait()
                batch, self.waiting = self.waiting, []
                if not batch:
                    return
            error: GiodError | None = None
            try:
                self.catalog.set_replica_states([(t.container.id, t.site, "good") for t, _, _ in batch])
            except GiodError as exc:
                error = exc
            except Exception as exc:  # noqa: BLE001 - the copies wait on this thread: never die silently
                error = GiodError(f"registering {len(batch)} copies: {exc}")
            for t, how, moved in batch:
                self.done(t, how, moved, error)


def _carry_out(catalog: Any, open_site: SiteOpener, t: Transfer, sources: _Sources, attempts: int,
               progress: Progress) -> tuple[str | None, int, int, str | tuple[str, AuthError]]:
    """``(how, bytes, tries, why)``: how = copied / adopted, or None when every try failed.

    ``why`` is ``(source, error)`` when a token was refused."""
    c = t.container
    why: str | tuple[str, AuthError] = ""
    tries = 0
    for attempt in range(max(1, attempts)):
        if attempt:
            time.sleep(min(2.0, BACKOFF * 2 ** (attempt - 1)))
        tries += 1
        source = sources.pick(t.sources, attempt)
        moved = 0

        def advance(n: int) -> None:
            nonlocal moved
            moved += n
            progress.advance(n)

        try:
            how = place(open_site(source), open_site(t.site), c.path, c.size, c.checksum, advance=advance)
        except AuthError as exc:  # another try would be refused the same way
            progress.advance(-moved)
            why = (source, type(exc)(f"copying {c.path} from {source} to {t.site}: {exc}"))
            break
        except (GiodError, OSError) as exc:  # OSError: a local disk full or failing mid-write
            progress.advance(-moved)
            why = str(exc)
            log.warning("copy of %s from %s to %s failed (try %d of %d): %s",
                        c.path, source, t.site, attempt + 1, attempts, exc)
            continue
        finally:
            sources.release(source)
        if how == "adopted":
            progress.advance(c.size)  # placed without a copy: the bar still reaches its end
        return how, moved if how == "copied" else 0, tries, ""
    _abandon(catalog, t)
    return None, 0, tries, why


def _abandon(catalog: Any, t: Transfer) -> None:
    """Undo the ``copying`` mark of a transfer that failed: back to what the replica was."""
    try:
        if t.previous in (None, "copying"):
            catalog.forget_replica(t.container.id, t.site)
        else:
            catalog.set_replica_states([(t.container.id, t.site, t.previous)])
    except GiodError as exc:
        log.warning("could not reset the replica of %s at %s: %s", t.container.path, t.site, exc)
