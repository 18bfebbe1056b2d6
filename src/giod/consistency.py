"""Consistency between the catalog and the sites: fsck and gc.

A crash can leave files that no catalog row names (temporary files of an
interrupted write, or complete files of a commit that never registered).
Those are *orphans*: invisible to readers, reported by :func:`fsck`, removed
by :func:`gc` once older than a grace period (so that a writer still busy
is never robbed of its files).

Files the catalog does not know at a site are *dark data*. Orphans are one
kind; the other is a copy of a known container at a site where the catalog
lists no replica of it (a replication interrupted between publishing the
copy and registering it, or a copy made by hand). fsck reports those as
``dark``; gc leaves them alone, because ``giod replicate`` adopts them once
their checksum is checked, and one of them may be the last intact copy.

Every replica row is checked, whatever its state (a replica marked lost
whose file is gone is still reported), except those of copies in progress.
A site that does not answer is reported as such, not as missing files.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from giod.catalog.records import ContainerRecord, SiteRecord
from giod.errors import GiodError, IntegrityError, NotFound
from giod.federation import Federation
from giod.replication.sites import probe
from giod.replication.transfer import file_checksum
from giod.storage.site import is_temporary


@dataclass
class Problem:
    kind: str  # orphan | dark | missing | size | checksum | catalog | unreachable
    site: str
    path: str
    detail: str


NOT_DAMAGE = ("orphan", "dark")  # files too many, not data missing


@dataclass
class FsckReport:
    files_checked: int = 0
    bytes_checked: int = 0
    problems: list[Problem] = field(default_factory=list)

    def by_kind(self, kind: str) -> list[Problem]:
        return [p for p in self.problems if p.kind == kind]

    @property
    def damaged(self) -> bool:
        """True when committed data is missing or corrupt, or could not be checked (orphans and dark
        copies are not damage)."""
        return any(p.kind not in NOT_DAMAGE for p in self.problems)


def fsck(fed: Federation, *, checksums: bool = True,
         progress: Callable[[int], None] | None = None) -> FsckReport:
    """Check every replica of every live container, and look for orphans."""
    report = FsckReport()
    sites = {s.id: s for s in fed.sites()}
    away: dict[str, str] = {}
    for site_rec in sites.values():
        try:
            health = probe(fed.site(site_rec.name))
            reachable, detail = health.reachable, health.detail
        except GiodError as exc:  # a site that cannot even be opened is away, not a reason to stop
            reachable, detail = False, str(exc)
        if not reachable:
            away[site_rec.name] = detail
            report.problems.append(Problem("unreachable", site_rec.name, "", detail))
    for name in fed.datasets():
        dbs = fed.catalog.databases(name)
        states = _replica_sites(fed, name, sites)
        expected = 0
        for db in sorted(dbs, key=lambda d: d.first_entry):
            if db.first_entry < expected:
                report.problems.append(Problem("catalog", "", f"db{db.id}",
                                               f"entry range overlaps the previous database in {name}"))
            expected = db.stop_entry
            if not db.containers:
                report.problems.append(Problem("catalog", "", f"db{db.id}", "database without containers"))
            for c in db.containers:
                if sum(c.cluster_entries) != db.n_events:
                    report.problems.append(Problem("catalog", "", c.path,
                                                   f"clusters hold {sum(c.cluster_entries)} events, "
                                                   f"the database {db.n_events}"))
                for site_name, state in states(c):
                    if site_name in away or state == "copying":
                        continue
                    _check_file(fed, site_name, c.path, c.size, c.checksum, checksums, report, state)
                    if progress:
                        progress(c.size)
    everywhere = fed.catalog.container_paths()
    for site_rec in sites.values():
        if site_rec.name in away:
            continue
        known = fed.catalog.container_paths(site_rec.name)
        try:
            files = list(fed.site(site_rec.name).walk())
        except GiodError as exc:
            report.problems.append(Problem("unreachable", site_rec.name, "", f"site cannot be listed: {exc}"))
            continue
        for info in files:
            if info.path in known:
                continue
            if is_temporary(info.path):
                report.problems.append(Problem("orphan", site_rec.name, info.path,
                                               "temporary file of an interrupted write"))
            elif info.path in everywhere:
                report.problems.append(Problem("dark", site_rec.name, info.path,
                                               "copy of a container the catalog lists no replica of here "
                                               "(giod replicate checks and adopts it)"))
            else:
                report.problems.append(Problem("orphan", site_rec.name, info.path, "file that no catalog entry names"))
    return report


def _replica_sites(fed: Federation, dataset: str, sites: dict[int, SiteRecord]
                   ) -> Callable[[ContainerRecord], list[tuple[str, str]]]:
    """``(site, state)`` of every replica of a container: all states where the catalog can list them."""
    lister = getattr(fed.catalog, "replica_states", None)
    if lister is None:  # a remote catalog: the good replicas its listing carries
        return lambda c: [(sites[i].name, "good") for i in c.site_ids if i in sites]
    found = lister(dataset)
    return lambda c: [(r.site, r.state) for r in found.get(c.id, [])]


def _check_file(fed: Federation, site: str, path: str, size: int, checksum: str,
                verify: bool, report: FsckReport, state: str = "good") -> None:
    s = fed.site(site)
    marked = "" if state == "good" else f" (replica marked {state})"
    try:
        actual = s.size(path)
    except NotFound:
        report.problems.append(Problem("missing", site, path, "file is gone" + marked))
        return
    except GiodError as exc:
        report.problems.append(Problem("unreachable", site, path, f"cannot be checked: {exc}"))
        return
    report.files_checked += 1
    if actual != size:
        report.problems.append(Problem("size", site, path, f"{actual} bytes, catalog says {size}{marked}"))
        return
    if verify:
        try:
            value, n = file_checksum(s, path)
        except NotFound:
            report.problems.append(Problem("missing", site, path, "file is gone" + marked))
            return
        except IntegrityError as exc:
            report.problems.append(Problem("size", site, path, f"{exc}{marked}"))
            return
        report.bytes_checked += n
        if value != checksum:
            report.problems.append(Problem("checksum", site, path, f"{value}, catalog says {checksum}{marked}"))


def gc(fed: Federation, *, grace_seconds: float = 3600.0, dry_run: bool = False,
       on_unreachable: Callable[[str, str], None] | None = None) -> list[tuple[str, str]]:
    """Remove orphan files older than ``grace_seconds``; returns (site, path) removed.

    A site that cannot be opened or listed is skipped, and named with the
    reason to ``on_unreachable(site, why)``; the other sites are still cleaned.
    """
    removed = []
    now = time.time()
    for site_rec in fed.sites():
        known = fed.catalog.container_paths(site_rec.name)
        try:
            site = fed.site(site_rec.name)
            candidates = [i for i in site.walk() if i.path not in known and now - i.mtime >= grace_seconds]
        except GiodError as exc:
            if on_unreachable is not None:
                on_unreachable(site_rec.name, str(exc))
            continue
        known = fed.catalog.container_paths(site_rec.name)  # a commit may have landed meanwhile
        everywhere = fed.catalog.container_paths()
        for info in candidates:
            if info.path in known or (info.path in everywhere and not is_temporary(info.path)):
                continue  # dark copies of known containers are kept (see the module docstring)
            if not dry_run:
                site.remove(info.path)
            removed.append((site_rec.name, info.path))
    return removed
