"""Writers through a server hold their lease in the server's catalog: gc there spares their files."""

from __future__ import annotations

import awkward as ak
import pytest

from giod.errors import DataError, Forbidden, NotFound
from giod.store.consistency import gc
from giod.testing import synthetic


def test_gc_on_the_server_spares_a_remote_writers_published_files(served):
    served.local.create_dataset("daq", synthetic.schema())
    served.local.create_dataset("other", synthetic.schema())
    remote = served.remote(served.token("write", "daq"))
    seen = {}
    real = remote.catalog.commit_database

    def held(commit, **kw):  # between publishing on the server and registering there
        seen["files"] = sorted(i.path for i in served.local.site().walk())
        (lease,) = served.local.catalog.leases()
        seen["covered"] = all(lease.covers(p) for p in seen["files"])
        seen["removed"] = gc(served.local.store, grace_seconds=0)
        seen["containers"] = len(commit.containers)
        return real(commit, **kw)

    remote.catalog.commit_database = held
    with remote.dataset("daq").writer() as w:
        w.append(synthetic.events(30, seed=5))
    assert len(seen["files"]) == seen["containers"] and seen["covered"] and seen["removed"] == []
    # left idle for the remote federation's next writer (its prefix holds registered files only)
    (idle,) = served.local.catalog.leases()
    assert gc(served.local.store, grace_seconds=0) == []
    got = remote.dataset("daq").read(["hits"])
    assert ak.to_list(got.hits) == ak.to_list(synthetic.events(30, seed=5).hits)
    remote.close()
    assert served.local.catalog.leases() == []  # released when the federation closed


def test_lease_requests_are_scoped_and_bounded(served):
    served.local.create_dataset("daq", synthetic.schema())
    served.local.create_dataset("other", synthetic.schema())
    mine = served.remote(served.token("write", "daq"))
    theirs = served.remote(served.token("write", "other"))
    lease = mine.catalog.take_lease("local", "daq/abc", "me", 60)
    # another dataset's lease is as unknown to them as an id never given: left alone
    assert theirs.catalog.renew_leases([lease.id], 60) == set()
    theirs.catalog.release_lease(lease.id)
    with pytest.raises(NotFound):  # a dataset they may not see is one that does not exist
        theirs.catalog.take_lease("local", "daq/xyz", "them", 60)
    with pytest.raises(Forbidden):  # one they may see but not write
        served.remote(served.token("read", "daq")).catalog.take_lease("local", "daq/xyz", "them", 60)
    assert [x.id for x in served.local.catalog.leases()] == [lease.id]
    with pytest.raises(DataError, match="less than or equal to 86400"):
        mine.catalog.take_lease("local", "daq/abc", "me", 10 * 86_400)
    with pytest.raises(NotFound):
        mine.catalog.take_lease("nowhere", "daq/abc", "me", 60)
    assert mine.catalog.renew_leases([lease.id], 60) == {lease.id}
    mine.catalog.release_lease(lease.id)
    assert served.local.catalog.leases() == []
    mine.close()
    theirs.close()
