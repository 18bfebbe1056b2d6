"""Consistency between the catalog and the sites: fsck, gc and recover.

A crash can leave files that no catalog row names (temporary files of an
interrupted write, or complete files of a commit that never registered).
Those are *orphans*: invisible to readers, reported by :func:`fsck`, removed
by :func:`gc` once older than a grace period. Whether a writer is still busy
with a file is never guessed from its age: a live writer holds a lease on
the files it writes (``giod.catalog.leases``), and files under a live lease
are reported as ``writing`` and never removed, however old.

Files that only deleted catalog rows name (a deleted dataset's, an
interrupted import's) are reported as ``deleted``; gc purges those rows and
removes the files once the deletion is older than the grace.

A complete, unregistered file whose footer holds its writer's commit record
(``giod.commit``) and that is newer than the catalog's last version, or whose
writer saw a version the catalog's history no longer holds, is evidence that
the catalog lost commits (a deleted SQLite WAL, a restored backup): fsck
reports it as ``lost`` (damage), gc keeps it, :func:`recover` registers its
database again.

A copy from another federation (``giod copy``) places files whose footers
are the source's, not this catalog's: they would pass for lost commits. The
copy holds its leases in the name :data:`COPY_HOLDER`; a file under such a
lease that has expired (a copy killed) is reported as an ``orphan`` of an
interrupted copy, never ``lost``: the copy adopts it when run again, gc
removes it after the grace, and recover leaves it alone, so a recovered copy
never lands twice. gc keeps such a lease while files it covers remain.

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

import dataclasses
import json
import math
import posixpath
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from giod.catalog.protocol import CatalogAPI
from giod.catalog.records import (
    ContainerRecord,
    ContainerSpec,
    DatabaseCommit,
    DatabaseRecord,
    DatabaseRow,
    SiteRecord,
    keyed_ranges,
)
from giod.errors import CatalogError, GiodError, IntegrityError, NotFound
from giod.replication.sites import probe
from giod.replication.transfer import file_checksum
from giod.schema import TAG_CONTAINER, TAG_INDEX
from giod.storage.admission import check_files
from giod.storage.container import COMMIT_KEY, ContainerReader
from giod.storage.formats.registry import format_of_path
from giod.storage.site import FileInfo, Site, is_temporary
from giod.storage.tape.site import NearlineSite
from giod.store.expected import stored_relations, stored_schemas
from giod.store.snapshot import Store
from giod.store.tagstats import merge_stats

COPY_HOLDER = "giod copy"  # how a copy's leases name their holder (``giod.exchange``)


@dataclass
class Problem:
    kind: str  # orphan | dark | writing | deleted | lost | incomplete | missing | size | checksum | catalog
    #            | unreachable | repaired
    site: str
    path: str
    detail: str
    kept: bool = False  # a value the catalog keeps beside its rows disagrees with them (fsck --repair)
    databases: tuple[int, ...] = ()  # a kept value's problem: the databases whose summaries differ


# files too many, not data missing; "lost" files are data the catalog is missing, not data missing from a site:
# they are reported apart (FsckReport.lost_commits)
# an "incomplete" import is data that never landed, not committed data lost: the same command finishes it
# a "repaired" kept value was written again from the rows by fsck --repair
NOT_DAMAGE = ("orphan", "dark", "writing", "deleted", "lost", "incomplete", "repaired")


@dataclass
class FsckReport:
    files_checked: int = 0
    bytes_checked: int = 0
    deleted_files: int = 0  # files of deleted containers, waiting for gc
    deleted_bytes: int = 0
    problems: list[Problem] = field(default_factory=list)

    def by_kind(self, kind: str) -> list[Problem]:
        return [p for p in self.problems if p.kind == kind]

    @property
    def damaged(self) -> bool:
        """True when committed data is missing or corrupt, or could not be checked (orphans, dark copies,
        files being written or deleted are not damage; lost commits are told by :attr:`lost_commits`)."""
        return any(p.kind not in NOT_DAMAGE for p in self.problems)

    @property
    def kept_wrong(self) -> bool:
        """True when values the catalog keeps beside its rows disagree with them (``fsck(repair=True)``
        writes them again)."""
        return any(p.kind == "catalog" and p.kept for p in self.problems)

    @property
    def lost_commits(self) -> bool:
        """True when complete files show commits the catalog lost (``giod recover`` registers them)."""
        return any(p.kind == "lost" for p in self.problems)


def fsck(store: Store, *, checksums: bool = True, repair: bool = False,
         progress: Callable[[int], None] | None = None) -> FsckReport:
    """Check every replica of every live container, and say what every other file at a site is: orphan,
    dark copy, being written, deleted, or evidence of a lost commit. ``repair``: write the kept values
    found to disagree with the rows anew from the rows (``Catalog.rebuild_kept``); their problems are then
    ``repaired``."""
    report = FsckReport()
    sites = {s.id: s for s in store.sites()}
    away: dict[str, str] = {}
    for site_rec in sites.values():
        try:
            health = probe(store.site(site_rec.name))
            reachable, detail = health.reachable, health.detail
        except GiodError as exc:  # a site that cannot even be opened is away, not a reason to stop
            reachable, detail = False, str(exc)
        if not reachable:
            away[site_rec.name] = detail
            report.problems.append(Problem("unreachable", site_rec.name, "", detail))
    for bad in store.catalog.bad_rows():  # left out of every listing: said here, with the command that removes it
        report.problems.append(Problem("catalog", "", f"table {bad.table} {bad.key}",
                                       f"{bad.problem}; the row is left out ({bad.remedy} removes it)"))
    try:
        names = store.datasets()
    except CatalogError as exc:  # one row that does not parse hides no other dataset from the check
        report.problems.append(Problem("catalog", "", "table datasets", f"{exc}; each dataset is checked by name"))
        names = sorted(store.catalog.dataset_names())
    for name in names:
        try:
            version = store.catalog.version()  # the kept values and the rows are compared in one snapshot
            dbs = store.catalog.databases(name, version)
        except NotFound:
            continue  # a deleted dataset's name (listed by name until purged)
        except CatalogError as exc:
            report.problems.append(Problem("catalog", "", f"dataset {name}", str(exc)))
            continue
        try:
            kept = kept_problems(store.catalog, name, version, dbs)
        except CatalogError as exc:  # a kept value that does not parse: the rows' files are checked all the same
            kept = [Problem("catalog", "", f"dataset {name}", str(exc), True, tuple(db.id for db in dbs))]
        if kept and repair:
            written = store.catalog.rebuild_kept(name, sorted({i for p in kept for i in p.databases}))
            kept = [dataclasses.replace(p, kind="repaired", detail=f"{p.detail}; written again from the rows at "
                                                                    f"version {written}") for p in kept]
        report.problems += kept
        report.problems += _incomplete_imports(name, dbs)
        states = _replica_sites(store, name, sites)
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
                    _check_file(store, site_name, c.path, c.size, c.checksum, checksums, report, state)
                    if progress:
                        progress(c.size)
    for site_rec in sites.values():
        if site_rec.name in away:
            continue
        site = store.site(site_rec.name)
        try:
            files = list(site.walk())
        except GiodError as exc:
            report.problems.append(Problem("unreachable", site_rec.name, "", f"site cannot be listed: {exc}"))
            continue
        for kind, info, detail in _survey(store, site_rec.name, site, files):
            report.problems.append(Problem(kind, site_rec.name, info.path, detail))
            if kind == "deleted":
                report.deleted_files += 1
                report.deleted_bytes += info.size
    return report


def kept_problems(catalog: CatalogAPI, name: str, version: int, dbs: list[DatabaseRecord]) -> list[Problem]:
    """A ``catalog`` problem for each value the writes keep beside the rows of dataset ``name`` at
    ``version`` that disagrees with its databases' rows ``dbs`` (read at that version).

    Reads look those values up instead of counting (the totals for ``len`` and ``giod ls``, a line per
    database for ``giod show``, a record per database for the streamed listing, each tag field's coverage
    for planning); one that disagrees, whether by a hand edit or a bug, gives wrong answers and no error.
    """
    where = f"dataset {name}"
    out = []
    kept = catalog.dataset_summary(name, version)
    held = {"n_events": sum(db.n_events for db in dbs), "n_databases": len(dbs),
            "bytes": sum(c.size for db in dbs for c in db.containers)}
    if kept != held:
        out.append(Problem("catalog", "", where, f"its kept totals ({_totals(kept)}) are not its databases' rows' "
                                                 f"({_totals(held)}): len() and giod ls read the kept ones", True))
    rows = {db.id: db for db in dbs}
    lines = {db.id: DatabaseRow(db.id, db.first_entry, db.n_events, db.bytes, db.created_version, db.program,
                                ",".join(sorted(c.name for c in db.containers))) for db in dbs}
    for what, listing, expected, reader in (
            ("lines", catalog.database_rows, lines, "giod show prints"),
            ("records", catalog.iter_databases, rows, "Catalog.iter_databases gives")):
        unseen, differ = set(expected), []
        for item in listing(name, version):
            unseen.discard(item.id)
            if expected.get(item.id) != item:
                differ.append(item.id)
        # a kept id may be anything a cell holds: ids first, in order, then the rest as written
        differ = sorted(differ + list(unseen), key=lambda i: (0, i, "") if type(i) is int else (1, 0, repr(i)))
        if differ:
            shown = ", ".join(f"db{i}" if type(i) is int else f"db{i!r}" for i in differ[:5])
            shown += ", …" if len(differ) > 5 else ""
            out.append(Problem("catalog", "", where, f"the listing's kept {what} of {_databases(len(differ))} "
                                                     f"({shown}) are not their rows: {reader} the kept ones",
                               True, tuple(i for i in differ if type(i) is int)))
    for tag, (n, width) in sorted(catalog.tag_coverage(name, version).items()):
        bounds = [db.tag_stats[tag] for db in dbs if tag in db.tag_stats]
        spans = [hi - lo for lo, hi in bounds if math.isfinite(lo) and math.isfinite(hi)]
        wrong = n != len(bounds) or width is not None and (
            any(lo > hi for lo, hi in bounds) or max(spans, default=0.0) > width)
        if wrong:
            out.append(Problem("catalog", "", where, f"the coverage kept for tag field {tag} ({n} databases, "
                                                     f"widest span {width}) is not its rows' ({len(bounds)} "
                                                     f"databases, widest span {max(spans, default=0.0)}): a "
                                                     f"selection on {tag} may leave databases out", True))
    return out


def _databases(n: int) -> str:
    return f"{n:,} database" if n == 1 else f"{n:,} databases"


def _totals(values: dict[str, int]) -> str:
    return f"{values['n_events']:,} events in {_databases(values['n_databases'])}, {values['bytes']:,} bytes"


def _incomplete_imports(dataset: str, dbs: list[Any]) -> list[Problem]:
    """An ``incomplete`` problem for each file an import left partly imported into ``dataset``
    (killed, or still running): its databases hold fewer of its entries than it has."""
    files: dict[str, tuple[Any, int]] = {}  # the import's key -> (a database of it, entries in the file)
    for db in dbs:
        checksum, total = db.parameters.get("source_checksum"), db.parameters.get("source_entries")
        if not isinstance(checksum, str) or not isinstance(total, int):
            continue
        key = f"{db.program}:{checksum}"  # giod.interchange.import_key; an --append has keys of its own
        if (db.idempotency_key or "").startswith(key + ":"):
            files.setdefault(key, (db, total))
    out = []
    for key, (db, total) in files.items():
        held = sum(hi - lo for lo, hi in keyed_ranges(dbs, key))
        if held < total:
            source = db.parameters.get("source") or "a file"
            out.append(Problem("incomplete", "", dataset,
                               f"{source} ({db.parameters['source_checksum']}): {held:,} of its {total:,} events "
                               "were imported (an import killed or still running); the same giod import "
                               "finishes it"))
    return out


def _survey(store: Store, site_name: str, site: Site, files: list[FileInfo]
            ) -> Iterator[tuple[str, FileInfo, str]]:
    """``(kind, file, detail)`` of every file at the site that is not a live replica.

    Read after the walk, in this order: the leases, then the catalog's paths. A file the walk saw was
    created under a lease taken before it; a lease released since was released after its commit, which
    the paths then show.
    """
    leases = store.catalog.leases(site_name)
    copies = _expired_copy_leases(store, site_name)
    known = store.catalog.container_paths(site_name)
    deleted = store.catalog.deleted_paths(site_name)
    everywhere: set[str] | None = None
    history = _History(store)
    candidates: list[tuple[FileInfo, str]] = []  # complete files of commits the catalog may have lost
    for info in files:
        if info.path in deleted:
            yield ("deleted", info, f"file of a container deleted at version {deleted[info.path]} "
                                    "(giod gc reclaims it once the deletion is older than the grace)")
            continue
        if info.path in known:
            continue
        lease = next((x for x in leases if x.covers(info.path)), None)
        if lease is not None:
            yield ("writing", info, f"file of a live writer ({lease.holder}, lease {lease.id})")
        elif is_temporary(info.path):
            yield ("orphan", info, "temporary file of an interrupted write")
        elif info.path in (everywhere := store.catalog.container_paths() if everywhere is None else everywhere):
            yield ("dark", info, "copy of a container the catalog lists no replica of here "
                                 "(giod replicate checks and adopts it)")
        elif (copy := next((x for x in copies if x.covers(info.path)), None)) is not None:
            yield ("orphan", info, f"file of an interrupted copy ({copy.holder}): giod copy adopts it when run "
                                   "again, gc removes it after the grace")
        elif (why := history.lost(site, info)) is not None:
            candidates.append((info, why))
        else:
            yield ("orphan", info, "file that no catalog entry names")
    groups: dict[tuple[str, str], list[tuple[FileInfo, str]]] = {}
    for info, why in candidates:
        groups.setdefault(commit_group(info.path, history.records[info.path]), []).append((info, why))
    for group in groups.values():
        metas = [history.records[info.path] for info, _ in group]
        missing = unfinished(metas)
        for info, why in group:
            if missing:
                what = "pass" if metas[0].get("pass") else "database"
                yield ("orphan", info, f"file of a {what} its writer did not finish (no {', '.join(missing)}): "
                                       "giod gc removes it after the grace")
            else:
                yield ("lost", info, f"complete file of a commit the catalog does not hold ({why}); "
                                     "giod recover registers it again")


def commit_group(path: str, meta: dict[str, Any]) -> tuple[str, str]:
    """The files of one commit: one folder, one commit record (the container's name aside)."""
    return posixpath.dirname(path), json.dumps({k: v for k, v in meta.items() if k != "container"},
                                               sort_keys=True)


def unfinished(metas: list[dict[str, Any]]) -> list[str]:
    """The containers a commit's record names that none of its files holds (files of older giod, which
    named none: nothing)."""
    named = metas[0].get("containers")
    if named is None:
        return []
    if not isinstance(named, list) or not all(isinstance(c, str) for c in named):
        return ["list of containers that parses"]
    return sorted(set(named) - {m.get("container") for m in metas})


def _expired_copy_leases(store: Store, site_name: str) -> list[Any]:
    return [x for x in store.catalog.leases(site_name, expired=True) if x.holder.startswith(COPY_HOLDER + " ")]


class _History:
    """Whether an unregistered complete file is evidence of commits the catalog lost (a deleted SQLite WAL,
    a catalog restored from an older copy), from what its writer recorded in its footer."""

    def __init__(self, store: Store):
        self.catalog = store.catalog
        self._last: float | None = None
        self.records: dict[str, dict[str, Any]] = {}  # the commit record of each file judged

    def lost(self, site: Site, info: FileInfo) -> str | None:
        meta = commit_metadata(site, info.path)
        if meta is None:
            return None
        self.records[info.path] = meta
        seen = meta.get("seen_version")
        if seen:
            created = self.catalog.version_created(int(seen[0]))
            if created is None or abs(created - float(seen[1])) > 1e-3:
                return f"its writer saw version {seen[0]}, which the catalog's history no longer holds"
        if self._last is None:
            last = self.catalog.versions(1)
            self._last = last[0].created if last else 0.0
        if info.mtime > self._last:
            return "it is newer than the catalog's last version"
        return None


def commit_metadata(site: Site, path: str) -> dict[str, Any] | None:
    """What a writer recorded in a container's footer for registering it (None: nothing, or no container)."""
    fmt = format_of_path(path)
    if fmt is None:
        return None
    try:
        with site.open(path) as fh:
            kv = fmt.footer_metadata(fh)
    except (GiodError, OSError, pa.ArrowException):
        return None
    raw = kv.get(COMMIT_KEY.encode())
    if raw is None:
        return None
    try:
        meta = json.loads(raw)
    except ValueError:
        return None
    return meta if isinstance(meta, dict) and isinstance(meta.get("dataset"), str) else None


def _replica_sites(store: Store, dataset: str, sites: dict[int, SiteRecord]
                   ) -> Callable[[ContainerRecord], list[tuple[str, str]]]:
    """``(site, state)`` of every replica of a container: all states where the catalog can list them."""
    found = store.catalog.replica_states(dataset)  # through a server: the good replicas its listing carries
    return lambda c: [(r.site, r.state) for r in found.get(c.id, [])]


def _check_file(store: Store, site: str, path: str, size: int, checksum: str,
                verify: bool, report: FsckReport, state: str = "good") -> None:
    s = store.site(site)
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
            # a nearline file is checked on tape: staging every file to check it would flood the drives
            value, n = s.tape_checksum(path) if isinstance(s, NearlineSite) else file_checksum(s, path)
        except NotFound:
            report.problems.append(Problem("missing", site, path, "file is gone" + marked))
            return
        except IntegrityError as exc:
            report.problems.append(Problem("size", site, path, f"{exc}{marked}"))
            return
        report.bytes_checked += n
        if value != checksum:
            report.problems.append(Problem("checksum", site, path, f"{value}, catalog says {checksum}{marked}"))


class Removed(list[tuple[str, str]]):
    """The ``(site, path)`` gc removed (or would remove); ``lost``: evidence of lost commits it kept."""

    def __init__(self) -> None:
        super().__init__()
        self.lost: list[tuple[str, str]] = []


def gc(store: Store, *, grace_seconds: float = 3600.0, dry_run: bool = False, include_lost: bool = False,
       on_unreachable: Callable[[str, str], None] | None = None) -> Removed:
    """Remove what nothing will read again; returns the (site, path) removed.

    That is: orphans older than ``grace_seconds`` (files under a live writer's lease never, whatever
    their age), and the files of containers deleted more than ``grace_seconds`` ago, after purging
    their rows (a reader that pinned an older version loses them then). Files that are evidence of
    lost commits are kept unless ``include_lost`` (``giod recover`` registers them again); while
    there are any, deleted rows are not purged either.

    A site that cannot be opened or listed is skipped, and named with the
    reason to ``on_unreachable(site, why)``; the other sites are still cleaned.
    """
    removed = Removed()
    now = time.time()
    before = store.catalog.version_at(now - grace_seconds) + 1
    plan: list[tuple[Site, str, list[tuple[str, FileInfo, str]]]] = []
    for site_rec in store.sites():
        try:
            site = store.site(site_rec.name)
            files = list(site.walk())
        except GiodError as exc:
            if on_unreachable is not None:
                on_unreachable(site_rec.name, str(exc))
            continue
        plan.append((site, site_rec.name, list(_survey(store, site_rec.name, site, files))))
    removed.lost = [(name, info.path) for _, name, found in plan for kind, info, _ in found if kind == "lost"]
    kept: set[int] = set()  # expired leases of copies whose files stay: they keep telling what those files are
    purge = not removed.lost or include_lost
    reclaim = store.catalog.deleted_paths(before_version=before) if purge else {}
    if purge and not dry_run and reclaim:
        store.catalog.purge_deleted(before)
    for site, name, found in plan:
        copies = _expired_copy_leases(store, name)
        for kind, info, _ in found:
            old = now - info.mtime >= grace_seconds
            if (kind == "orphan" and old) or (kind == "deleted" and info.path in reclaim) \
                    or (kind == "lost" and include_lost and old):
                if not dry_run:
                    site.remove(info.path)
                removed.append((name, info.path))
            elif kind == "orphan":
                kept |= {x.id for x in copies if x.covers(info.path)}
    if not dry_run:  # after the survey: the files of the leases dropped were judged orphans already
        if kept:
            for lease in store.catalog.leases(expired=True):
                if lease.id not in kept:
                    store.catalog.release_lease(lease.id)
        else:
            store.catalog.drop_expired_leases()
    return removed


def recover(store: Store, *, dry_run: bool = False) -> list[Recovered]:
    """Register again what the files fsck reports as ``lost`` hold: the databases first, oldest first, then
    the containers later passes added to them."""
    groups: dict[tuple[str, str, bool, str], list[tuple[FileInfo, dict[str, Any]]]] = {}
    for site_rec in store.sites():
        try:
            site = store.site(site_rec.name)
            files = list(site.walk())
        except GiodError:
            continue  # fsck names the sites that do not answer; recover registers what it can reach
        for kind, info, _ in _survey(store, site_rec.name, site, files):
            if kind == "lost":
                meta = commit_metadata(site, info.path) or {}
                folder, record = commit_group(info.path, meta)
                key = (site_rec.name, folder, bool(meta.get("pass")), record)
                groups.setdefault(key, []).append((info, meta))
    planned = {(site, folder) for site, folder, is_pass, _ in groups if not is_pass}
    out: list[Recovered] = []
    commits: list[tuple[int, DatabaseCommit]] = []  # the databases' commits, registered together
    for (site_name, folder, is_pass, _), found in sorted(groups.items(),
                                                         key=lambda g: (g[0][2], min(f.mtime for f, _ in g[1]))):
        if is_pass and commits:  # a pass adds to databases: those found lost go in first
            _commit_all(store, out, commits)
        found.sort(key=lambda fm: fm[0].path)
        got = _recover_one(store, site_name, folder, found, dry_run, planned)
        if isinstance(got, DatabaseCommit):
            commits.append((len(out), got))
            got = Recovered(site_name, folder, got.dataset, tuple(f.path for f, _ in found), got.n_events)
        out.append(got)
    _commit_all(store, out, commits)
    return out


def _commit_all(store: Store, out: list[Recovered], commits: list[tuple[int, DatabaseCommit]]) -> None:
    """Register the lost databases in one transaction: all of them or, if the catalog refuses one, none."""
    if not commits:
        return
    try:
        results = store.catalog.commit_databases([c for _, c in commits])
    except GiodError as exc:
        for k, _ in commits:
            out[k] = dataclasses.replace(out[k], reason=f"not registered, with the other lost databases: {exc}")
    else:
        for (k, _), result in zip(commits, results, strict=True):
            out[k] = dataclasses.replace(out[k], database_id=result.database_id, first_entry=result.first_entry)
    commits.clear()


@dataclass(frozen=True)
class Recovered:
    """What one lost commit left in one folder: registered again (``database_id``), or why not.

    ``kind`` is ``database`` (a writer's commit) or ``pass`` (containers a later pass added to it).
    """

    site: str
    folder: str
    dataset: str
    paths: tuple[str, ...]
    n_events: int
    database_id: int | None = None
    first_entry: int | None = None
    reason: str = ""
    kind: str = "database"


def _recover_one(store: Store, site_name: str, folder: str, found: list[tuple[FileInfo, dict[str, Any]]],
                 dry_run: bool, planned: set[tuple[str, str]]) -> Recovered | DatabaseCommit:
    """What became of one folder's lost files; a database's commit is returned, to be registered with the
    others (``_commit_all``)."""
    site = store.site(site_name)
    meta = found[0][1]
    is_pass = bool(meta.get("pass"))
    paths = tuple(f.path for f, _ in found)
    name = str(meta.get("dataset", ""))
    kind = "pass" if is_pass else "database"

    def refused(reason: str, n: int = 0) -> Recovered:
        return Recovered(site_name, folder, name, paths, n, reason=reason, kind=kind)

    try:
        ds = store.dataset(name)
    except NotFound:
        return refused(f"dataset {name} is not in the catalog")
    if ds.schema.fingerprint != meta.get("schema"):
        return refused(f"the files have another schema than dataset {name} has now")
    provenance: dict[str, Any] = {
        "program": str(meta.get("program") or ""), "program_version": str(meta.get("program_version") or ""),
        "parameters": dict(meta.get("parameters") or {})}
    specs: list[ContainerSpec] = []
    stats: dict[str, Any] = {}
    counts: set[int] = set()
    for f, m in found:
        fmt = format_of_path(f.path)
        if fmt is None:
            return refused(f"{f.path} is in no container format giod knows")
        try:
            with site.open(f.path) as fh:
                described = fmt.describe(fh.read())
        except (GiodError, OSError, pa.ArrowException) as exc:
            return refused(f"{f.path} is no container file that giod can read: {exc}")
        clusters, crcs = described.cluster_entries, described.cluster_checksums
        base = posixpath.basename(f.path).removesuffix(fmt.suffix)
        container = str(m.get("container") or base)
        if container not in ds.schema.containers and container not in (TAG_CONTAINER, TAG_INDEX):
            return refused(f"{f.path} is no container of dataset {name}")
        counts.add(sum(clusters))
        checksum, size = file_checksum(site, f.path)
        specs.append(ContainerSpec(container, f.path, checksum, size, clusters, ds.schema_id,
                                   format=fmt.name, cluster_checksums=crcs,
                                   **(provenance if is_pass else {})))
    if len(counts) != 1:
        return refused("its containers hold different numbers of events")
    n = counts.pop()
    try:
        # a footer is anyone's to write: the files are checked whole, as an upload's are, before they count
        check_files(site, specs, stored_relations(ds.schema), stored_schemas(specs, store.schema))
        tag = next((s for s in specs if s.name == TAG_CONTAINER), None)
        if tag is not None:
            reader = ContainerReader.of(site, tag)
            try:
                merge_stats(stats, reader.read())
            finally:
                reader.close()
        if is_pass:
            db = next((d for d in ds.databases() if any(posixpath.dirname(c.path) == folder for c in d.containers)),
                      None)
            if db is None and not (dry_run and (site_name, folder) in planned):
                return refused(f"the database in {folder} is not in the catalog")
            if db is not None and db.n_events != n:
                return refused(f"db{db.id} has {db.n_events} events, the containers {n}")
            if dry_run:
                return Recovered(site_name, folder, name, paths, n, kind=kind)
            assert db is not None
            store.catalog.add_containers(db.id, specs, site_name, tag_stats=stats or None,
                                       replace=bool(meta.get("replace")))
            return Recovered(site_name, folder, name, paths, n, db.id, db.first_entry, kind=kind)
        if dry_run:
            return Recovered(site_name, folder, name, paths, n)
        return DatabaseCommit(
            dataset=name, n_events=n, site=site_name, containers=tuple(specs), tag_stats=stats,
            writer=str(meta.get("writer", "")), parents=tuple(int(p) for p in meta.get("parents") or ()),
            idempotency_key=meta.get("idempotency_key"), **provenance,
        )
    except GiodError as exc:
        return refused(str(exc), n)
