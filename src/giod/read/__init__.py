"""The read side of the store: which events pass, and their columns read from a pinned snapshot.

- ``objects``: OIDs, object views, relation navigation;
- ``tagindex``: each database's sorted tag index, and selections through it;
- ``projection``: the read path (projection, column resolution, database reads, assembly);
- ``selection``: :class:`~giod.read.selection.Selection`, the events passing a
  tag or object expression, read through ``projection``.

Everything here takes a :class:`giod.store.snapshot.Snapshot`, never the public ``Dataset``.
"""
