"""Step 19: on PostgreSQL, the statement coverage trigger looks up the kept coverage once per field.

Level 18's trigger looked up, for every (dataset, field, version) a statement
touches, the latest kept ``tag_coverage`` row at or before that version: a
group of eight registrations of six statistics each made 48 backward index
descents, about a third of the trigger's time (EXPLAIN ANALYZE: 0.34 of
0.94 ms), and more once the table outgrows the server's cache. Yet when no
row is kept after the statement's first version of a field — a registration
always appends at the newest versions — every one of those lookups finds
the same row, the one at or before that first version.

Here that row is looked up once per dataset and field, with whether any row
is kept after the first version; only a field that has such rows (a
statement of rows at versions before the kept ones) looks up each version
as before. The sort that ends before any row is written now also holds the
per-field lookups. The rows written are the same as level 18's.
"""

from __future__ import annotations

from sqlalchemy import Connection

# a row's max - min as step 11 computes it: infinite where the difference would overflow, which PostgreSQL
# refuses, and a sum rather than a product or quotient, which could underflow; none for a row whose min lies
# above its max (its coverage is unknown, ``bad``)
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
      ), m AS (  -- per dataset and field: the first version, the row kept at or before it, any kept after it
        SELECT f.ds, f.field, f.first, p.n_databases, p.width,
               EXISTS (SELECT 1 FROM tag_coverage WHERE dataset_id = f.ds AND field = f.field
                       AND version > f.first) AS later
        FROM (SELECT ds, field, min(version) AS first FROM g GROUP BY ds, field) AS f
        LEFT JOIN LATERAL (SELECT n_databases, width FROM tag_coverage
                           WHERE dataset_id = f.ds AND field = f.field AND version <= f.first
                           ORDER BY version DESC LIMIT 1) AS p ON true
      ), later AS (  -- the rows kept after the statement's first version, which it changes too
        SELECT c.dataset_id AS ds, c.field, c.version, 0::bigint AS delta, false AS bad, NULL::float8 AS span
        FROM m CROSS JOIN LATERAL (SELECT dataset_id, field, version FROM tag_coverage
                                   WHERE m.later AND dataset_id = m.ds AND field = m.field AND version > m.first
                                   OFFSET 0) AS c
      ), touched AS (  -- each version once
        SELECT ds, field, version, sum(delta) AS delta, bool_or(bad) AS bad, max(span) AS span
        FROM (SELECT * FROM g UNION ALL SELECT * FROM later) AS x GROUP BY ds, field, version
      ), added_by AS (  -- what the statement adds at or before each of them, latest first, with its field's row
        SELECT s.*, m.later, m.n_databases AS kept_n, m.width AS kept_width FROM (
          SELECT ds, field, version, sum(delta) OVER w AS delta, bool_or(bad) OVER w AS bad,
                 max(span) OVER w AS span
          FROM touched WINDOW w AS (PARTITION BY ds, field ORDER BY version)) AS s
        JOIN m ON m.ds = s.ds AND m.field = s.field
        ORDER BY s.ds, s.field, s.version DESC
      )
      INSERT INTO tag_coverage (dataset_id, field, version, n_databases, width)
      SELECT a.ds, a.field, a.version, coalesce(p.n_databases, 0) + a.delta,
             CASE WHEN a.bad OR (p.n_databases IS NOT NULL AND p.width IS NULL) THEN NULL
                  ELSE greatest(coalesce(p.width, 0), a.span) END
      FROM added_by a
      LEFT JOIN LATERAL (  -- each version's own lookup, only for a field with rows kept after its first
        SELECT n_databases, width FROM tag_coverage
        WHERE a.later AND dataset_id = a.ds AND field = a.field AND version <= a.version
        ORDER BY version DESC LIMIT 1) AS q ON true
      CROSS JOIN LATERAL (SELECT CASE WHEN a.later THEN q.n_databases ELSE a.kept_n END AS n_databases,
                                 CASE WHEN a.later THEN q.width ELSE a.kept_width END AS width) AS p
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
