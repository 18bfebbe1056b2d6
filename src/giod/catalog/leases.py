"""Writers' leases: how gc and fsck know which files are still being written.

A writer takes a lease on a path prefix at a site (the folder of the
database it writes) before it creates the first file there, keeps it while
its files are pending and while they are published but not yet registered,
and releases it after the commit, or in its last commit's own transaction, or leaves it idle for the next
writer of the process (:class:`IdleLeases`: its prefix then holds registered files only). A thread of the
writing process renews the lease every third of its term; a writer that crashed stops renewing, so its
lease expires one term later and its leftovers become reclaimable. gc and
fsck never touch a file under a live lease, whatever its age.

The lease lives in the catalog, not in a lock file beside the data: it works
the same for SQLite and PostgreSQL federations, for writers on several hosts
and for sites that are not local directories. Expiry is judged on the
catalog's clock (the database server's), never on the hosts' own clocks.

Leases are liveness, not federation content: taking, renewing or releasing
one is a plain transaction that does not bump the federation version.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import ColumnElement, Connection, delete, func, insert, literal, select, update

from giod.catalog.engine import Transactions
from giod.catalog.tables import leases
from giod.errors import ConfigError, GiodError, StorageError

__all__ = ["IdleLeases", "Lease", "LeaseCatalog", "LeaseMethods", "LeaseRecord", "hold_lease", "writer_host"]


@dataclass(frozen=True)
class LeaseRecord:
    id: int
    site: str
    prefix: str
    holder: str
    created: float  # unix time, catalog clock
    expires: float  # unix time, catalog clock

    def covers(self, path: str) -> bool:
        return path.startswith(self.prefix)


class LeaseCatalog(Protocol):
    """The three calls a lease makes to its catalog; every ``CatalogAPI`` answers them.

    Narrower than ``CatalogAPI`` on purpose: the protocol names this module's ``LeaseRecord``,
    so naming it back here would close a circle of files.
    """

    def take_lease(self, site: str, prefix: str, holder: str, seconds: float) -> LeaseRecord: ...
    def renew_leases(self, ids: Iterable[int], seconds: float) -> set[int]: ...
    def release_lease(self, lease_id: int) -> None: ...


def _record(row: Any) -> LeaseRecord:
    return LeaseRecord(int(row.id), row.site, row.prefix, row.holder, float(row.created), float(row.expires))


class LeaseMethods(Transactions):
    """``take_lease``, ``renew_leases``, ``release_lease`` and ``leases`` of ``Catalog``."""

    def _now(self) -> ColumnElement[float]:
        """The catalog's clock as unix seconds, evaluated by the database server."""
        if self.dialect == "sqlite":
            return (func.julianday("now") - 2440587.5) * 86400.0
        return func.extract("epoch", func.clock_timestamp())  # type: ignore[return-value] # a float expression

    def take_lease(self, site: str, prefix: str, holder: str, seconds: float) -> LeaseRecord:
        """A new lease on the files under ``prefix`` at ``site``, live for ``seconds`` unless renewed."""
        if not prefix or not seconds > 0:
            raise ConfigError("a lease needs a path prefix and a positive term")

        def work(conn: Connection) -> LeaseRecord:
            now = float(conn.execute(select(self._now())).scalar_one())
            row = {"site": site, "prefix": prefix, "holder": holder, "created": now, "expires": now + seconds}
            new = int(conn.execute(insert(leases).values(row).returning(leases.c.id)).scalar_one())
            return LeaseRecord(new, site, prefix, holder, now, now + seconds)

        return self._run(work, write=True)

    def renew_leases(self, ids: Iterable[int], seconds: float) -> set[int]:
        """Extend the live leases among ``ids`` to ``seconds`` from now; returns the ids renewed.

        An expired lease is never revived: gc may already have judged its files.
        """
        wanted = sorted(set(ids))
        if not wanted:
            return set()

        def work(conn: Connection) -> set[int]:
            now = self._now()
            cond = leases.c.id.in_(wanted) & (leases.c.expires > now)
            done = set(conn.execute(select(leases.c.id).where(cond)).scalars())
            if done:
                conn.execute(update(leases).where(leases.c.id.in_(sorted(done)))
                             .values(expires=now + literal(float(seconds))))
            return {int(i) for i in done}

        return self._run(work, write=True)

    def release_lease(self, lease_id: int) -> None:
        """Give a lease up (its files are registered or discarded); releasing twice is harmless."""
        self._run(lambda conn: conn.execute(delete(leases).where(leases.c.id == lease_id)), write=True)

    def leases(self, site: str | None = None, *, expired: bool = False) -> list[LeaseRecord]:
        """The live leases (at ``site``), by id; ``expired=True``: the expired ones instead."""

        def work(conn: Connection) -> list[LeaseRecord]:
            now = self._now()
            q = select(leases).where(leases.c.expires <= now if expired else leases.c.expires > now)
            if site is not None:
                q = q.where(leases.c.site == site)
            return [_record(r) for r in conn.execute(q.order_by(leases.c.id)).all()]

        return self._read(work)

    def drop_expired_leases(self) -> int:
        """Forget the expired leases; returns how many there were."""
        q = delete(leases).where(leases.c.expires <= self._now())
        return int(self._run(lambda conn: conn.execute(q).rowcount, write=True))


