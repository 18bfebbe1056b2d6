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

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from giod.catalog.records import ReplicaRecord, RuleRecord, SiteRecord
from giod.errors import GiodError, NotFound
from giod.replication.copy import Progress, Transfer, TransferReport, run_transfers
from giod.replication.sites import probe
from giod.storage.site import Site

__all__ = ["PassReport", "RuleState", "replicator", "replicator_pass", "rule_state", "rule_states"]

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


def replicator_pass(catalog: Any, open_site: SiteOpener, *, streams: int = 4,
                    progress: Progress | None = None, lock: Any = None,
                    busy: set[tuple[int, str]] | None = None) -> PassReport:
    """One pass: repair damaged replicas, then make every rule's missing copies (see the module docstring).

    ``busy``: the copies (container id, site) other threads of this process are making, left to them;
    the pass adds its own while they run. It plans under ``lock``, as they do, so that no copy is
    planned twice.
    """
    report = PassReport()
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
    busy = busy if busy is not None else set()
    with lock if lock is not None else contextlib.nullcontext():
        transfers = [t for t in _repairs(catalog, away, report) if (t.container.id, t.site) not in busy]
        report.repairs = len(transfers)
        planned = {(t.container.id, t.site) for t in transfers} | busy
        for rule in catalog.rules():
            for t in rule_state(catalog, rule, sites, away).transfers:
                if (t.container.id, t.site) not in planned:  # two rules may want the same copy
                    planned.add((t.container.id, t.site))
                    transfers.append(t)
        mine = {(t.container.id, t.site) for t in transfers}
        busy |= mine
    try:
        report.transfers = run_transfers(catalog, open_site, transfers, streams=streams, progress=progress)
    finally:
        with lock if lock is not None else contextlib.nullcontext():
            busy -= mine
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
