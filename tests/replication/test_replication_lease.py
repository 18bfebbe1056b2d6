"""A replication in progress holds a lease at its destination: gc there spares its temporary files."""

from __future__ import annotations

import threading
from pathlib import Path

from giod.replication import replicate
from giod.storage.site import is_temporary
from giod.store.consistency import gc


def test_gc_with_no_grace_spares_copies_in_flight(home, tmp_path: Path):
    home.add_site("backup", str(tmp_path / "backup"), 5)
    backup = home.site("backup")
    seen: list[tuple[str, list]] = []
    once = threading.Lock()

    class Held:
        """The destination's pending file: gc runs right before it is published."""

        def __init__(self, pending):
            self.pending = pending

        def __getattr__(self, name):
            return getattr(self.pending, name)

        def publish(self):
            if once.acquire(blocking=False):
                temporaries = [i.path for i in backup.walk() if is_temporary(i.path)]
                seen.append((temporaries, gc(home.store, grace_seconds=0)))
            return self.pending.publish()

    create = backup.create
    backup.create = lambda path, **kw: Held(create(path, **kw))
    r = replicate(home.catalog, home.site, "qcd", "backup", streams=1)
    ((temporaries, removed),) = seen
    assert temporaries and removed == []
    assert r.ok and r.failed == [] and r.attempts == r.copied
    assert home.catalog.leases("backup") == []  # released when the run ended (the writers' lease is at home)
