"""Step 11: per dataset and tag field, how many databases have statistics, kept per version.

Pruning a selection by tag statistics must keep every database with no
statistics row for a field it bounds. ``tag_coverage`` holds, for every
version that changed them, the number of a dataset's databases with a
visible row for a field and the widest ``max - min`` any such row ever had
(NULL once a row had ``min > max``). When the number equals the dataset's
databases (``dataset_totals``), the candidates are found through the new
indexes on ``tag_stats (field, min)`` and ``(field, max)``: a range of
``min`` no wider than the selection plus that width (``giod.catalog.planning``).

Triggers on ``tag_stats`` keep the table in step with every write of
statistics, whichever path writes them (a commit, a group, a later pass, a
deleted database or dataset): rows inserted add one at their version, rows
marked deleted take one away at theirs. A catalog migrated here gets one row
per live dataset and field at the current version; a snapshot older than
that finds no row and is pruned by the full check, as before.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Connection, Double, Index, Integer, MetaData, Table, Text, text

_Id = BigInteger().with_variant(Integer(), "sqlite")
_metadata = MetaData()
# The table and indexes as this step creates them (frozen: not taken from tables.py).
_coverage = Table(
    "tag_coverage",
    _metadata,
    Column("dataset_id", _Id, primary_key=True, autoincrement=False),
    Column("field", Text, primary_key=True),
    Column("version", BigInteger, primary_key=True, autoincrement=False),
    Column("n_databases", BigInteger, nullable=False),
    Column("width", Double),
)
_stats = Table("tag_stats", _metadata, Column("field", Text), Column("min", Double), Column("max", Double))
_by_min = Index("tag_stats_by_field_min", _stats.c.field, _stats.c.min)
_by_max = Index("tag_stats_by_field_max", _stats.c.field, _stats.c.max)


# infinity in each dialect's SQL (PostgreSQL reads 9e999 as a numeric too large for a double)
_INFINITY = {"sqlite": "9e999", "postgresql": "CAST('Infinity' AS DOUBLE PRECISION)"}


def _span(high: str, low: str, infinity: str) -> str:
    """``high - low`` (high >= low), infinite where it would overflow: PostgreSQL refuses a double that
    overflows (1e308 - -1e308), and one that underflows in a product or quotient (5e-324 / 2), either of
    which would refuse a sound commit; so the test is a sum: high - low > 1.79e308 only if low < 0 and
    high > 1.79e308 + low, which neither overflows nor underflows (1.79e308 leaves room for rounding)."""
    return (f"CASE WHEN {high} = {low} THEN 0 WHEN {low} < 0 AND {high} > 1.79e308 + {low} THEN {infinity} "
            f"ELSE {high} - {low} END")


def _widened(width: str, infinity: str) -> str:
    """The width kept after a row with NEW.min, NEW.max, given ``width`` before it."""
    span = _span("NEW.max", "NEW.min", infinity)
    return (f"CASE WHEN {width} IS NULL OR NEW.min > NEW.max THEN NULL "
            f"WHEN {span} > {width} THEN {span} ELSE {width} END")


def _change(ds: str, field: str, version: str, delta: str, widen: bool, infinity: str) -> str:
    """Two SQL statements adding ``delta`` to the coverage of (ds, field) from ``version`` on.

    The row at ``version`` is made from the latest one before it (or zero), or changed
    when it exists; rows after it change too (a group may write its versions out of
    order). ``widen``: the row's bounds may widen the width. Every piece is SQL of this module.
    """
    base = "CASE WHEN p.n_databases IS NULL THEN 0 ELSE p.width END"
    made, kept, later = (_widened(base, infinity), _widened("tag_coverage.width", infinity),
                         _widened("width", infinity)) if widen else (
        base, "tag_coverage.width", "width")
    return f"""
    INSERT INTO tag_coverage (dataset_id, field, version, n_databases, width)
      SELECT {ds}, {field}, {version}, coalesce(p.n_databases, 0) + ({delta}), {made}
      FROM (SELECT 1 AS one) AS o LEFT JOIN (
        SELECT n_databases, width FROM tag_coverage
        WHERE dataset_id = {ds} AND field = {field} AND version < {version}
        ORDER BY version DESC LIMIT 1) AS p ON 1 = 1
      WHERE 1 = 1
      ON CONFLICT (dataset_id, field, version)
      DO UPDATE SET n_databases = tag_coverage.n_databases + ({delta}), width = {kept};
    UPDATE tag_coverage SET n_databases = n_databases + ({delta}), width = {later}
      WHERE dataset_id = {ds} AND field = {field} AND version > {version};
    """  # noqa: S608


_DATASET = "(SELECT d.dataset_id FROM databases d WHERE d.id = NEW.database_id)"

_SQLITE = [
    f"""CREATE TRIGGER tag_coverage_added AFTER INSERT ON tag_stats BEGIN
    {_change(_DATASET, "NEW.field", "NEW.created_version", "1", widen=True, infinity=_INFINITY["sqlite"])}
    END""",
    f"""CREATE TRIGGER tag_coverage_added_deleted AFTER INSERT ON tag_stats
    WHEN NEW.deleted_version IS NOT NULL BEGIN
    {_change(_DATASET, "NEW.field", "NEW.deleted_version", "-1", widen=False, infinity=_INFINITY["sqlite"])}
    END""",
    f"""CREATE TRIGGER tag_coverage_deleted AFTER UPDATE OF deleted_version ON tag_stats
    WHEN OLD.deleted_version IS NULL AND NEW.deleted_version IS NOT NULL BEGIN
    {_change(_DATASET, "NEW.field", "NEW.deleted_version", "-1", widen=False, infinity=_INFINITY["sqlite"])}
    END""",
]

_POSTGRES = [
    f"""CREATE FUNCTION tag_coverage_kept() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE ds bigint;
    BEGIN
      SELECT d.dataset_id INTO ds FROM databases d WHERE d.id = NEW.database_id;
      IF TG_OP = 'INSERT' THEN
        {_change("ds", "NEW.field", "NEW.created_version", "1", widen=True, infinity=_INFINITY["postgresql"])}
      END IF;
      IF NEW.deleted_version IS NOT NULL AND (TG_OP = 'INSERT' OR OLD.deleted_version IS NULL) THEN
        {_change("ds", "NEW.field", "NEW.deleted_version", "-1", widen=False, infinity=_INFINITY["postgresql"])}
      END IF;
      RETURN NULL;
    END $$""",  # noqa: S608
    "CREATE TRIGGER tag_coverage_added AFTER INSERT ON tag_stats FOR EACH ROW EXECUTE FUNCTION tag_coverage_kept()",
    """CREATE TRIGGER tag_coverage_deleted AFTER UPDATE OF deleted_version ON tag_stats FOR EACH ROW
    WHEN (OLD.deleted_version IS NULL AND NEW.deleted_version IS NOT NULL) EXECUTE FUNCTION tag_coverage_kept()""",
]

_FILL = """
INSERT INTO tag_coverage (dataset_id, field, version, n_databases, width)
SELECT d.dataset_id, t.field, f.version,
       sum(CASE WHEN t.deleted_version IS NULL THEN 1 ELSE 0 END),
       CASE WHEN max(CASE WHEN t.min > t.max THEN 1 ELSE 0 END) = 1 THEN NULL
            ELSE coalesce(max({span}), 0) END
FROM tag_stats t JOIN databases d ON d.id = t.database_id JOIN datasets ds ON ds.id = d.dataset_id
CROSS JOIN federation f
WHERE ds.deleted_version IS NULL
GROUP BY d.dataset_id, t.field, f.version
"""


def fill(conn: Connection) -> None:
    """One row per live dataset and tag field at the current version, counted from ``tag_stats``."""
    infinity = _INFINITY["postgresql" if conn.dialect.name == "postgresql" else "sqlite"]
    conn.execute(text(_FILL.format(span=_span("t.max", "t.min", infinity))))


def upgrade(conn: Connection) -> None:
    _coverage.create(conn, checkfirst=False)
    _by_min.create(conn, checkfirst=False)
    _by_max.create(conn, checkfirst=False)
    fill(conn)
    for statement in _POSTGRES if conn.dialect.name == "postgresql" else _SQLITE:
        conn.exec_driver_sql(statement)
