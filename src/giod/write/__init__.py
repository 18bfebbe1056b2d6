"""The write side of the store: new databases and later passes, committed one transaction each.

- ``writeoptions``: the encoding of container files, from the settings;
- ``clusters``: container files as writers cut them (clusters buffered to size,
  the commit record in each footer);
- ``writer``: :class:`~giod.write.writer.Writer`, new databases and the commit protocol;
- ``passwriter``: :class:`~giod.write.passwriter.PassWriter` and ``write_pass``,
  containers added to existing databases by a later pass.

Everything here takes a :class:`giod.store.snapshot.Snapshot`, never the public
``Dataset``; it reads through ``giod.read``, which never imports it.
"""
