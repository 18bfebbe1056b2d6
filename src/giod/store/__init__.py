"""The store: the catalog and the sites beneath the public ``Federation`` and ``Dataset``.

- ``snapshot``: :class:`~giod.store.snapshot.Store` (the catalog, its sites,
  the schemas, the choice of replica on every read) and
  :class:`~giod.store.snapshot.Snapshot` (one dataset at one version), which
  the read side (``giod.read``) and the write side (``giod.write``) receive;
- ``tagstats``: each database's (min, max) of every tag, for the catalog to prune by;
- ``lastread``: the databases read, written to the catalog in batches (tier rules by last read);
- ``consistency``: ``fsck``, ``gc`` and ``recover``, the catalog and the sites
  checked against each other.
"""
