"""Scrubbing: re-read replicas, compare with the catalog's checksums, record what is found.

Every replica of every live container (at one site, or everywhere; all of
them or a random sample) is read whole and its CRC-32C compared with the
catalog's. A missing or corrupt copy is marked *bad* when a good copy
remains elsewhere (the replicator repairs it), *lost* when none does. A copy
marked bad or lost that reads right again (a disk remounted, a file put
back) is marked good. A site that does not answer is reported, and its
replicas are left as they are: an outage is not damage.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from giod.catalog.records import ContainerRecord, ReplicaRecord
from giod.errors import ConfigError, GiodError, StorageError
from giod.replication.copy import NoProgress, Progress
from giod.replication.sites import probe
from giod.replication.transfer import file_state
from giod.storage.site import Site

__all__ = ["Finding", "VerifyReport", "verify"]


@dataclass(frozen=True)
class Finding:
    """A damaged replica: what was found and the state it was given."""

    kind: str  # "missing" or "corrupt"
    site: str
    path: str
    detail: str
    state: str | None  # "bad", "lost", or None when it could not be recorded


@dataclass
class VerifyReport:
    checked: int = 0  # replicas read
    bytes: int = 0
    skipped: int = 0  # replicas not read (not in the sample, or on a site that did not answer)
    damaged: list[Finding] = field(default_factory=list)
    restored: list[tuple[str, str]] = field(default_factory=list)  # (site, path) found right again
    unreachable: dict[str, str] = field(default_factory=dict)  # site -> why

    @property
    def lost(self) -> list[Finding]:
        return [f for f in self.damaged if f.state == "lost"]

    @property
    def ok(self) -> bool:
        """Nothing damaged found, and every site asked for answered."""
        return not self.damaged and not self.unreachable


def verify(catalog: Any, open_site: Callable[[str], Site], *, site: str | None = None,
           sample: float | None = None, seed: int | None = None, streams: int = 4,
           progress: Progress | None = None) -> VerifyReport:
    """Check the replicas at ``site`` (default: every site); ``sample``: a random fraction of them."""
    if sample is not None and not 0 < sample <= 1:
        raise ConfigError(f"--sample is a fraction in (0, 1], not {sample}")
    progress = progress or NoProgress()
    report = VerifyReport()
    names = [catalog.site(site).name] if site is not None else [s.name for s in catalog.sites()]
    reachable = []
    for name in names:
        try:
            health = probe(open_site(name))
        except GiodError as exc:  # a site that cannot even be opened is away, like one that does not answer
            report.unreachable[name] = str(exc)
            continue
        if health.reachable:
            reachable.append(name)
        else:
            report.unreachable[name] = health.detail
    items: list[tuple[ContainerRecord, ReplicaRecord]] = []
    for ds in catalog.datasets():
        states = catalog.replica_states(ds.name)
        for db in catalog.databases(ds.name):
            for c in db.containers:
                for r in states.get(c.id, []):
                    if r.state == "copying":
                        continue  # a copy in progress is checked by its replication
                    if r.site in reachable:
                        items.append((c, r))
                    elif r.site in report.unreachable:
                        report.skipped += 1
    if sample is not None and items:
        keep = min(len(items), math.ceil(len(items) * sample))
        chosen = sorted(random.Random(seed).sample(range(len(items)), keep))
        report.skipped += len(items) - keep
        items = [items[i] for i in chosen]
    progress.start(len(items), sum(c.size for c, _ in items))
    lock = threading.Lock()

    def check(item: tuple[ContainerRecord, ReplicaRecord]) -> None:
        c, r = item
        with lock:
            if r.site in report.unreachable:  # went away during this run
                report.skipped += 1
                return
        try:
            found = file_state(open_site(r.site), c.path, c.size, c.checksum, progress.advance)
        except StorageError as exc:
            with lock:
                report.unreachable.setdefault(r.site, str(exc))
                report.skipped += 1
            return
        if not found.intact:
            kind = "corrupt" if found.present else "missing"
            state = _mark(catalog, c.id, r.site)
        with lock:
            report.checked += 1
            report.bytes += c.size if found.present else 0
            if found.intact:
                if r.state != "good":
                    report.restored.append((r.site, c.path))
            else:
                report.damaged.append(Finding(kind, r.site, c.path, found.detail, state))
        progress.file_done()

    with ThreadPoolExecutor(max_workers=max(1, streams), thread_name_prefix="giod-verify") as pool:
        list(pool.map(check, items))
    if report.restored:
        by_path = {c.path: c.id for c, _ in items}
        catalog.set_replica_states([(by_path[path], name, "good") for name, path in report.restored])
    report.damaged.sort(key=lambda f: (f.site, f.path))
    return report


def _mark(catalog: Any, container_id: int, site: str) -> str | None:
    try:
        return str(catalog.mark_damaged(container_id, site))
    except GiodError:
        return None
