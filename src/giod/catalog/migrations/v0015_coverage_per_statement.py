"""Step 15: on PostgreSQL, the tag coverage is kept once per statement that inserts statistics.

Level 11 keeps ``tag_coverage`` with a row trigger on ``tag_stats``: for every
inserted row, a lookup of its dataset, an ``INSERT … ON CONFLICT`` and an
``UPDATE`` of the later rows, three statements of PL/pgSQL per row. A group
of 8 registrations of 6 tag statistics each ran them 48 times, more than half
of the server's time for the whole group.

Here inserts are handled by one statement per inserting statement, over its
rows (``REFERENCING NEW TABLE``): each row adds one at its version (widening
the width by its ``max - min``) and, if inserted already deleted, takes one
away at its deletion; the coverage at every version touched, new or already
kept, is the latest row at or before it (or zero) plus what the statement
adds at or before it. Counts add and widths widen in any order, so the rows
are exactly those the row trigger made one row at a time, whatever the order
of the statement's versions. A deletion (an ``UPDATE`` of ``deleted_version``)
keeps its row trigger. SQLite has no transition tables and keeps its row
triggers; nothing changes there.

The function runs without JIT: the planner cannot know how many later rows a
(dataset, field) has, and its guess over many datasets would pass the JIT
threshold, whose compilation costs tens of milliseconds for a statement that
takes a fraction of one.
"""

from __future__ import annotations

from sqlalchemy import Connection

# a row's max - min as step 11 computes it (frozen here): infinite where the difference would overflow,
# which PostgreSQL refuses, and a sum rather than a product or quotient, which could underflow
_SPAN = ("CASE WHEN n.max = n.min THEN 0 WHEN n.min < 0 AND n.max > 1.79e308 + n.min "
         "THEN CAST('Infinity' AS DOUBLE PRECISION) ELSE n.max - n.min END")

_POSTGRES = [
    "DROP TRIGGER tag_coverage_added ON tag_stats",
    f"""CREATE FUNCTION tag_coverage_added() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
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
      ), touched AS (  -- the statement's versions, and the rows kept after the first of them
        SELECT ds, field, version FROM g
        UNION
        SELECT c.dataset_id, c.field, c.version
        FROM (SELECT ds, field, min(version) AS first FROM g GROUP BY ds, field) AS m
        CROSS JOIN LATERAL (SELECT dataset_id, field, version FROM tag_coverage
                            WHERE dataset_id = m.ds AND field = m.field AND version > m.first
                            OFFSET 0) AS c
      ), added_by AS (  -- what the statement adds at or before each of them
        SELECT t.ds, t.field, t.version, sum(g.delta) AS delta, bool_or(g.bad) AS bad, max(g.span) AS span
        FROM touched t JOIN g ON g.ds = t.ds AND g.field = t.field AND g.version <= t.version
        GROUP BY t.ds, t.field, t.version
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
    """CREATE TRIGGER tag_coverage_added AFTER INSERT ON tag_stats REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION tag_coverage_added()""",
]


def upgrade(conn: Connection) -> None:
    if conn.dialect.name != "postgresql":
        return
    for statement in _POSTGRES:
        conn.exec_driver_sql(statement)
