"""Storage bookkeeping of the catalog: container files, their replicas' states, and purging deleted rows."""

from __future__ import annotations

import time

from sqlalchemy import ColumnElement, Connection, Table, func, insert, select, update

from giod.catalog.engine import Transactions, Unchanged
from giod.catalog.queries import chunks, log, site_id
from giod.catalog.records import SiteRecord
from giod.catalog.rows import parse_rows, site_record
from giod.catalog.tables import (
    REPLICA_STATES,
    containers,
    database_parents,
    database_reads,
    database_summaries,
    databases,
    dataset_schemas,
    dataset_totals,
    datasets,
    replicas,
    sites,
    tag_coverage,
    tag_stats,
    versions,
)
from giod.errors import ConfigError, NotFound

__all__ = ["BookkeepingMethods"]


class BookkeepingMethods(Transactions):
    """``container_paths``, ``deleted_paths``, ``version_at``, ``version_created``, ``checksum_of``,
    ``set_replica_state``, ``replicas`` and ``purge_deleted`` of ``Catalog``."""

    def container_paths(self, site: str | None = None) -> set[str]:
        """Every container path any row references (deleted ones too, until purged).

        With ``site``: only paths with a replica row (in any state) at that site.
        """

        def work(conn: Connection) -> set[str]:
            q = select(containers.c.path).distinct()
            if site is not None:
                at = site_id(conn, site)
                q = q.join(replicas, replicas.c.container_id == containers.c.id).where(
                    replicas.c.site_id == at
                )
            return set(conn.execute(q).scalars())

        return self._read(work)

    def deleted_paths(self, site: str | None = None, before_version: int | None = None) -> dict[str, int]:
        """Paths that only deleted rows reference (a deleted dataset's, database's or replaced container's
        files), with the version that deleted the last of them.

        With ``site``: only paths with a replica row there. With ``before_version``: only those whose
        last row was deleted before it (the ones ``purge_deleted(before_version)`` lets go).
        """
        c = containers
        last = func.max(c.c.deleted_version)
        q = select(c.c.path, last).group_by(c.c.path).having(func.count(c.c.id) == func.count(c.c.deleted_version))
        if before_version is not None:
            q = q.having(last < before_version)

        def work(conn: Connection) -> dict[str, int]:
            query = q
            if site is not None:
                at = site_id(conn, site)
                here = select(c.c.path).join(replicas, replicas.c.container_id == c.c.id).where(
                    replicas.c.site_id == at
                )
                query = query.where(c.c.path.in_(here))
            return {p: int(v) for p, v in conn.execute(query).all()}

        return self._read(work)

    def version_at(self, when: float) -> int:
        """The newest version committed at or before the unix time ``when`` (0: none)."""
        q = select(func.coalesce(func.max(versions.c.version), 0)).where(versions.c.created <= when)
        return int(self._read(lambda conn: conn.execute(q).scalar_one()))

    def version_created(self, version: int) -> float | None:
        """The unix time at which ``version`` was committed (None: the catalog has no such version)."""
        q = select(versions.c.created).where(versions.c.version == version)
        found = self._read(lambda conn: conn.execute(q).scalar())
        return None if found is None else float(found)

    def checksum_of(self, path: str) -> str | None:
        """The checksum recorded for the container file at ``path`` (None if unknown)."""
        q = select(containers.c.checksum).where(containers.c.path == path).limit(1)
        return self._read(lambda conn: conn.execute(q).scalar())

    def set_replica_state(self, container_id: int, site: str, state: str) -> None:
        """Record the state of a container's copy at ``site`` (adding the replica if new).

        Setting the state a replica already has changes nothing, the version included.
        """
        if state not in REPLICA_STATES:
            raise ConfigError(f"replica state {state!r} is not one of {', '.join(REPLICA_STATES)}")

        def work(conn: Connection, v: int) -> None:
            at = site_id(conn, site)
            if (
                conn.execute(select(containers.c.id).where(containers.c.id == container_id)).first()
                is None
            ):
                raise NotFound(f"no container {container_id}")
            now = time.time()
            key = (replicas.c.container_id == container_id) & (replicas.c.site_id == at)
            if conn.execute(select(replicas.c.state).where(key)).scalar() == state:
                raise Unchanged(None)  # readers pinned to a version are not told of a change that is none
            done = conn.execute(update(replicas).where(key).values(state=state, checked=now))
            if done.rowcount == 0:
                conn.execute(
                    insert(replicas).values(
                        container_id=container_id, site_id=at, state=state, checked=now
                    )
                )
            log(conn, v, f"replica of container {container_id} at {site}: {state}")

        self._write(work)

    def replicas(self, container_id: int) -> list[tuple[SiteRecord, str]]:
        """The sites holding a copy of the container and its state there, nearest first."""
        q = (
            select(sites, replicas.c.state)
            .join(replicas, replicas.c.site_id == sites.c.id)
            .where(replicas.c.container_id == container_id)
            .order_by(sites.c.distance, sites.c.name)
        )

        def work(conn: Connection) -> list[tuple[SiteRecord, str]]:
            rows = conn.execute(q).all()
            if (
                not rows
                and conn.execute(
                    select(containers.c.id).where(containers.c.id == container_id)
                ).first()
                is None
            ):
                raise NotFound(f"no container {container_id}")
            # a replica at a site whose row does not parse is not offered (fsck reports the row)
            return list(parse_rows(self.url, rows, lambda r: (site_record(r), str(r.state))))

        return self._read(work)

    def purge_deleted(self, before_version: int) -> list[str]:
        """Remove the rows deleted at a version below ``before_version``.

        Snapshots at ``before_version`` and later are untouched. Returns the
        paths no row references any more (gc deletes those files). Bumps the
        version only when something was removed.
        """
        c, d, ds = containers, databases, datasets

        def gone(table: Table) -> ColumnElement[bool]:
            deleted: ColumnElement[int] = table.c.deleted_version
            return deleted < before_version

        def work(conn: Connection, v: int) -> list[str]:
            paths = set(conn.execute(select(c.c.path).where(gone(c))).scalars())
            counts = [
                conn.execute(select(func.count()).select_from(t).where(gone(t))).scalar_one()
                for t in (c, tag_stats, d, ds)
            ]
            if not any(counts):
                raise Unchanged([])
            conn.execute(
                replicas.delete().where(replicas.c.container_id.in_(select(c.c.id).where(gone(c))))
            )
            conn.execute(c.delete().where(gone(c)))
            conn.execute(tag_stats.delete().where(gone(tag_stats)))
            conn.execute(
                database_parents.delete().where(
                    database_parents.c.database_id.in_(select(d.c.id).where(gone(d)))
                )
            )
            # a purged database's last read goes with it (level 14: no foreign key holds that table to it)
            conn.execute(database_reads.delete().where(database_reads.c.database_id.in_(select(d.c.id).where(gone(d)))))
            conn.execute(d.delete().where(gone(d)))
            conn.execute(database_summaries.delete().where(gone(database_summaries)))  # level 13: their lines
            conn.execute(
                dataset_schemas.delete().where(
                    dataset_schemas.c.dataset_id.in_(select(ds.c.id).where(gone(ds)))
                )
            )
            for kept in (dataset_totals, tag_coverage):  # a purged dataset's totals (levels 9, 11) go with it
                conn.execute(kept.delete().where(kept.c.dataset_id.in_(select(ds.c.id).where(gone(ds)))))
            conn.execute(ds.delete().where(gone(ds)))
            still: set[str] = set()
            for chunk in chunks(sorted(paths)):
                still.update(conn.execute(select(c.c.path).where(c.c.path.in_(chunk))).scalars())
            log(conn, v, f"purge rows deleted before version {before_version}")
            return sorted(paths - still)

        return self._write(work)
