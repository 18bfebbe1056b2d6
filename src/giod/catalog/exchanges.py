"""Exchange cursors: how far a federation has copied from each source dataset.

A cursor is a source version: every database the source had committed up to
it has been copied (or found to hold no event of a skim). It only moves
forward, and moving it is a plain transaction that does not bump the
federation version: it is bookkeeping of the exchange, not content. What
makes a copy land once is the idempotency key of each copied database; the
cursor only spares a rerun the databases it has seen (``giod.exchange``).
"""

from __future__ import annotations

import time

from sqlalchemy import Connection, insert, select, update

from giod.catalog.engine import Transactions
from giod.catalog.tables import exchange_cursors

__all__ = ["ExchangeMethods"]


class ExchangeMethods(Transactions):
    """``exchange_cursor`` and ``advance_exchange_cursor`` of ``Catalog``."""

    def exchange_cursor(self, key: str) -> int | None:
        """The source version the exchange ``key`` has copied up to; None before its first run."""
        q = select(exchange_cursors.c.version).where(exchange_cursors.c.key == key)
        found = self._read(lambda conn: conn.execute(q).scalar_one_or_none())
        return None if found is None else int(found)

    def advance_exchange_cursor(self, key: str, source: str, dataset: str, version: int) -> int:
        """Move the cursor ``key`` to ``version`` unless it is already further; returns where it is."""

        def work(conn: Connection) -> int:
            t = exchange_cursors
            now = time.time()
            held = conn.execute(select(t.c.version).where(t.c.key == key)).scalar_one_or_none()
            if held is None:
                conn.execute(insert(t).values(key=key, source=source, dataset=dataset, version=version,
                                              updated=now))
                return version
            if int(held) >= version:
                return int(held)
            conn.execute(update(t).where(t.c.key == key).values(version=version, updated=now))
            return version

        return self._run(work, write=True)
