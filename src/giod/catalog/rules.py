"""Replication rules and the replica bookkeeping the replicator needs.

A rule says that every matching container of a dataset keeps ``copies``
good replicas, optionally only on some sites and for some containers. Rules
are policy, not federation content: like tokens they are not versioned, and
adding or removing one does not bump the federation version.

Replica states (``good``, ``bad``, ``lost``, ``copying``) are facts about
files now, not versioned either; changing them bumps the version once per
transaction, like every other change of the federation's content.
``mark_damaged`` decides *bad* (another good copy exists) or *lost* (none
does) in the same transaction that records it, so two readers finding the
last two copies damaged at once cannot both leave them merely *bad*.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from giod.catalog.engine import Transactions, Unchanged
from giod.catalog.queries import chunks, dataset_row, log, missing, missing_dataset, site_id
from giod.catalog.records import ReplicaRecord, RuleRecord
from giod.catalog.tables import REPLICA_STATES, containers, databases, datasets, replicas, rules, visible
from giod.catalog.tables import sites as sites_table  # ``sites`` is a parameter of add_rule
from giod.errors import ConfigError, ConflictError, NotFound
from giod.names import check_name

__all__ = ["RuleMethods"]


def _names(values: Sequence[str] | None, what: str) -> tuple[str, ...] | None:
    if values is None:
        return None
    out = tuple(dict.fromkeys(v.strip() for v in values))
    if not out or any(not v for v in out):
        raise ConfigError(f"a rule's {what} must be non-empty names (or left out for all)")
    return out


def _rule(row: Any) -> RuleRecord:
    return RuleRecord(
        int(row.id),
        row.dataset,
        int(row.copies),
        None if row.sites is None else tuple(json.loads(row.sites)),
        None if row.containers is None else tuple(json.loads(row.containers)),
        float(row.created),
    )


def _live_containers(dataset: str | None) -> Any:
    """SELECT of the ids of live containers of live databases (of one dataset, if given)."""
    c, d = containers, databases
    q = select(c.c.id).select_from(c.join(d, d.c.id == c.c.database_id))
    q = q.where(visible(c, None), visible(d, None))
    if dataset is not None:
        ds_id = select(datasets.c.id).where(datasets.c.name == dataset, visible(datasets, None))
        q = q.where(d.c.dataset_id.in_(ds_id.scalar_subquery()))
    return q


class RuleMethods(Transactions):
    """Rules (``add_rule``, ``rules``, ``remove_rule``), ``remove_site`` and bulk replica queries of ``Catalog``."""

    # -- rules -----------------------------------------------------------------

    def add_rule(
        self,
        dataset: str,
        copies: int,
        sites: Sequence[str] | None = None,
        containers: Sequence[str] | None = None,
    ) -> RuleRecord:
        """Add a rule: every matching container of ``dataset`` keeps ``copies`` good replicas.

        ``sites``: only these sites count and receive copies (None: any
        site). ``containers``: only these containers (None: all of them).
        NotFound for an unknown dataset or site; ConfigError when the rule
        can never be satisfied (more copies than sites).
        """
        if not isinstance(copies, int) or isinstance(copies, bool) or copies < 1:
            raise ConfigError(f"a rule needs at least one copy, not {copies!r}")
        site_names = _names(sites, "sites")
        container_names = _names(containers, "containers")
        # sites and the dataset must exist (checked below): only the container names are new here
        for name in container_names or ():
            check_name(name, "container")

        def work(conn: Connection) -> RuleRecord:
            if dataset_row(conn, dataset, None) is None:
                raise missing_dataset(conn, dataset, None)
            known = list(conn.execute(select(sites_table.c.name)).scalars())
            for name in site_names or ():
                if name not in known:
                    raise missing(conn, "site", name, select(sites_table.c.name))
            available = len(site_names) if site_names is not None else len(known)
            if copies > available:
                where = "listed" if site_names is not None else "in the federation"
                raise ConfigError(f"{copies} copies asked for, but only {available} sites are {where}")
            now = time.time()
            row = {
                "dataset": dataset,
                "copies": copies,
                "sites": None if site_names is None else json.dumps(list(site_names)),
                "containers": None if container_names is None else json.dumps(list(container_names)),
                "created": now,
            }
            new = int(conn.execute(insert(rules).values(row).returning(rules.c.id)).scalar_one())
            return RuleRecord(new, dataset, copies, site_names, container_names, now)

        return self._run(work, write=True)

    def rules(self, dataset: str | None = None) -> list[RuleRecord]:
        """Every rule (of ``dataset``, if given), by id."""
        q = select(rules).order_by(rules.c.id)
        if dataset is not None:
            q = q.where(rules.c.dataset == dataset)
        return self._read(lambda conn: [_rule(r) for r in conn.execute(q).all()])

    def rule(self, rule_id: int) -> RuleRecord:
        """One rule; NotFound if there is none."""
        row = self._read(lambda conn: conn.execute(select(rules).where(rules.c.id == rule_id)).first())
        if row is None:
            raise NotFound(f"no rule {rule_id}")
        return _rule(row)

    def remove_rule(self, rule_id: int) -> None:
        """Remove a rule; its replicas stay (removing a rule never deletes a copy)."""

        def work(conn: Connection) -> None:
            if conn.execute(delete(rules).where(rules.c.id == rule_id)).rowcount == 0:
                raise NotFound(f"no rule {rule_id}")

        self._run(work, write=True)

    # -- sites -----------------------------------------------------------------

    def remove_site(self, name: str, *, force: bool = False) -> int:
        """Remove the site ``name`` from the catalog; returns the new version. Its files are not touched.

        A site that still has replica rows is refused (ConflictError) unless
        ``force``, which drops those rows with it. Even with ``force``, a
        site holding the only good copy of a live container, or named by a
        rule, is refused: removing it would lose data or break the rule.
        """

        def work(conn: Connection, v: int) -> int:
            at = site_id(conn, name)
            for rule in conn.execute(select(rules).order_by(rules.c.id)).all():
                if rule.sites is not None and name in json.loads(rule.sites):
                    raise ConflictError(f"rule {rule.id} names site {name} (giod rule rm {rule.id} first)")
            r, other = replicas, replicas.alias("other")
            held = int(conn.execute(select(func.count()).select_from(r).where(r.c.site_id == at)).scalar_one())
            if held and not force:
                raise ConflictError(
                    f"site {name} still has {held} replicas in the catalog; --force drops those rows "
                    "(the files stay where they are)"
                )
            elsewhere = select(other.c.container_id).where(other.c.site_id != at, other.c.state == "good")
            last = (
                select(containers.c.path, datasets.c.name)
                .select_from(
                    r.join(containers, containers.c.id == r.c.container_id)
                    .join(databases, databases.c.id == containers.c.database_id)
                    .join(datasets, datasets.c.id == databases.c.dataset_id)
                )
                .where(r.c.site_id == at, r.c.state == "good")
                .where(r.c.container_id.in_(_live_containers(None)))
                .where(r.c.container_id.not_in(elsewhere))
                .order_by(containers.c.path)
            )
            only = conn.execute(last).all()
            if only:
                path, dataset = only[0]
                raise ConflictError(
                    f"site {name} holds the only good copy of {len(only)} containers ({path} of dataset "
                    f"{dataset}{', …' if len(only) > 1 else ''}): replicate them to another site first "
                    f"(giod replicate {dataset} --to SITE), or delete their datasets"
                )
            conn.execute(delete(r).where(r.c.site_id == at))
            conn.execute(delete(sites_table).where(sites_table.c.id == at))
            log(conn, v, f"remove site {name}" + (f" and its {held} replicas" if held else ""))
            return v

        return self._write(work)

    # -- replicas ---------------------------------------------------------------

    def replica_states(self, dataset: str | None = None) -> dict[int, list[ReplicaRecord]]:
        """The replicas, in any state, of the live containers (of ``dataset``): nearest site first.

        Containers without any replica row do not appear.
        """
        r, s = replicas, sites_table
        q = (
            select(r.c.container_id, s.c.name, r.c.state, r.c.checked)
            .select_from(r.join(s, s.c.id == r.c.site_id))
            .where(r.c.container_id.in_(_live_containers(dataset)))
            .order_by(r.c.container_id, s.c.distance, s.c.name)
        )

        def work(conn: Connection) -> dict[int, list[ReplicaRecord]]:
            if dataset is not None and dataset_row(conn, dataset, None) is None:
                raise missing_dataset(conn, dataset, None)
            out: dict[int, list[ReplicaRecord]] = {}
            for cid, name, state, checked in conn.execute(q).all():
                out.setdefault(int(cid), []).append(
                    ReplicaRecord(int(cid), name, state, None if checked is None else float(checked))
                )
            return out

        return self._read(work)

    def replica_summary(self) -> dict[str, dict[str, tuple[int, int]]]:
        """``{site: {state: (replicas, bytes)}}`` over the live containers (sites without any are left out)."""
        r, s, c = replicas, sites_table, containers
        q = (
            select(s.c.name, r.c.state, func.count(), func.coalesce(func.sum(c.c.size), 0))
            .select_from(r.join(s, s.c.id == r.c.site_id).join(c, c.c.id == r.c.container_id))
            .where(r.c.container_id.in_(_live_containers(None)))
            .group_by(s.c.name, r.c.state)
        )
        def work(conn: Connection) -> dict[str, dict[str, tuple[int, int]]]:
            out: dict[str, dict[str, tuple[int, int]]] = {}
            for name, state, n, size in conn.execute(q).all():
                out.setdefault(name, {})[state] = (int(n), int(size))
            return out

        return self._read(work)

    def set_replica_states(self, items: Sequence[tuple[int, str, str]]) -> int:
        """Record ``(container_id, site, state)`` for many replicas in one transaction; returns the version.

        Rows are added where new, updated where they exist, each stamped
        with the time of the check. An empty list changes nothing.
        """
        items = list(items)
        for _, _, state in items:
            if state not in REPLICA_STATES:
                raise ConfigError(f"replica state {state!r} is not one of {', '.join(REPLICA_STATES)}")
        if not items:
            return self.version()  # type: ignore[attr-defined,no-any-return]

        def work(conn: Connection, v: int) -> int:
            ids = {name: site_id(conn, name) for name in {site for _, site, _ in items}}
            wanted = {cid for cid, _, _ in items}
            found: set[int] = set()
            for chunk in chunks(sorted(wanted)):
                found.update(conn.execute(select(containers.c.id).where(containers.c.id.in_(chunk))).scalars())
            if wanted - found:
                raise NotFound(f"no container {min(wanted - found)}")
            now = time.time()
            for cid, site, state in items:
                key = (replicas.c.container_id == cid) & (replicas.c.site_id == ids[site])
                if conn.execute(update(replicas).where(key).values(state=state, checked=now)).rowcount == 0:
                    conn.execute(
                        insert(replicas).values(container_id=cid, site_id=ids[site], state=state, checked=now)
                    )
            counts: dict[str, int] = {}
            for _, _, state in items:
                counts[state] = counts.get(state, 0) + 1
            log(conn, v, "replicas: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
            return v

        return self._write(work)

    def forget_replica(self, container_id: int, site: str) -> bool:
        """Drop the replica row of a copy that is not good (an abandoned copy); True if there was one.

        A good replica is never forgotten here: its file is a copy readers
        count on (ConflictError).
        """

        def work(conn: Connection, v: int) -> bool:
            at = site_id(conn, site)
            key = (replicas.c.container_id == container_id) & (replicas.c.site_id == at)
            state = conn.execute(select(replicas.c.state).where(key)).scalar_one_or_none()
            if state is None:
                raise Unchanged(False)
            if state == "good":
                raise ConflictError(f"the replica of container {container_id} at {site} is good: not forgotten")
            conn.execute(delete(replicas).where(key))
            log(conn, v, f"forget {state} replica of container {container_id} at {site}")
            return True

        return self._write(work)

    def mark_damaged(self, container_id: int, site: str) -> str:
        """Record that the copy at ``site`` is missing or corrupt; returns the state given to it.

        ``bad`` when another good replica exists (it can be repaired from
        it), else ``lost`` — and then every other damaged copy of the
        container is lost too. A copy already lost stays lost.
        """

        def work(conn: Connection, v: int) -> str:
            at = site_id(conn, site)
            rows = conn.execute(
                select(replicas.c.site_id, replicas.c.state).where(replicas.c.container_id == container_id)
            ).all()
            states = {int(sid): state for sid, state in rows}
            if not states and conn.execute(
                select(containers.c.id).where(containers.c.id == container_id)
            ).first() is None:
                raise NotFound(f"no container {container_id}")
            others_good = any(state == "good" for sid, state in states.items() if sid != at)
            new = "bad" if others_good else "lost"
            if states.get(at) == new or states.get(at) == "lost":
                raise Unchanged(states[at])
            now = time.time()
            key = (replicas.c.container_id == container_id) & (replicas.c.site_id == at)
            if conn.execute(update(replicas).where(key).values(state=new, checked=now)).rowcount == 0:
                conn.execute(insert(replicas).values(container_id=container_id, site_id=at, state=new, checked=now))
            if new == "lost":
                conn.execute(
                    update(replicas)
                    .where(replicas.c.container_id == container_id, replicas.c.state == "bad")
                    .values(state="lost", checked=now)
                )
            log(conn, v, f"replica of container {container_id} at {site}: {new}")
            return new

        return self._write(work)

