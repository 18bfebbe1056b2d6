"""Step 16: on PostgreSQL, a statement's tag coverage is summed along its versions, not pair by pair.

Level 15 keeps ``tag_coverage`` once per statement that inserts statistics,
and finds what the statement adds at or before each version it touches by
joining every touched version with every version of the statement of the
same dataset and field: for a group of ``k`` registrations, ``k²`` pairs per
field. EXPLAIN ANALYZE of a group of 32 registrations of 7 statistics each
(the group commit forms groups that large when that many callers wait): the
trigger took 7.8 of the statement's 16.7 ms.

Here the same sums are running sums: the statement's versions and the rows
already kept after the first of them, in one list per dataset and field
ordered by version, each version once, and a window from the list's start
to the version (``sum``, ``bool_or``, ``max``) gives what the statement adds
at or before it. The rows written are the same as level 15's; the work is
linear in the rows. Nothing else changes: the deletion's row trigger,
SQLite's row triggers and the function's settings (no JIT) stay.
"""

from __future__ import annotations

from sqlalchemy import Connection

# a row's max - min as step 11 computes it (frozen here): infinite where the difference would overflow,
# which PostgreSQL refuses, and a sum rather than a product or quotient, which could underflow
_SPAN = ("CASE WHEN n.max = n.min THEN 0 WHEN n.min < 0 AND n.max > 1.79e308 + n.min "
         "THEN CAST('Infinity' AS DOUBLE PRECISION) ELSE n.max - n.min END")

_POSTGRES = [
    f"""CREATE OR REPLACE FUNCTION tag_coverage_added() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
    BEGIN
      WITH ev AS (  -- +1 at each row's version, -1 at the deletion of a row inserted deleted
        SELECT d.dataset_id AS ds, n.field, n.created_version AS version, 1 AS delta,
               coalesce(n.min > n.max, false) AS bad, {_SPAN} AS span
        FROM added n JOIN databases d ON d.id = n.database_id
        UNION ALL
        SELECT d.dataset_id, n.field, n.deleted_version, -1, false, NULL
        FROM added n JOIN databases d ON d.id = n.database_id WHERE n.deleted_version IS NOT NULL
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
      ), added_by AS (  -- what the statement adds at or before each of them
        SELECT ds, field, version, sum(delta) OVER w AS delta, bool_or(bad) OVER w AS bad, max(span) OVER w AS span
        FROM touched WINDOW w AS (PARTITION BY ds, field ORDER BY version)
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
