"""ROOT and Parquet in and out: the back ends of ``giod import`` and ``giod export``.

:func:`inspect_tree` and :func:`iterate_events` read NanoAOD-style and flat
ROOT trees (and RNTuples) as giod events; :func:`import_root` stores them in
a dataset. :func:`write_root` and :func:`write_parquet` write events back out.
"""

from giod.interchange.encoding import RootNames
from giod.interchange.export import root_names, write_parquet, write_root
from giod.interchange.nanoaod import ImportReport, import_root, iterate_events
from giod.interchange.treelayout import TreeLayout, inspect_tree

__all__ = [
    "ImportReport",
    "RootNames",
    "TreeLayout",
    "import_root",
    "inspect_tree",
    "iterate_events",
    "root_names",
    "write_parquet",
    "write_root",
]
