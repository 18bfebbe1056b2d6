"""Step 8: the cursors of dataset exchanges, and a notification on every commit (PostgreSQL).

``exchange_cursors`` holds, in the federation that receives an exchange,
how far it has copied from each source (``giod.catalog.exchanges``). Like
leases, cursors are bookkeeping, not federation content: not versioned.

On PostgreSQL a trigger on the ``federation`` row sends ``NOTIFY
giod_versions, '<version>'`` whenever the version moves; the notification
is delivered when the transaction commits, so a listener never hears of a
version it cannot read yet. SQLite has no such thing: local followers watch
the catalog file instead (``giod.exchange.feed``).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Connection, Double, MetaData, Table, Text

# The table as this step creates it (frozen: not taken from tables.py).
_cursors = Table(
    "exchange_cursors",
    MetaData(),
    Column("key", Text, primary_key=True),
    Column("source", Text, nullable=False),
    Column("dataset", Text, nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("updated", Double, nullable=False),
)

CHANNEL = "giod_versions"

_FUNCTION = f"""
CREATE OR REPLACE FUNCTION giod_notify_version() RETURNS trigger AS $$
BEGIN
    IF NEW.version IS DISTINCT FROM OLD.version THEN
        PERFORM pg_notify('{CHANNEL}', NEW.version::text);
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql
"""

_TRIGGER = """
CREATE TRIGGER giod_version_notify AFTER UPDATE ON federation
FOR EACH ROW EXECUTE FUNCTION giod_notify_version()
"""


def upgrade(conn: Connection) -> None:
    _cursors.create(conn, checkfirst=False)
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(_FUNCTION)
        conn.exec_driver_sql("DROP TRIGGER IF EXISTS giod_version_notify ON federation")
        conn.exec_driver_sql(_TRIGGER)
