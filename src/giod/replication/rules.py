"""Rules and the replicator that satisfies them.

A rule (``Catalog.add_rule``) asks that every matching container of a
dataset keeps ``copies`` good replicas, on the listed sites if it names
some. One pass of the replicator:

1. asks every site whether it answers; sites that do not are neither copied
   to nor counted on for this pass;
2. repairs: every bad (or lost) replica of a container that still has a good
   copy somewhere is replaced by a verified copy, rule or no rule; a damaged
   replica without any good copy is marked lost and reported;
3. for every rule, lists the containers of the dataset *now* (so databases
   committed after the rule was made are covered) and, for each one short of
   copies, picks the nearest allowed sites without a good replica and copies
   there (``giod.replication.copy``);
4. reports each rule's state after the pass.

Nothing is ever deleted by a pass: a rule removed, or a rule asking for
fewer copies, leaves the replicas that exist.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from giod.catalog.records import ReplicaRecord, RuleRecord, SiteRecord
from giod.errors import GiodError, NotFound
from giod.replication.copy import Progress, Transfer, TransferReport, run_transfers
from giod.replication.sites import probe
from giod.storage.site import Site

__all__ = ["Claims", "PassReport", "RuleState", "replicator", "replicator_pass", "rule_state", "rule_states"]

log = logging.getLogger("giod.replication")

SiteOpener = Callable[[str], Site]


@dataclass
class RuleState:
    """How far a rule is from satisfied: replicas missing, containers without any good copy."""

    rule: RuleRecord
    containers: int = 0  # containers the rule covers
    missing: int = 0  # good replicas still to make
    lost: int = 0  # containers without a good copy anywhere (nothing to copy from)
    gone: bool = False  # the dataset no longer exists
    transfers: list[Transfer] = field(default_factory=list)  # copies that would satisfy it

    @property
    def satisfied(self) -> bool:
        return self.missing == 0 and not self.gone

    def describe(self) -> str:
        if self.gone:
            return "dataset gone"
        if self.satisfied:
            return "satisfied"
        lost = f", {self.lost} containers lost" if self.lost else ""
        return f"{self.missing} missing{lost}"


#: past this many new containers, a follower's round asks for the dataset's replicas in one query
FEW_CONTAINERS = 64


def rule_state(catalog: Any, rule: RuleRecord, sites: list[SiteRecord] | None = None,
               away: set[str] | frozenset[str] = frozenset(), *, changed_since: int | None = None) -> RuleState:
    """The rule's state now, with the transfers (not to sites in ``away``) that would satisfy it.

    ``changed_since``: only the databases committed, or given containers, after that version (the
    state of what is new: a follower's planning then costs what was committed, not the dataset).
    """
    state = RuleState(rule)
    sites = sites if sites is not None else catalog.sites()
    order = sorted(sites, key=lambda s: (s.distance, s.name))
    allowed = [s.name for s in order if rule.sites is None or s.name in rule.sites]
    try:
        if changed_since is None:
            databases = catalog.databases(rule.dataset)
            states = catalog.replica_states(rule.dataset)
        else:
            databases = catalog.databases(rule.dataset, changed_since=changed_since)
            wanted = [c for db in databases for c in db.containers if covers(rule, c.name)]
            # a query per container for a few new ones; one for the dataset past that (a follower back
            # from a long stop)
            states = (catalog.replica_states(rule.dataset) if len(wanted) > FEW_CONTAINERS else
                      {c.id: [ReplicaRecord(c.id, site.name, st, None) for site, st in catalog.replicas(c.id)]
                       for c in wanted})
    except NotFound:
        state.gone = True
        return state
    for db in databases:
        for c in db.containers:
            if not covers(rule, c.name):
                continue
            state.containers += 1
            replicas = states.get(c.id, [])
            good = [r.site for r in replicas if r.state == "good"]
            need = rule.copies - len([s for s in good if s in allowed])
            if need <= 0:
                continue
            state.missing += need
            if not good:
                state.lost += 1
                continue
            held = {r.site: r.state for r in replicas}
            targets = [s for s in allowed if s not in good and s not in away][:need]
            sources = tuple(s for s in good if s not in away) or tuple(good)
            state.transfers += [Transfer(c, t, sources, held.get(t)) for t in targets]
    return state


def covers(rule: RuleRecord, container: str) -> bool:
    """Whether ``rule`` copies ``container``: a rule naming a container copies its index with it
    (``tag`` → ``tag-index``; no container of a schema has a '-' in its name)."""
    if rule.containers is None or container in rule.containers:
        return True
    indexed, dash, suffix = container.rpartition("-")
    return bool(dash) and suffix == "index" and indexed in rule.containers


def rule_states(catalog: Any) -> list[RuleState]:
    """Every rule with its state now."""
    sites = catalog.sites()
    return [rule_state(catalog, r, sites) for r in catalog.rules()]


@dataclass
class PassReport:
    """One pass of the replicator."""

    rules: list[RuleState] = field(default_factory=list)  # states after the pass
    repairs: int = 0  # damaged replicas given a repair this pass
    transfers: TransferReport = field(default_factory=TransferReport)
    newly_lost: list[str] = field(default_factory=list)  # containers found without any good copy
    away: dict[str, str] = field(default_factory=dict)  # sites that did not answer -> why

    @property
    def ok(self) -> bool:
        return self.transfers.ok and all(s.satisfied for s in self.rules) and not self.newly_lost


def _repairs(catalog: Any, away: set[str], report: PassReport) -> list[Transfer]:
    out = []
    for ds in catalog.datasets():
        states = catalog.replica_states(ds.name)
        for db in catalog.databases(ds.name):
            for c in db.containers:
                replicas = states.get(c.id, [])
                damaged = [r for r in replicas if r.state in ("bad", "lost")]
                if not damaged:
                    continue
                good = tuple(r.site for r in replicas if r.state == "good")
                if not good:
                    fresh = [r for r in damaged if r.state == "bad"]
                    for r in fresh:
                        catalog.mark_damaged(c.id, r.site)  # bad with no good copy left: lost
                    if fresh:
                        report.newly_lost.append(c.path)
                        log.error("container %s has no good copy left: lost", c.path)
                    continue
                sources = tuple(s for s in good if s not in away) or good
                out += [Transfer(c, r.site, sources, r.state) for r in damaged if r.site not in away]
    return out


class Claims:
    """The copies (container id, site) the threads of one process are making, and those they finished.

    Planning reads the catalog without any lock (a full pass reads every
    replica of every dataset: seconds, during which a commit's copies must
    not wait); only the claim is under the lock, and it is a set operation.
    A planner takes a ``mark()`` before it reads the catalog; its ``claim``
    then drops every copy another thread is making, and every copy one
    finished after the mark (the planner may have read its state before
    it was registered), so that no copy is made twice.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy: set[tuple[int, str]] = set()
        self._done: dict[tuple[int, str], int] = {}  # copy -> the tick it finished at
        self._tick = 0
        self._marks: dict[int, int] = {}  # an open mark -> its tick
        self._next = 0

    def mark(self) -> int:
        """A mark to take before reading the catalog; give it to ``claim``."""
        with self._lock:
            self._next += 1
            self._marks[self._next] = self._tick
            return self._next

    def claim(self, mark: int, transfers: Iterable[Any]) -> list[Any]:
        """The transfers no other thread makes, nor finished since ``mark``; they are now this caller's."""
        with self._lock:
            since = self._marks.pop(mark, self._tick)
            mine = []
            for t in transfers:
                key = (t.container.id, t.site)
                if key in self._busy or self._done.get(key, -1) > since:
                    continue
                self._busy.add(key)
                mine.append(t)
            oldest = min(self._marks.values(), default=self._tick + 1)
            for key in [k for k, at in self._done.items() if at < oldest]:
                del self._done[key]  # no open mark can still see these as unfinished
            return mine

    def release(self, transfers: Iterable[Any]) -> None:
        """The caller's copies are over (registered, or failed)."""
        with self._lock:
            self._tick += 1
            for t in transfers:
                key = (t.container.id, t.site)
                self._busy.discard(key)
                if self._marks:
                    self._done[key] = self._tick

    @property
    def busy(self) -> frozenset[tuple[int, str]]:
        with self._lock:
            return frozenset(self._busy)


def replicator_pass(catalog: Any, open_site: SiteOpener, *, streams: int = 4,
                    progress: Progress | None = None, claims: Claims | None = None) -> PassReport:
    """One pass: repair damaged replicas, then make every rule's missing copies (see the module docstring).

    ``claims``: the copies other threads of this process are making (a follower's copies of new commits),
    left to them. The pass plans without holding anything they wait for, and claims its own copies there.
    """
    report = PassReport()
    claims = claims or Claims()
    mark = claims.mark()
    try:
        sites = catalog.sites()
        for s in sites:
            try:
                health = probe(open_site(s.name))
            except GiodError as exc:
                report.away[s.name] = str(exc)
                continue
            if not health.reachable:
                report.away[s.name] = health.detail
        away = set(report.away)
        planned = _repairs(catalog, away, report)
        seen = {(t.container.id, t.site) for t in planned}
        for rule in catalog.rules():
            for t in rule_state(catalog, rule, sites, away).transfers:
                if (t.container.id, t.site) not in seen:  # two rules may want the same copy
                    seen.add((t.container.id, t.site))
                    planned.append(t)
    except BaseException:
        claims.claim(mark, ())
        raise
    transfers = claims.claim(mark, planned)
    report.repairs = sum(1 for t in transfers if t.previous in ("bad", "lost"))
    try:
        report.transfers = run_transfers(catalog, open_site, transfers, streams=streams, progress=progress)
    finally:
        claims.release(transfers)
    report.rules = [rule_state(catalog, r, sites) for r in catalog.rules()]
    return report


def replicator(catalog: Any, open_site: SiteOpener, *, interval: float = 60.0, streams: int = 4,
               passes: int | None = None, on_pass: Callable[[PassReport], None] | None = None,
               stop: Callable[[], bool] | None = None) -> None:
    """Run passes every ``interval`` seconds (``passes``: how many; None: until ``stop()`` says so)."""
    done = 0
    while passes is None or done < passes:
        started = time.monotonic()
        try:
            result = replicator_pass(catalog, open_site, streams=streams)
        except GiodError as exc:  # the catalog away for a moment must not end the daemon
            log.error("replicator pass failed: %s", exc)
        else:
            if on_pass is not None:
                on_pass(result)
        done += 1
        if passes is not None and done >= passes:
            break
        while time.monotonic() - started < interval:
            if stop is not None and stop():
                return
            time.sleep(min(1.0, interval))
        if stop is not None and stop():
            return
