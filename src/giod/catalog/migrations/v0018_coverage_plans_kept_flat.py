"""Step 18: on PostgreSQL, the statement coverage trigger's plan stays a keyed lookup as the catalog grows.

A PL/pgSQL function plans each of its statements once per server session
and keeps the plan until a table it reads is analysed or altered. Level 16's
trigger found each new statistics row's dataset by joining its transition
table with ``databases``: planned while ``databases`` was small (a catalog's
first registrations, a table never analysed), that join is a hash join over
a sequential scan of every database, and a long-lived connection kept it
while the catalog grew: a registration cost a scan of ``databases``. With 8
writer threads at 40,000 databases the scan took 2.7–5 of a group's ~6 ms,
at 1,000,000 a hundred times that.

Here the dataset is a lookup by key for each row (a ``LATERAL`` subquery,
planned as a parameterised scan), and the function runs with
``enable_seqscan = off``: every table it reads is read by its key, whatever
statistics the plan was made with, so its work follows the rows the
statement inserts, not the table.

The latest kept coverage at or before each version is also looked up before
any row is written, the versions in decreasing order: inserting in
increasing order, each lookup's backward index scan stepped over every entry
the statement had just inserted below it (invisible to its snapshot), k²
steps for k versions of a field — 1.1 s of a 2,000-database
``commit_databases``. The rows written are the same as level 16's.
"""

from __future__ import annotations

from sqlalchemy import Connection

# a row's max - min as step 11 computes it: infinite where the difference would overflow, which PostgreSQL
# refuses, and a sum rather than a product or quotient, which could underflow; none for a row whose min lies
# above its max (its coverage is unknown, ``bad``), whose difference overflowed the other way (-1e308 - 1e308:
# a commit of such statistics was refused before this level)
_SPAN = ("CASE WHEN n.max = n.min THEN 0 WHEN n.min > n.max THEN NULL WHEN n.min < 0 AND n.max > 1.79e308 + n.min "
         "THEN CAST('Infinity' AS DOUBLE PRECISION) ELSE n.max - n.min END")

_POSTGRES = [
    f"""CREATE OR REPLACE FUNCTION tag_coverage_added() RETURNS trigger LANGUAGE plpgsql
    SET jit = off SET enable_seqscan = off AS $$
    BEGIN
      WITH ev AS (  -- +1 at each row's version, -1 at the deletion of a row inserted deleted
        SELECT d.dataset_id AS ds, n.field, n.created_version AS version, 1 AS delta,
               coalesce(n.min > n.max, false) AS bad, {_SPAN} AS span
        FROM added n CROSS JOIN LATERAL (SELECT dataset_id FROM databases WHERE id = n.database_id OFFSET 0) AS d
        UNION ALL
        SELECT d.dataset_id, n.field, n.deleted_version, -1, false, NULL
        FROM added n CROSS JOIN LATERAL (SELECT dataset_id FROM databases WHERE id = n.database_id OFFSET 0) AS d
        WHERE n.deleted_version IS NOT NULL
      ), g AS (
        SELECT ds, field, version, sum(delta) AS delta, bool_or(bad) AS bad, max(span) AS span
        FROM ev GROUP BY ds, field, version
      ), later AS (  -- the rows kept after the statement's first version, which it changes too
        SELECT c.dataset_id AS ds, c.field, c.version, 0::bigint AS delta, false AS bad, NULL::float8 AS span
        FROM (SELECT ds, field, min(version) AS first FROM g GROUP BY ds, field) AS m
        CROSS JOIN LATERAL (SELECT dataset_id, field, version FROM tag_coverage
                            WHERE dataset_id = m.ds AND field = m.field AND version > m.first
                            OFFSET 0) AS c
      ), touched AS (  -- each version once
        SELECT ds, field, version, sum(delta) AS delta, bool_or(bad) AS bad, max(span) AS span
        FROM (SELECT * FROM g UNION ALL SELECT * FROM later) AS x GROUP BY ds, field, version
      ), added_by AS (  -- what the statement adds at or before each of them, latest first
        SELECT * FROM (
          SELECT ds, field, version, sum(delta) OVER w AS delta, bool_or(bad) OVER w AS bad,
                 max(span) OVER w AS span
          FROM touched WINDOW w AS (PARTITION BY ds, field ORDER BY version)) AS s
        ORDER BY ds, field, version DESC
      )
      INSERT INTO tag_coverage (dataset_id, field, version, n_databases, width)
      SELECT a.ds, a.field, a.version, coalesce(p.n_databases, 0) + a.delta,
             CASE WHEN a.bad OR (p.n_databases IS NOT NULL AND p.width IS NULL) THEN NULL
                  ELSE greatest(coalesce(p.width, 0), a.span) END
      FROM added_by a LEFT JOIN LATERAL (
        SELECT n_databases, width FROM tag_coverage
        WHERE dataset_id = a.ds AND field = a.field AND version <= a.version
        ORDER BY version DESC LIMIT 1) AS p ON true
      ON CONFLICT (dataset_id, field, version)
      DO UPDATE SET n_databases = excluded.n_databases, width = excluded.width;
      RETURN NULL;
    END $$""",  # noqa: S608 - SQL of this module and of step 11
]


def upgrade(conn: Connection) -> None:
    if conn.dialect.name != "postgresql":
        return
    for statement in _POSTGRES:
        conn.exec_driver_sql(statement)