class Lease:
    """A lease this process holds and renews in the background until :meth:`release`."""

    def __init__(self, catalog: LeaseCatalog, record: LeaseRecord, seconds: float):
        self.catalog = catalog
        self.record = record
        self.seconds = seconds
        self.lost = False
        self.released = False
        self.renewed = time.monotonic()  # when the lease last had a whole term ahead of it
        self._pid = os.getpid()  # a forked child inherits the object, not the lease

    def confirm(self) -> None:
        """Make sure the lease has two thirds of a term ahead, far longer than a commit; StorageError when it
        has expired (its files may be gone). Called right before registering.

        Renews unless the lease was renewed less than a third of a term ago (the background renewal keeps
        it so): a writer committing many small databases pays no catalog write for it.
        """
        if self.released or os.getpid() != self._pid:
            raise StorageError(f"the lease on {self.record.prefix} is not held by this process")
        if not self.lost and time.monotonic() - self.renewed < self.seconds / 3:
            return
        started = time.monotonic()
        if self.record.id not in self.catalog.renew_leases([self.record.id], self.seconds):
            self.lost = True
            raise StorageError(
                f"the lease on {self.record.site}:{self.record.prefix} expired (this process was not heard "
                f"from for {self.seconds:g} s): gc may have removed its files, nothing was committed"
            )
        self.renewed = started

    def release(self) -> None:
        if self.released or os.getpid() != self._pid:
            return
        self.released = True
        _KEEPER.forget(self)
        with contextlib.suppress(GiodError):  # a catalog away now: the lease expires by itself
            self.catalog.release_lease(self.record.id)

    def fresh(self) -> bool:
        """Held by this process, neither lost nor released, and renewed less than a third of a term ago:
        two thirds of a term ahead of it, however long it is left unrenewed in :class:`IdleLeases`."""
        return (not self.released and not self.lost and os.getpid() == self._pid
                and time.monotonic() - self.renewed < self.seconds / 3)

    def released_by_commit(self) -> None:
        """Note that a commit released the lease in its own transaction (``commit_database(...,
        release_lease=lease.record.id)``): stop renewing it, and :meth:`release` costs nothing."""
        self.released = True
        _KEEPER.forget(self)


class _Keeper:
    """One thread per process renewing every lease the process holds, every third of the shortest term."""

    def __init__(self) -> None:
        self._held: weakref.WeakSet[Lease] = weakref.WeakSet()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._period = float("inf")  # what the thread waits for now

    def hold(self, lease: Lease) -> None:
        with self._wake:
            self._held.add(lease)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="giod-leases", daemon=True)
                self._thread.start()
            # woken only when it must renew sooner: a wake renews every lease held, and a lease just
            # taken needs none (a writer per commit paid a catalog transaction for it)
            if lease.seconds / 3 < self._period:
                self._wake.notify()

    def forget(self, lease: Lease) -> None:
        with self._wake:
            self._held.discard(lease)

    def _run(self) -> None:
        while True:
            with self._wake:
                held = list(self._held)
                self._period = min((lease.seconds for lease in held), default=60.0) / 3
                self._wake.wait(self._period)
                held = [lease for lease in self._held if not lease.released and not lease.lost]
            groups: dict[tuple[int, float], list[Lease]] = {}
            for lease in held:
                groups.setdefault((id(lease.catalog), lease.seconds), []).append(lease)
            for group in groups.values():
                try:
                    started = time.monotonic()
                    renewed = group[0].catalog.renew_leases([g.record.id for g in group], group[0].seconds)
                except Exception:  # noqa: BLE001, S112 - a catalog briefly away: the next round tries again
                    continue
                for lease in group:
                    if lease.record.id in renewed:
                        lease.renewed = max(lease.renewed, started)
                    else:
                        lease.lost = True


