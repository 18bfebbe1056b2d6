"""dask-awkward interoperability: a selection as a lazy ``dask_awkward.Array`` (also ``giod.dask``).

``from_selection(sel, columns)`` gives one partition per database of the
selection's pinned snapshot (split further for large databases, as
``giod.distributed.map_selection`` does). Column projection works: dask-awkward finds the
columns a computation touches, and each partition then reads only those
(``events.jets.pt`` reads ``jets.pt`` and nothing else). The partitions are
read by workers that re-open the federation by its path or URL, like the
tasks of ``giod.distributed.map_selection``, so the array computes on any Dask scheduler.

Relations are kept as their index fields (``jets.tracks_index``); the
navigable views of ``Selection.read`` share buffers between collections,
which a columnar graph cannot project, and are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import awkward as ak

from giod.distributed import Job, Partition, plan, read_partition
from giod.errors import MissingDependency
from giod.read.objects import INDEX_SUFFIX, without_views
from giod.schema import Schema

if TYPE_CHECKING:
    from giod.read.selection import Selection

__all__ = ["from_selection"]

try:
    import dask_awkward as dak
    from dask_awkward.lib.io.columnar import ColumnProjectionMixin
    from dask_awkward.lib.unproject_layout import unproject_layout
except ImportError:  # the class below still needs a base; from_selection says what to install
    dak = None
    ColumnProjectionMixin = object


def _giod_column(path: str, schema: Schema) -> str:
    """A dask-awkward column path (``jets.tracks_index``) as a giod column (``jets.tracks``)."""
    head, _, rest = path.partition(".")
    if head in schema.collections and rest:
        member = rest.split(".", 1)[0]
        base = member.removesuffix(INDEX_SUFFIX)
        if member.endswith(INDEX_SUFFIX) and base in schema.collection_type(head).relations:
            member = base
        return f"{head}.{member}"
    return head


class GiodSource(ColumnProjectionMixin):  # type: ignore[misc]  # dask-awkward is untyped
    """Reads one partition of a selection; dask-awkward narrows its columns with ``project_columns``."""

    def __init__(self, job: Job, schema_text: str, form: Any, original_form: Any = None):
        self.job = job
        self.schema_text = schema_text
        self.form = form
        self.original_form = original_form
        self.behavior: dict[str, Any] | None = None
        self.attrs: dict[str, Any] | None = None

    @property
    def use_optimization(self) -> bool:
        return True

    @property
    def columns(self) -> tuple[str, ...]:
        """The giod columns this source reads."""
        return self.job.columns

    def __call__(self, part: Partition) -> ak.Array:
        schema = Schema.from_text(self.schema_text)
        chunk, _ = read_partition(self.job, part)
        events = without_views(chunk, schema)
        wanted = [f for f in self.form.fields if f in events.fields]
        events = events[wanted] if wanted != list(events.fields) else events
        if self.original_form is None:
            return events
        return ak.Array(unproject_layout(self.original_form, events.layout))

    def project_columns(self, columns: frozenset[str]) -> GiodSource:
        schema = Schema.from_text(self.schema_text)
        full = self.original_form if self.original_form is not None else self.form
        form = full.select_columns(sorted(columns)) if columns else full.select_columns([full.fields[0]])
        order = [c for c in full.columns() if c in columns] or [full.fields[0]]
        giod_columns = tuple(dict.fromkeys(_giod_column(c, schema) for c in order))
        job = Job(self.job.target, self.job.dataset, self.job.version, self.job.expression, giod_columns)
        return GiodSource(job, self.schema_text, form, full)


def from_selection(sel: Selection, columns: Sequence[str] | None = None, *,
                   partition_events: int | None = None) -> Any:
    """The selected events as a ``dask_awkward.Array``: one partition per database (or database range)."""
    if dak is None:
        raise MissingDependency("dask-awkward is not installed: pip install 'giod[dask]'")
    job, parts = plan(sel, columns, partition_events=partition_events)
    schema = sel.dataset.schema
    # the form from an empty read of the first database: exactly what every partition returns
    first = parts[0] if parts else None
    if first is None:
        dbs = sel.dataset.databases()
        if not dbs:
            raise MissingDependency("the dataset has no database to take the form of the array from")
        first = Partition(0, dbs[0], 0, 0, 0, ())
    empty = Partition(0, first.database, first.start, first.start, 0, first.sites)
    chunk, _ = read_partition(job, empty, sel.dataset.store)
    form = without_views(chunk, schema).layout.form
    source = GiodSource(job, schema.to_yaml(), form)
    if not parts:
        return dak.from_awkward(form.length_zero_array(highlevel=True), npartitions=1)
    return dak.from_map(source, parts, label="from-giod")
