"""The store: the catalog and the sites beneath the public ``Federation`` and ``Dataset``.

``snapshot`` holds :class:`~giod.store.snapshot.Store` (catalog, sites,
schemas, the choice of replica on every read) and
:class:`~giod.store.snapshot.Snapshot` (one dataset at one version), which the
read side (``giod.read``) and the write side (``giod.write``) receive.
"""
