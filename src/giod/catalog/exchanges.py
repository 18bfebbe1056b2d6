"""Exchange cursors: how far a federation has copied from each source dataset.

A cursor is a source version: every database the source had committed up to
it has been copied (or found to hold no event of a skim). It only moves
forward, and moving it is a plain transaction that does not bump the
federation version: it is bookkeeping of the exchange, not content. What
makes a copy land once is the idempotency key of each copied database; the
cursor only spares a rerun the databases it has seen (``giod.exchange``).

A cursor belongs to the destination dataset it copies into: it is kept under
that dataset and its exchange key together, so the same key under another
dataset is another cursor, and whoever may write one dataset reaches no other
dataset's cursors (the server checks that write access, ``giod.server``).
Forgetting a cursor costs the next run one full listing, never a duplicate.
"""

from __future__ import annotations

import time

from sqlalchemy import Connection, delete, insert, select, update

from giod.catalog.engine import Transactions
from giod.catalog.tables import exchange_cursors

__all__ = ["ExchangeMethods", "cursor_row"]


def cursor_row(key: str, dataset: str) -> str:
    """The row of the cursor ``key`` of destination ``dataset`` (a key never holds '/', names rarely do)."""
    return f"{dataset}/{key}"


class ExchangeMethods(Transactions):
    """``exchange_cursor``, ``advance_exchange_cursor`` and ``forget_exchange_cursor`` of ``Catalog``."""

    def exchange_cursor(self, key: str, dataset: str) -> int | None:
        """The source version the exchange ``key`` into ``dataset`` has copied up to; None before its first run."""
        q = select(exchange_cursors.c.version).where(exchange_cursors.c.key == cursor_row(key, dataset))
        found = self._read(lambda conn: conn.execute(q).scalar_one_or_none())
        return None if found is None else int(found)

    def advance_exchange_cursor(self, key: str, source: str, dataset: str, version: int) -> int:
        """Move the cursor ``key`` of ``dataset`` to ``version`` unless it is already further; returns where it is."""
        row = cursor_row(key, dataset)

        def work(conn: Connection) -> int:
            t = exchange_cursors
            now = time.time()
            held = conn.execute(select(t.c.version).where(t.c.key == row)).scalar_one_or_none()
            if held is None:
                conn.execute(insert(t).values(key=row, source=source, dataset=dataset, version=version, updated=now))
                return version
            if int(held) >= version:
                return int(held)
            conn.execute(update(t).where(t.c.key == row).values(version=version, updated=now))
            return version

        return self._run(work, write=True)

    def forget_exchange_cursor(self, key: str, dataset: str) -> bool:
        """Remove the cursor ``key`` of ``dataset`` (the next run lists the source whole); False if there was none."""
        q = delete(exchange_cursors).where(exchange_cursors.c.key == cursor_row(key, dataset))
        return bool(self._run(lambda conn: conn.execute(q).rowcount, write=True))