_KEEPER = _Keeper()


def _forget_keeper() -> None:
    global _KEEPER
    _KEEPER = _Keeper()  # a forked child holds none of its parent's leases and has none of its threads


os.register_at_fork(after_in_child=_forget_keeper)


def writer_host() -> str:
    """``host:pid`` of this process, as leases name their holder."""
    return f"{socket.gethostname()}:{os.getpid()}"


def hold_lease(catalog: LeaseCatalog, site: str, prefix: str, holder: str, seconds: float) -> Lease:
    """Take a lease and keep it renewed."""
    lease = Lease(catalog, catalog.take_lease(site, prefix, holder, seconds), seconds)
    _KEEPER.hold(lease)
    return lease


class IdleLeases:
    """Writers' leases left by their last commit for the next writer of the process (one per federation).

    A writer of one small database (the DAQ pattern: a writer per commit) paid a catalog write transaction,
    with its fsync, to take a lease before its first file. A writer whose last commit succeeded leaves its
    lease here instead of releasing it, with the number of its next database folder; the next writer of
    the same dataset, site, holder and term continues in that prefix without a transaction. An idle lease
    covers registered files only (a writer that aborts or fails releases its lease as before, so that gc
    judges what it left), and it is not renewed while idle: it is handed on only while it has two thirds
    of a term ahead of it (:meth:`Lease.fresh`), and otherwise ends by itself one term after its last
    renewal, or when the federation closes (:meth:`release_all`).
    """

    #: idle leases kept per dataset, site, holder and term (as many as writers of a process at once)
    LIMIT = 8
    #: folders a prefix is handed on for: its numbers stay the six hex digits a writer's folder has
    LAST_FOLDER = 0xFFFFFF

    def __init__(self) -> None:
        self._idle: dict[tuple[str, str, str, float], list[tuple[Lease, str, int]]] = {}
        self._lock = threading.Lock()

    def take(self, key: tuple[str, str, str, float]) -> tuple[Lease, str, int] | None:
        """A fresh idle lease for ``key`` (dataset, site, holder, term), with its prefix and the number of
        the next folder in it, given up by this pool; None when there is none."""
        stale: list[Lease] = []
        found = None
        with self._lock:
            idle = self._idle.get(key, [])
            while idle and found is None:
                lease, prefix, number = idle.pop()
                if lease.fresh() and number <= self.LAST_FOLDER:
                    found = (lease, prefix, number)
                else:
                    stale.append(lease)
        for lease in stale:
            lease.release()
        if found is not None:
            _KEEPER.hold(found[0])  # renewed again while a writer holds it
        return found

    def room(self, key: tuple[str, str, str, float]) -> bool:
        """Whether a lease for ``key`` would be kept by :meth:`keep` now."""
        with self._lock:
            return len(self._idle.get(key, ())) < self.LIMIT

    def keep(self, key: tuple[str, str, str, float], lease: Lease, prefix: str, number: int) -> bool:
        """Keep ``lease`` (on ``prefix``, next folder ``number``) idle; False, and nothing kept, when it is
        not fresh or the pool has no room (the caller releases it then)."""
        if not lease.fresh() or number > self.LAST_FOLDER:
            return False
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) >= self.LIMIT:
                return False
            _KEEPER.forget(lease)  # not renewed while idle: it ends one term after its last renewal
            idle.append((lease, prefix, number))
        return True

    def release_all(self) -> None:
        """Release every idle lease (the federation closes)."""
        with self._lock:
            idle = [lease for kept in self._idle.values() for lease, _, _ in kept]
            self._idle.clear()
        for lease in idle:
            lease.release()
