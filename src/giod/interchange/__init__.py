"""ROOT and Parquet in and out: the back ends of ``giod import`` and ``giod export``.

:func:`inspect_tree` and :func:`iterate_events` read NanoAOD-style and flat
ROOT trees (and RNTuples) as giod events; :func:`import_root` stores them in
a dataset (and a NanoAOD file's ``Runs`` tree into the linked dataset
``<name>.Runs``). :func:`write_root` and :func:`write_parquet` write events
back out; :func:`linked_trees` finds the trees to write beside them.
"""

from giod.interchange.encoding import RootNames
from giod.interchange.export import linked_trees, root_names, write_parquet, write_root
from giod.interchange.nanoaod import ImportReport, import_root, iterate_events
from giod.interchange.treelayout import TreeLayout, inspect_tree

__all__ = [
    "ImportReport",
    "RootNames",
    "TreeLayout",
    "import_root",
    "inspect_tree",
    "iterate_events",
    "linked_trees",
    "root_names",
    "write_parquet",
    "write_root",
]
