"""Many database registrations as one set of rows: one statement per table, not per commit.

A group of commits (group commit, ``commit_databases``) used to run each
commit's statements in its own savepoint: on PostgreSQL about 18 statements
and 4 round trips per commit, each row parsed, planned and checked on its
own. Here the whole group is checked first (datasets, idempotency keys,
sites, schemas, paths) and then written table by table: one version bump by
the number of commits, one entry update per dataset, and on PostgreSQL one
``INSERT … SELECT FROM unnest(…)`` each for databases, containers (with
their replicas, through a data-modifying CTE), tag statistics and the
version log. Every commit still gets its own version (in queue order), its
own entry range and its own log line, exactly as the savepoint path gives
them.

Anything this path does not handle in bulk (parents, a refusal: an unknown
dataset, schema or site, a path outside the dataset, a constraint the
server refuses) raises :class:`Refused`; the caller then runs the group
through the savepoint path, which gives each commit its own outcome. The
bulk path therefore never decides an error, only the fast case.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from giod.catalog.migrations.v0021_coverage_written_by_groups import SETTING as COVERAGE_WRITTEN
from giod.catalog.records import CommitResult, DatabaseCommit

__all__ = ["BulkStatements", "PreparedCommit", "Refused"]


class Refused(Exception):
    """The group needs the savepoint path (a refusal, or something the bulk path leaves out)."""


@dataclass(frozen=True)
class PreparedCommit:
    """A commit checked and turned into rows before its transaction opens."""

    commit: DatabaseCommit
    parameters: str  # JSON
    containers: list[dict[str, Any]]  # without database id, version and time
    stats: list[dict[str, Any]]  # field, min, max
    parents: list[int]
    schemas: set[int]
    size: int
    names: str  # of its containers, as its summary keeps them (level 13)
    record: str  # its listing record, as its summary keeps it (level 17, ``kept.record_text``)
    release: int | None = None  # the lease its transaction releases
    group_row: str = ""  # PostgreSQL: its element of the group statement's JSON (``group_row``), made beforehand


_DATABASES = (
    ("dataset_id", "bigint"), ("first_entry", "bigint"), ("n_events", "bigint"), ("bytes", "bigint"),
    ("created", "float8"), ("created_version", "bigint"), ("writer", "text"), ("program", "text"),
    ("program_version", "text"), ("parameters", "text"), ("idempotency_key", "text"),
)  # fmt: skip
_CONTAINERS = (
    ("database_id", "bigint"), ("name", "text"), ("path", "text"), ("checksum", "text"), ("size", "bigint"),
    ("cluster_entries", "text"), ("schema_id", "bigint"), ("created_version", "bigint"), ("program", "text"),
    ("program_version", "text"), ("parameters", "text"), ("created", "float8"), ("format", "text"),
    ("cluster_checksums", "text"),
)  # fmt: skip
_TAG_STATS = (
    ("database_id", "bigint"), ("field", "text"), ("created_version", "bigint"), ("min", "float8"),
    ("max", "float8"),
)  # fmt: skip
_VERSIONS = (("version", "bigint"), ("created", "float8"), ("description", "text"))
_SUMMARIES = (
    ("database_id", "bigint"), ("created_version", "bigint"), ("dataset_id", "bigint"), ("first_entry", "bigint"),
    ("n_events", "bigint"), ("database_version", "bigint"), ("program", "text"), ("bytes", "bigint"),
    ("containers", "text"), ("record", "text"), ("created", "float8"), ("writer", "text"),
    ("program_version", "text"), ("parameters", "text"), ("idempotency_key", "text"),
)  # fmt: skip


def _unnest(columns: Sequence[tuple[str, str]]) -> str:
    """``(a, b) SELECT * FROM unnest(%(a)s::t[], %(b)s::u[])``: one array parameter per column."""
    names = ", ".join(name for name, _ in columns)
    arrays = ", ".join(f"%({name})b::{kind}[]" for name, kind in columns)
    return f"({names}) SELECT * FROM unnest({arrays})"  # noqa: S608 - constant column names, no values


def _arrays(columns: Sequence[tuple[str, str]], rows: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """The column arrays of ``rows`` (dicts with every column) for ``_unnest``."""
    return {name: [row[name] for row in rows] for name, _ in columns}


class BulkStatements:
    """PostgreSQL statements that insert many rows of a table from one array per column."""

    lock = "SELECT version FROM federation FOR UPDATE"
    bump = "UPDATE federation SET version = version + %(n)s RETURNING version"
    landed = (
        "SELECT ds.name, d.idempotency_key, d.id, d.first_entry, d.created_version "
        "FROM databases d JOIN datasets ds ON ds.id = d.dataset_id "
        "WHERE ds.deleted_version IS NULL AND ds.name = ANY(%(names)s::text[]) "
        "AND d.idempotency_key = ANY(%(keys)s::text[])"
    )
    take_entries = (
        "UPDATE datasets AS ds SET next_entry = ds.next_entry + u.n "
        "FROM unnest(%(names)s::text[], %(ns)s::bigint[]) AS u(name, n) "
        "WHERE ds.name = u.name AND ds.deleted_version IS NULL RETURNING ds.name, ds.id, ds.next_entry"
    )
    databases = f"INSERT INTO databases {_unnest(_DATABASES)} RETURNING id, dataset_id, first_entry"
    # the replicas of the containers just inserted, by the site of each container's commit
    containers = (
        f"WITH c AS (INSERT INTO containers {_unnest(_CONTAINERS)} RETURNING id, database_id) "  # noqa: S608
        "INSERT INTO replicas (container_id, site_id, state, checked) "
        "SELECT c.id, s.site_id, 'good', %(checked)s FROM c "
        "JOIN unnest(%(held_by)s::bigint[], %(sites)s::bigint[]) AS s(database_id, site_id) "
        "ON s.database_id = c.database_id"
    )
    tag_stats = f"INSERT INTO tag_stats {_unnest(_TAG_STATS)}"
    # one row per commit: the dataset's latest totals (before the group) plus the group's running sums
    totals = (
        "INSERT INTO dataset_totals (dataset_id, version, n_databases, n_events, bytes) "
        "SELECT u.dataset_id, u.version, t.n_databases + u.dn, t.n_events + u.de, t.bytes + u.db "
        "FROM unnest(%(dataset_id)b::bigint[], %(version)b::bigint[], %(dn)b::bigint[], %(de)b::bigint[], "
        "%(db)b::bigint[]) AS u(dataset_id, version, dn, de, db) "
        "CROSS JOIN LATERAL (SELECT n_databases, n_events, bytes FROM dataset_totals "
        "WHERE dataset_id = u.dataset_id ORDER BY version DESC LIMIT 1) AS t"
    )
    log = f"INSERT INTO versions {_unnest(_VERSIONS)}"
    # with their containers' ids (level 17), in the order of their names, from the rows inserted before
    summaries = (
        "INSERT INTO database_summaries (database_id, created_version, dataset_id, first_entry, n_events, "  # noqa: S608
        "database_version, program, bytes, containers, record, created, writer, program_version, parameters, "
        "idempotency_key, container_ids) "
        "SELECT u.*, (SELECT coalesce(string_agg(c.id::text, ',' ORDER BY c.name COLLATE \"C\"), '') "
        "FROM containers c WHERE c.database_id = u.database_id AND c.deleted_version IS NULL) "
        f"FROM unnest({', '.join(f'%({name})b::{kind}[]' for name, kind in _SUMMARIES)}) "
        f"AS u({', '.join(name for name, _ in _SUMMARIES)})"
    )

    @staticmethod
    def container_params(rows: Sequence[dict[str, Any]], held_by: list[int], sites: list[int], now: float
                         ) -> dict[str, Any]:
        return {**_arrays(_CONTAINERS, rows), "held_by": held_by, "sites": sites, "checked": now}

    @staticmethod
    def database_params(rows: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
        return _arrays(_DATABASES, rows)

    @staticmethod
    def totals_params(rows: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
        return {name: [row[name] for row in rows] for name in ("dataset_id", "version", "dn", "de", "db")}

    @staticmethod
    def tag_params(rows: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
        return _arrays(_TAG_STATS, rows)

    @staticmethod
    def summary_params(rows: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
        return _arrays(_SUMMARIES, rows)

    @staticmethod
    def log_params(rows: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
        return _arrays(_VERSIONS, rows)


def duplicate(result: CommitResult) -> CommitResult:
    """``result`` as a retry of its commit sees it."""
    return CommitResult(result.database_id, result.first_entry, result.version, duplicate=True)


# -- PostgreSQL: the whole group in ONE statement -----------------------------------------------
#
# The rows travel as one JSON text, an array of the commits, each with its containers and tag statistics
# as arrays of its own: one array parameter per column cost the driver 1–2 ms of Python a group to send
# (every element adapted on its own), while the catalog's version was locked. Each commit's text is made
# when the commit is prepared (``group_row``), before it queues for a group: the group's text is those
# texts joined, and what depends on the group — a commit's place ``ord`` (1..k, WITH ORDINALITY), its
# offset among the group's entries of its dataset and the dataset's running sums — is computed by the
# statement. Commit ``ord`` gets version ``base + ord``, which is unique, so the rows of the later tables
# find their database by its version. Data-modifying CTEs all run, referenced or not; foreign keys (none
# on PostgreSQL from level 20) would be checked at the end of the statement, when every row is in. The
# statement refuses itself rather than write less: a missing dataset leaves ``databases.dataset_id``
# NULL and a missing site ``replicas.site_id`` (looked up here by name), each a NOT NULL violation, so
# the caller may send the COMMIT with the statement, before its answer. From level 21 it also writes the
# group's ``tag_coverage`` rows (``cs``, ``kept``, ``cov``: what the statement trigger of level 19 would count
# for rows that all lie above every kept one) and sets ``giod.coverage_written`` for its transaction, which the
# trigger, at the statement's end, clears and returns on: the trigger's general statement was ~28 % of the
# server's CPU for a group of eight. The text is read as ``jsonb``: parsed once, where ``json`` was lexed again by
# each function that read a part of it (the array, each commit, its containers and its statistics: ~11 % of the
# server's CPU a group). A number in ``jsonb`` is a ``numeric``, which has no negative zero, so a statistic's bounds
# travel as the texts of their floats (``float8`` reads them as it read the numbers: -0.0 stays -0.0).

_GROUP = """
WITH u AS MATERIALIZED (
  SELECT o.ord, r.*, (sum(r.n_events) OVER w - r.n_events)::bigint AS off, (count(*) OVER w)::bigint AS dn,
         (sum(r.n_events) OVER w)::bigint AS de, (sum(r.bytes) OVER w)::bigint AS db
  FROM jsonb_array_elements(%(commits)s::jsonb) WITH ORDINALITY AS o(c, ord)
  CROSS JOIN LATERAL jsonb_to_record(o.c)
    AS r(dataset text, n_events bigint, bytes bigint, writer text, program text, program_version text,
         parameters text, idempotency_key text, site text, containers text, record text, held jsonb, stats jsonb)
  WINDOW w AS (PARTITION BY r.dataset ORDER BY o.ord)
), v AS (
  UPDATE federation SET version = version + %(k)s RETURNING version - %(k)s AS base
), e AS (
  UPDATE datasets AS ds SET next_entry = ds.next_entry + n.n
  FROM (SELECT dataset, sum(n_events)::bigint AS n FROM u GROUP BY dataset) AS n
  WHERE ds.name = n.dataset AND ds.deleted_version IS NULL
  RETURNING ds.name, ds.id, ds.next_entry - n.n AS start
), d AS (
  INSERT INTO databases (dataset_id, first_entry, n_events, bytes, created, created_version, writer, program,
                         program_version, parameters, idempotency_key)
  SELECT e.id, e.start + u.off, u.n_events, u.bytes, %(now)s, v.base + u.ord, u.writer, u.program,
         u.program_version, u.parameters, u.idempotency_key
  FROM u LEFT JOIN e ON e.name = u.dataset CROSS JOIN v
  RETURNING id, dataset_id, first_entry, created_version, n_events, program, bytes
), c AS (
  INSERT INTO containers (database_id, name, path, checksum, size, cluster_entries, schema_id, created_version,
                          program, program_version, parameters, created, format, cluster_checksums)
  SELECT d.id, x.name, x.path, x.checksum, x.size, x.cluster_entries, x.schema_id, d.created_version,
         x.program, x.program_version, x.parameters, %(now)s, x.format, x.cluster_checksums
  FROM u CROSS JOIN LATERAL jsonb_to_recordset(u.held)
       AS x(name text, path text, checksum text, size bigint, cluster_entries text, schema_id bigint,
            program text, program_version text, parameters text, format text, cluster_checksums text)
  CROSS JOIN v JOIN d ON d.created_version = v.base + u.ord
  RETURNING id, created_version, name
), r AS (
  INSERT INTO replicas (container_id, site_id, state, checked)
  SELECT c.id, (SELECT id FROM sites WHERE name = u.site), 'good', %(now)s
  FROM u CROSS JOIN v JOIN c ON c.created_version = v.base + u.ord
), t AS (
  INSERT INTO tag_stats (database_id, field, created_version, min, max)
  SELECT d.id, x.field, d.created_version, x.min, x.max
  FROM u CROSS JOIN LATERAL jsonb_to_recordset(u.stats) AS x(field text, min float8, max float8)
  CROSS JOIN v JOIN d ON d.created_version = v.base + u.ord
), l AS (
  INSERT INTO versions (version, created, description)
  SELECT d.created_version, %(now)s, 'commit ' || u.dataset || ' db ' || d.id
  FROM u CROSS JOIN v JOIN d ON d.created_version = v.base + u.ord
), sm AS (
  INSERT INTO database_summaries (database_id, created_version, dataset_id, first_entry, n_events, database_version,
                                  program, bytes, containers, record, created, writer, program_version, parameters,
                                  idempotency_key, container_ids)
  SELECT d.id, d.created_version, d.dataset_id, d.first_entry, d.n_events, d.created_version, d.program, d.bytes,
         u.containers, u.record, %(now)s, u.writer, u.program_version, u.parameters, u.idempotency_key,
         (SELECT coalesce(string_agg(c.id::text, ',' ORDER BY c.name COLLATE "C"), '')
          FROM c WHERE c.created_version = d.created_version)
  FROM u CROSS JOIN v JOIN d ON d.created_version = v.base + u.ord
), tt AS (
  INSERT INTO dataset_totals (dataset_id, version, n_databases, n_events, bytes)
  SELECT d.dataset_id, d.created_version, p.n_databases + u.dn, p.n_events + u.de, p.bytes + u.db
  FROM u CROSS JOIN v JOIN d ON d.created_version = v.base + u.ord
  CROSS JOIN LATERAL (SELECT n_databases, n_events, bytes FROM dataset_totals
                      WHERE dataset_id = d.dataset_id ORDER BY version DESC LIMIT 1) AS p
), cs AS (  -- each statistic with its dataset's running count, badness and widest span along the versions
  SELECT d.dataset_id AS ds, x.field, d.created_version AS version, count(*) OVER w AS n,
         bool_or(coalesce(x.min > x.max, false)) OVER w AS bad, max(SPAN) OVER w AS span
  FROM u CROSS JOIN LATERAL jsonb_to_recordset(u.stats) AS x(field text, min float8, max float8)
  CROSS JOIN v JOIN d ON d.created_version = v.base + u.ord
  WINDOW w AS (PARTITION BY d.dataset_id, x.field ORDER BY d.created_version)
), kept AS (  -- the newest coverage row of each dataset and field: every one is older than the group
  SELECT f.ds, f.field, p.n_databases, p.width
  FROM (SELECT DISTINCT ds, field FROM cs) AS f
  LEFT JOIN LATERAL (SELECT n_databases, width FROM tag_coverage WHERE dataset_id = f.ds AND field = f.field
                     ORDER BY version DESC LIMIT 1) AS p ON true
), cov AS (  -- as the trigger of level 19 counts them (level 21: it leaves a group's rows to the group)
  INSERT INTO tag_coverage (dataset_id, field, version, n_databases, width)
  SELECT cs.ds, cs.field, cs.version, coalesce(k.n_databases, 0) + cs.n,
         CASE WHEN cs.bad OR (k.n_databases IS NOT NULL AND k.width IS NULL) THEN NULL
              ELSE greatest(coalesce(k.width, 0), cs.span) END
  FROM cs JOIN kept k ON k.ds = cs.ds AND k.field = cs.field
)
SELECT id, first_entry, created_version FROM d CROSS JOIN (SELECT set_config('SETTING', 'on', true)) AS written
ORDER BY created_version
"""
# a statistic's max - min as level 11 computes it (infinite where the difference would overflow; none for min > max)
_SPAN = ("CASE WHEN x.max = x.min THEN 0 WHEN x.min > x.max THEN NULL WHEN x.min < 0 AND x.max > 1.79e308 + x.min "
         "THEN CAST('Infinity' AS DOUBLE PRECISION) ELSE x.max - x.min END")
_GROUP = _GROUP.replace("max(SPAN)", f"max({_SPAN})").replace("'SETTING'", f"'{COVERAGE_WRITTEN}'")

def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _bound_text(value: float | None) -> str | float | None:
    """A statistic's bound as the group statement reads it: the text ``json`` writes of a finite float (a
    ``numeric`` in ``jsonb`` would lose the sign of -0.0); anything else as it is (None, null; a value that is
    not finite is refused by the encoder, as before)."""
    return float.__repr__(value) if type(value) is float and math.isfinite(value) else value


def group_row(commit: DatabaseCommit, parameters: str, containers: list[dict[str, Any]], stats: list[dict[str, Any]],
              size: int, names: str, record: str) -> str:
    """A commit's element of the group statement's JSON array: its own fields, its containers (rows of
    ``commits._container_rows``) and its tag statistics (field, min, max); nothing that depends on its group."""
    c = commit
    return _json({
        "dataset": c.dataset, "n_events": c.n_events, "bytes": size, "writer": c.writer, "program": c.program,
        "program_version": c.program_version, "parameters": parameters, "idempotency_key": c.idempotency_key,
        "site": c.site, "containers": names, "record": record, "held": containers,
        "stats": [{"field": s["field"], "min": _bound_text(s["min"]), "max": _bound_text(s["max"])} for s in stats],
    })  # fmt: skip


def group_statement(commits: Sequence[PreparedCommit], now: float) -> tuple[str, dict[str, Any]]:
    """The one statement that registers ``commits`` (none a duplicate, each with containers) and its
    parameters."""
    rows = [pc.group_row or group_row(pc.commit, pc.parameters, pc.containers, pc.stats, pc.size, pc.names, pc.record)
            for pc in commits]
    return _GROUP, {"k": len(commits), "now": now, "commits": f"[{','.join(rows)}]"}
