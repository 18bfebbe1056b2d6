"""Step 9: each dataset's totals kept per version, and databases indexed by their first entry.

``dataset_totals`` holds, for every version that changed a dataset's
content, its number of databases, events and container bytes then; the
summary of a dataset at version V (``len(ds)``) is the latest row at or
before V, one index lookup however many databases there are, instead of a
count over all of them. The commit that changes the content writes the row
in its own transaction. A catalog migrated here gets one row per live
dataset at the current version; a snapshot older than that is counted as
before.

``databases_by_dataset_entry`` finds the database that holds an entry
(``Catalog.database_at``) and lists a dataset in entry order without a sort.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Connection, Index, Integer, MetaData, Table, text

_Id = BigInteger().with_variant(Integer(), "sqlite")
_metadata = MetaData()
# The table as this step creates it (frozen: not taken from tables.py).
_totals = Table(
    "dataset_totals",
    _metadata,
    Column("dataset_id", _Id, primary_key=True, autoincrement=False),
    Column("version", BigInteger, primary_key=True, autoincrement=False),
    Column("n_databases", BigInteger, nullable=False),
    Column("n_events", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
)
_databases = Table(
    "databases", _metadata, Column("dataset_id", _Id), Column("first_entry", BigInteger)
)
_by_entry = Index("databases_by_dataset_entry", _databases.c.dataset_id, _databases.c.first_entry)

_FILL = """
INSERT INTO dataset_totals (dataset_id, version, n_databases, n_events, bytes)
SELECT ds.id, f.version,
       (SELECT count(*) FROM databases d WHERE d.dataset_id = ds.id AND d.deleted_version IS NULL),
       (SELECT coalesce(sum(d.n_events), 0) FROM databases d
         WHERE d.dataset_id = ds.id AND d.deleted_version IS NULL),
       (SELECT coalesce(sum(c.size), 0) FROM containers c JOIN databases d ON d.id = c.database_id
         WHERE d.dataset_id = ds.id AND d.deleted_version IS NULL AND c.deleted_version IS NULL)
FROM datasets ds CROSS JOIN federation f
WHERE ds.deleted_version IS NULL
"""


def upgrade(conn: Connection) -> None:
    _totals.create(conn, checkfirst=False)
    _by_entry.create(conn, checkfirst=False)
    conn.execute(text(_FILL))
