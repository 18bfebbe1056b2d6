"""Consistency between the catalog and the sites: fsck and gc.

A crash can leave files that no catalog row names (temporary files of an
interrupted write, or complete files of a commit that never registered).
Those are *orphans*: invisible to readers, reported by :func:`fsck`, removed
by :func:`gc` once older than a grace period (so that a writer still busy
is never robbed of its files).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from giod.errors import GiodError
from giod.federation import Federation
from giod.storage.checksum import checksum_stream
from giod.storage.site import is_temporary


@dataclass
class Problem:
    kind: str  # orphan | missing | size | checksum | catalog
    site: str
    path: str
    detail: str


@dataclass
class FsckReport:
    files_checked: int = 0
    bytes_checked: int = 0
    problems: list[Problem] = field(default_factory=list)

    def by_kind(self, kind: str) -> list[Problem]:
        return [p for p in self.problems if p.kind == kind]

    @property
    def damaged(self) -> bool:
        """True when committed data is missing or corrupt (orphans are not damage)."""
        return any(p.kind != "orphan" for p in self.problems)


def fsck(fed: Federation, *, checksums: bool = True,
         progress: Callable[[int], None] | None = None) -> FsckReport:
    """Check every replica of every live container, and look for orphans."""
    report = FsckReport()
    sites = {s.id: s for s in fed.sites()}
    for name in fed.datasets():
        dbs = fed.catalog.databases(name)
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
                for sid in c.site_ids:
                    site_rec = sites.get(sid)
                    if site_rec is None:
                        continue
                    _check_file(fed, site_rec.name, c.path, c.size, c.checksum, checksums, report)
                    if progress:
                        progress(c.size)
    for site_rec in sites.values():
        known = fed.catalog.container_paths(site_rec.name)
        try:
            files = list(fed.site(site_rec.name).walk())
        except GiodError as exc:
            report.problems.append(Problem("missing", site_rec.name, "", f"site unreadable: {exc}"))
            continue
        for info in files:
            if info.path not in known:
                what = "temporary file of an interrupted write" if is_temporary(info.path) else \
                    "file that no catalog entry names"
                report.problems.append(Problem("orphan", site_rec.name, info.path, what))
    return report


def _check_file(fed: Federation, site: str, path: str, size: int, checksum: str,
                verify: bool, report: FsckReport) -> None:
    s = fed.site(site)
    try:
        actual = s.size(path)
    except GiodError:
        report.problems.append(Problem("missing", site, path, "file is gone"))
        return
    report.files_checked += 1
    if actual != size:
        report.problems.append(Problem("size", site, path, f"{actual} bytes, catalog says {size}"))
        return
    if verify:
        with s.open(path) as fh:
            value, n = checksum_stream(fh)
        report.bytes_checked += n
        if value != checksum:
            report.problems.append(Problem("checksum", site, path, f"{value}, catalog says {checksum}"))


def gc(fed: Federation, *, grace_seconds: float = 3600.0, dry_run: bool = False) -> list[tuple[str, str]]:
    """Remove orphan files older than ``grace_seconds``; returns (site, path) removed."""
    removed = []
    now = time.time()
    for site_rec in fed.sites():
        known = fed.catalog.container_paths(site_rec.name)
        site = fed.site(site_rec.name)
        candidates = [i for i in site.walk() if i.path not in known and now - i.mtime >= grace_seconds]
        known = fed.catalog.container_paths(site_rec.name)  # a commit may have landed meanwhile
        for info in candidates:
            if info.path in known:
                continue
            if not dry_run:
                site.remove(info.path)
            removed.append((site_rec.name, info.path))
    return removed
